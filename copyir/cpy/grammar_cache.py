"""Where lark keeps the analysed grammar between runs.

Building the LALR tables of the authoring syntax takes about a quarter of a
second, most of a short command's run. lark can store them (`cache=PATH`;
it checks a hash of the grammar, its options and lark's version before it
trusts the file, and rebuilds when the file is missing, stale or cannot be
read). The file is a pickle, so it lives in a directory only this user can
write, never in the shared temporary directory.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def grammar_cache(grammar: str) -> str | bool:
    """A cache file for this grammar, or False when there is no private
    directory to keep it in (`COPYIR_NO_CACHE=1` also turns it off)."""
    if os.environ.get("COPYIR_NO_CACHE"):
        return False
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    directory = Path(base) / "copyir"
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = directory.stat()
        if info.st_uid != os.getuid() or info.st_mode & 0o022:
            return False
    except (OSError, RuntimeError):  # no home, or a read-only one
        return False
    digest = hashlib.sha256(grammar.encode("utf-8")).hexdigest()[:16]
    return str(directory / f"grammar-{digest}.lark")
