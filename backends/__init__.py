"""Backends that execute lowered copy programs."""
