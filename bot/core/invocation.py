"""How the person at this terminal runs lockguard, for the next steps lockguard prints, so that
a pasted command is never `command not found`: `lockguard` when that name on PATH is this
installation, `./dev.sh lockguard` in the checkout whose `.venv` runs this, else this venv's
script by its path."""

from __future__ import annotations

import os
import shutil
import sys
from functools import cache
from pathlib import Path


def _same(a: str | Path, b: str | Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


@cache
def command() -> str:
    mine = Path(sys.prefix) / "bin" / "lockguard"
    on_path = shutil.which("lockguard")
    if on_path is not None and (_same(on_path, mine) or not mine.exists()):
        return "lockguard"
    cwd = Path.cwd()
    if (cwd / "dev.sh").is_file() and _same(cwd / ".venv", sys.prefix):
        return "./dev.sh lockguard"
    if not mine.exists():
        return "lockguard"
    relative = os.path.relpath(mine, cwd)
    return relative if len(relative) < len(str(mine)) else str(mine)
