"""Redis glob patterns (SCAN MATCH, `LOCKGUARD_LOCK_PATTERNS`) on bytes: matching, and proving
that one pattern only ever matches keys another also matches.

Both follow Redis's own `stringmatchlen`: `*` any run of bytes, `?` one byte, `[abc]`, `[a-z]`
and `[^...]` one byte of a class, `\\` makes the next byte literal. An unclosed `[` runs to the
end of the pattern, as in Redis.

`narrows(inner, outer)` is what lets a person scan less than the configured patterns but never
more (`/lockguard scan lock:billing:*` under `lock:*`): it is sound, never saying yes for a
pattern that could match a key outside `outer`, and complete enough for the patterns people
type (literals, `*`, `?`, classes).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import cache, lru_cache

#: One token of a parsed pattern: ("lit", byte), ("any", b""), ("one", b""), ("class", text).
Token = tuple[str, bytes]


def tokens(pattern: bytes) -> list[Token]:
    out: list[Token] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i : i + 1]
        if c == b"\\" and i + 1 < n:
            out.append(("lit", pattern[i + 1 : i + 2]))
            i += 2
        elif c == b"*":
            if not out or out[-1][0] != "any":  # `**` is `*`
                out.append(("any", b""))
            i += 1
        elif c == b"?":
            out.append(("one", b""))
            i += 1
        elif c == b"[":
            end = _class_end(pattern, i + 1)
            out.append(("class", pattern[i + 1 : end]))
            i = end + 1
        else:
            out.append(("lit", c))
            i += 1
    return out


def _class_end(pattern: bytes, start: int) -> int:
    """The index of the `]` closing a class opened before `start` (or the pattern's end)."""
    i = start
    while i < len(pattern):
        c = pattern[i : i + 1]
        if c == b"\\" and i + 1 < len(pattern):
            i += 2
            continue
        if c == b"]":
            return i
        i += 1
    return len(pattern)


def _class_regex(body: bytes) -> bytes:
    negate = body[:1] == b"^"
    if negate:
        body = body[1:]
    parts: list[bytes] = []
    i = 0
    while i < len(body):
        if body[i : i + 1] == b"\\" and i + 1 < len(body):
            lo = body[i + 1 : i + 2]
            i += 2
        else:
            lo = body[i : i + 1]
            i += 1
        if body[i : i + 1] == b"-" and i + 1 < len(body):
            hi = body[i + 1 : i + 2]
            i += 2
            a, b = sorted((lo, hi))
            parts.append(re.escape(a) + b"-" + re.escape(b))
        else:
            parts.append(re.escape(lo))
    if not parts:
        return b"(?!)" if not negate else b"."
    return b"[" + (b"^" if negate else b"") + b"".join(parts) + b"]"


@lru_cache(maxsize=256)
def _compiled(pattern: bytes) -> re.Pattern[bytes]:
    out = []
    for kind, text in tokens(pattern):
        if kind == "lit":
            out.append(re.escape(text))
        elif kind == "any":
            out.append(b".*")
        elif kind == "one":
            out.append(b".")
        else:
            out.append(_class_regex(text))
    return re.compile(b"".join(out), re.DOTALL)


def matches(pattern: bytes, key: bytes) -> bool:
    """Does Redis's `SCAN MATCH pattern` return `key`?"""
    return _compiled(pattern).fullmatch(key) is not None


def matches_any(patterns: Iterable[bytes], key: bytes) -> bool:
    return any(matches(p, key) for p in patterns)


def narrows(inner: bytes, outer: bytes) -> bool:
    """True only when every key `inner` matches is also matched by `outer`.

    `inner` is read as a word whose `*` and classes are opaque symbols: `outer` must match that
    word with its `*` taking any run (opaque symbols included), its `?` and classes only a single
    literal byte (a `?` or class of `inner` only by `?`, or an identical class), literals only
    the same literal."""
    word = tokens(inner)
    pat = tokens(outer)

    @cache
    def fit(i: int, j: int) -> bool:
        if j == len(pat):
            return i == len(word)
        kind, text = pat[j]
        if kind == "any":
            return fit(i, j + 1) or (i < len(word) and fit(i + 1, j))
        if i == len(word):
            return False
        wkind, wtext = word[i]
        if wkind == "any":
            return False
        if kind == "lit":
            ok = wkind == "lit" and wtext == text
        elif kind == "one":
            ok = True  # one byte, whatever `inner` has there (a literal, `?` or a class)
        else:
            ok = (
                wkind == "lit" and _compiled(b"[" + text + b"]").fullmatch(wtext) is not None
            ) or (wkind == "class" and wtext == text)
        return ok and fit(i + 1, j + 1)

    return fit(0, 0)


def narrowing(inner: bytes, outers: Sequence[bytes]) -> bytes | None:
    """The first of `outers` that `inner` narrows, or None."""
    return next((o for o in outers if narrows(inner, o)), None)
