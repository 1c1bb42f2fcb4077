"""`LOCKGUARD_LOCK_PATTERNS` parsed: comma-separated SCAN globs as bytes, none of which may match
lockguard's own keys (`bot.store.keyspace`). `bot.core.globs` matches and narrows them."""

from __future__ import annotations

import re

from bot.store.keyspace import OWN_PREFIXES, PREFIX

_GLOB_META = b"*?[]\\"
_HEX_ESCAPE = re.compile(r"\\x([0-9a-fA-F]{2})")


def parse_patterns(text: str) -> list[bytes]:
    """`lock:*, \\x17*` -> [b"lock:*", b"\\x17*"]. `\\xHH` names a byte; a glob character named
    that way is matched literally. Refuses empty patterns and patterns that would also match
    lockguard's own keys."""
    out: list[bytes] = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            raise ValueError(
                "expected comma-separated glob patterns such as 'lock:*,job-lock:*', "
                "found an empty pattern"
            )
        pattern = _pattern_bytes(item)
        if _may_match_own_keys(pattern):
            raise ValueError(
                f"pattern {item!r} would also match lockguard's own keys ({PREFIX.decode()}*); "
                "narrow it, e.g. 'lock:*'"
            )
        if pattern not in out:
            out.append(pattern)
    return out


def _pattern_bytes(item: str) -> bytes:
    out = bytearray()
    pos = 0
    for m in _HEX_ESCAPE.finditer(item):
        out += item[pos : m.start()].encode("utf-8")
        byte = int(m.group(1), 16)
        if byte in _GLOB_META:
            out += b"\\"
        out.append(byte)
        pos = m.end()
    out += item[pos:].encode("utf-8")
    return bytes(out)


def _may_match_own_keys(pattern: bytes) -> bool:
    """True when some key under one of lockguard's prefixes (today's and the old format's) could
    match: the pattern's literal start (up to its first glob character) is consistent with it."""
    literal = bytearray()
    i = 0
    while i < len(pattern):
        c = pattern[i : i + 1]
        if c == b"\\" and i + 1 < len(pattern):
            literal += pattern[i + 1 : i + 2]
            i += 2
            continue
        if c in (b"*", b"?", b"["):
            break
        literal += c
        i += 1
    else:
        return bytes(literal).startswith(OWN_PREFIXES)  # no glob: one exact key
    lit = bytes(literal)
    return any(own.startswith(lit) or lit.startswith(own) for own in OWN_PREFIXES)
