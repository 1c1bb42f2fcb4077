"""Reading a file a setting names (the targets file, a `password_file`, a secret's `NAME_FILE`).

Whoever edits the targets file may point lockguard at any path, and a `password_file`'s content is
sent to a Redis the same file names. So only a regular file of at most `limit` bytes is read:
nothing under /proc, /sys or /dev (`/proc/self/environ` holds the Slack token), no FIFO (it
would hang start-up), socket or device. Links are followed (Kubernetes Secrets) and their
target checked. An error names the path and what is wrong, never what the file holds.
"""

from __future__ import annotations

import os
import stat

#: Where no file lockguard reads may live, links followed: the kernel's and the devices'.
FORBIDDEN_DIRS = ("/proc", "/sys", "/dev")


def read_regular(path: str, limit: int) -> bytes:
    """The file's bytes, or ValueError naming `path` and what is wrong."""
    real = os.path.realpath(path)
    top = next((d for d in FORBIDDEN_DIRS if real == d or real.startswith(d + "/")), None)
    if top is not None:
        raise ValueError(f"{path} is under {top}: expected a regular file")
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise ValueError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise ValueError(f"{path} is a folder, expected a file") from None
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or type(exc).__name__}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{path} is not a regular file ({_kind(info.st_mode)})")
        if info.st_size > limit:
            raise ValueError(f"{path} is {info.st_size} bytes, over the {limit} accepted")
        with os.fdopen(fd, "rb", closefd=False) as f:
            raw = f.read(limit + 1)
    finally:
        os.close(fd)
    if len(raw) > limit:
        raise ValueError(f"{path} is over the {limit} bytes accepted")
    return raw


def _kind(mode: int) -> str:
    for test, word in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return word
    return "not a plain file"
