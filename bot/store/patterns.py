"""`LOCKGUARD_LOCK_PATTERNS` parsed: comma-separated SCAN globs as bytes, none of which may match
lockguard's own keys."""

from __future__ import annotations

import re
from collections.abc import Callable

from bot.core.globs import literal, open_class
from bot.store.keyspace import LEGACY_PREFIX, OWN_PREFIXES, PREFIX, SLOT_PREFIX

_HEX_ESCAPE = re.compile(r"\\x([0-9a-fA-F]{2})")
#: Not a separator, but typed as one: `lock:*;job:*`, `lock:* job:*`.
_SEPARATOR_TYPO = re.compile(r"\s*[;|\s]\s*")
#: `\x` not followed by two hex digits: a typo, never read as the literal `x` it would match.
_BROKEN_ESCAPE = re.compile(r"\\x(?![0-9a-fA-F]{2})(.{0,2})", re.DOTALL)
#: How a refusal names each of lockguard's prefixes.
_OWN_NAMES = {
    PREFIX: "",
    LEGACY_PREFIX: " (its old key format's, renamed when lockguard upgrades)",
    SLOT_PREFIX: " (the keys it keeps in a lock's own Redis Cluster slot)",
}


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
        if broken := _BROKEN_ESCAPE.search(item):
            raise ValueError(
                f"pattern {_shown(item)} has a broken escape {_shown(broken.group(0))}: "
                "expected \\xHH with two hex digits naming a byte, e.g. \\x17"
            )
        if typo := _SEPARATOR_TYPO.search(item):
            raise ValueError(
                f"pattern {_shown(item)} holds {_shown(typo.group(0))}: patterns are separated "
                f"by commas ({_shown(_SEPARATOR_TYPO.sub(',', item))}); a key with that "
                "character in it is matched by naming it as \\xHH"
            )
        pattern = escaped_bytes(item, literal)
        if open_class(pattern):
            raise ValueError(
                f"pattern {_shown(item)} opens a class with '[' that no ']' closes (Redis would "
                "read the rest of the pattern as that class); close it, or name a literal '[' "
                "as \\x5b"
            )
        clashes = [f"{p.decode()}*{_OWN_NAMES[p]}" for p in _own_prefixes_matched(pattern)]
        if clashes:
            under = ", ".join(clashes[:-1]) + " and " + clashes[-1] if clashes[1:] else clashes[0]
            raise ValueError(
                f"pattern {_shown(item)} would also match lockguard's own keys under {under}; "
                "narrow it, e.g. 'lock:*'"
            )
        if pattern not in out:
            out.append(pattern)
    return out


def _shown(text: str) -> str:
    """Quoted as typed (backslashes not doubled); `repr` when it holds control characters."""
    return f"'{text[:80]}'" if text.isprintable() else repr(text[:80])


def escaped_bytes(text: str, byte: Callable[[bytes], bytes] = bytes) -> bytes:
    """`text` as UTF-8, each `\\xHH` naming one byte, written as `byte(that byte)` (a pattern
    names a glob character literally; a watch's key, `bot.ops.watches`, takes it as it is)."""
    out = bytearray()
    pos = 0
    for m in _HEX_ESCAPE.finditer(text):
        out += text[pos : m.start()].encode("utf-8")
        out += byte(bytes([int(m.group(1), 16)]))
        pos = m.end()
    out += text[pos:].encode("utf-8")
    return bytes(out)


def _own_prefixes_matched(pattern: bytes) -> list[bytes]:
    """Each of lockguard's prefixes under which some key could match the pattern."""
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
        return [own for own in OWN_PREFIXES if literal.startswith(own)]  # no glob: one exact key
    lit = bytes(literal)
    return [own for own in OWN_PREFIXES if own.startswith(lit) or lit.startswith(own)]
