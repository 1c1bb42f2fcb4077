"""Redis glob patterns on bytes: matching, and proving one pattern only matches keys another does.

Patterns are read exactly as Redis's `stringmatchlen` (src/util.c) reads them, quirks included
(`[a-]` is the range `]`..`a` and the class goes on; ranges compare as signed `char`; `[]` matches
nothing; an unclosed class runs to the end; only `*` and the empty pattern match the empty key),
so what lockguard proves is what Redis then does. A pattern is read once into tokens (a star, or
a 256-bit byte set); matching and narrowing use tables, never recursion, so no pattern can
exhaust the stack. `narrows` is sound (never yes for a pattern that could match a key outside
`outer`): a person may scan less than the configured patterns, never more.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache

ALL_BYTES = (1 << 256) - 1
#: A token: None for a star, else the set of bytes that one byte may be (bit b set: byte b).
Token = int | None
_STAR = b"*"[0]
_ONE = b"?"[0]
_OPEN = b"["[0]
_CLOSE = b"]"[0]
_ESC = b"\\"[0]
_NOT = b"^"[0]
_DASH = b"-"[0]
_META = frozenset(b"*?[]\\")


def tokens(pattern: bytes) -> tuple[Token, ...]:
    """`pattern` as Redis reads it: stars (None) and one-byte sets (masks)."""
    return _read(pattern)[0]


def open_class(pattern: bytes) -> bool:
    """Does a `[` of `pattern` open a class that runs to its end (`lock:[`)? Redis reads it so
    (the rest of the pattern is that class's bytes), which is never what was meant."""
    return _read(pattern)[1]


def _read(pattern: bytes) -> tuple[tuple[Token, ...], bool]:
    out: list[Token] = []
    left_open = False
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == _STAR:
            if not out or out[-1] is not None:
                out.append(None)
            i += 1
        elif c == _ONE:
            out.append(ALL_BYTES)
            i += 1
        elif c == _OPEN:
            mask, i, closed = _class(pattern, i + 1)
            left_open = not closed
            out.append(mask)
        elif c == _ESC and i + 1 < n:
            out.append(1 << pattern[i + 1])
            i += 2
        else:
            out.append(1 << c)
            i += 1
    return tuple(out), left_open


def _class(p: bytes, i: int) -> tuple[int, int, bool]:
    """The class after the `[` at `p[i-1]`: its byte set, where the pattern goes on, and whether
    a `]` closed it, step for step as `stringmatchlen` walks it."""
    n = len(p)
    negate = i < n and p[i] == _NOT
    if negate:
        i += 1
    mask = 0
    closed = False
    while True:
        left = n - i
        if left >= 2 and p[i] == _ESC:
            i += 1
            mask |= 1 << p[i]
        elif left >= 1 and p[i] == _CLOSE:
            i += 1
            closed = True
            break
        elif left == 0:
            break  # unclosed: the class ran to the end of the pattern
        elif left >= 3 and p[i + 1] == _DASH:
            mask |= _range(p[i], p[i + 2])
            i += 2
        else:
            mask |= 1 << p[i]
        i += 1
    return (ALL_BYTES & ~mask if negate else mask), min(i, n), closed


def _signed(b: int) -> int:
    return b - 256 if b >= 128 else b


def _range(a: int, b: int) -> int:
    """The bytes from `a` to `b` (either order) as C's signed `char` orders them."""
    lo, hi = sorted((_signed(a), _signed(b)))
    mask = 0
    for s in range(lo, hi + 1):
        mask |= 1 << (s % 256)
    return mask


@lru_cache(maxsize=256)
def _machine(pattern: bytes) -> tuple[list[int], int, int, int, tuple[int, ...]]:
    """The pattern as a bit-parallel automaton: per byte, the token positions that accept it;
    the positions that are stars; the accepting position's bit; the last star's bit (0: no
    star) and the byte sets after it (the tail: no star among them)."""
    toks = tokens(pattern)
    stars = 0
    accepts = [0] * 256
    for t, tok in enumerate(toks):
        if tok is None:
            stars |= 1 << t
            continue
        for b in range(256):
            if tok >> b & 1:
                accepts[b] |= 1 << t
    last = stars.bit_length() - 1
    tail = tuple(t for t in toks[last + 1 :] if t is not None) if stars else ()
    return accepts, stars, 1 << len(toks), (1 << last) if stars else 0, tail


def matches(pattern: bytes, key: bytes) -> bool:
    """Does Redis's `SCAN MATCH pattern` return `key`? The tail after the last star is compared
    with the key's end, and the automaton stops at the last star (a huge key costs a few steps)."""
    if not key:
        return pattern in (b"", b"*")
    accepts, stars, done, last, tail = _machine(pattern)
    if last:
        if len(key) < len(tail):
            return False
        end = len(key) - len(tail)
        if not all(tok >> b & 1 for tok, b in zip(tail, key[end:], strict=True)):
            return False
        key, done = key[:end], last
    states = 1 | ((1 & stars) << 1)  # before any byte: position 0, and past it when a star
    for b in key:
        if states & last:
            return True
        states = ((states & accepts[b]) << 1) | (states & stars)
        states |= (states & stars) << 1  # a star may also match nothing more
        if not states:
            return False
    return bool(states & done)


def matches_any(patterns: Iterable[bytes], key: bytes) -> bool:
    return any(matches(p, key) for p in patterns)


def literal(data: bytes) -> bytes:
    """A pattern that matches exactly `data`: each of `*?[]\\` escaped."""
    return bytes(b for c in data for b in ((_ESC, c) if c in _META else (c,)))


def literal_head(pattern: bytes) -> bytes:
    """The literal bytes every key `pattern` matches starts with."""
    head = bytearray()
    for tok in tokens(pattern):
        if tok is None or tok & (tok - 1):  # a star, or a set of more than one byte
            break
        head.append(tok.bit_length() - 1)
    return bytes(head)


def narrows(inner: bytes, outer: bytes) -> bool:
    """True only when every key `inner` matches is also matched by `outer`."""
    if matches(inner, b"") and not matches(outer, b""):
        return False
    word, pat = tokens(inner), tokens(outer)
    n, m = len(word), len(pat)
    # fit[i][j]: inner's tokens from i on fit within outer's from j on
    fit = [[False] * (m + 1) for _ in range(n + 1)]
    fit[n][m] = True
    for i in range(n, -1, -1):
        for j in range(m - 1, -1, -1):
            tok = pat[j]
            sym = word[i] if i < n else None
            if tok is None:
                fit[i][j] = fit[i][j + 1] or (i < n and fit[i + 1][j])
            elif sym is not None:
                fit[i][j] = (sym & ~tok) == 0 and fit[i + 1][j + 1]
    return fit[0][0]


def narrowing(inner: bytes, outers: Sequence[bytes]) -> bytes | None:
    return next((o for o in outers if narrows(inner, o)), None)
