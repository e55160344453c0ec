"""The authoring syntax (`.cpy`): its grammar, parser and printer."""
