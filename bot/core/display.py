"""Bytes as text a person can read: control and non-UTF-8 bytes and backslashes escaped as
`\\xHH` (round-tripping with `unescape`), long values cut with a note of what was left out.
"""

from __future__ import annotations

import hashlib
import re

from bot.core.model import BigKey

DEFAULT_LIMIT = 120
#: A key (or identity) written into JSON (`scan --json`, case records, reclaim events, audit) is
#: escaped and cut at this many characters; `key_hex` beside it always carries the exact bytes.
JSON_TEXT_LIMIT = 1024
#: A longer key is named in release events and audit entries (`key_ref`) by a prefix and its
#: sha256, so that no entry grows with the key.
BIG_KEY_BYTES = 16 * 1024
#: How many of a big key's bytes `key_ref` shows (escaped, so at most 4 characters a byte).
BIG_KEY_PREFIX_BYTES = 256

_PLAIN = re.compile(rb"[\x20-\x5b\x5d-\x7e]*")  # printable ASCII except backslash


def escape(data: bytes, limit: int | None = DEFAULT_LIMIT) -> str:
    """Readable, unambiguous text for `data`; at most `limit` characters before the cut note."""
    if _PLAIN.fullmatch(data) is not None:
        text = data.decode("ascii")
    else:
        try:
            decoded = data.decode("utf-8")
        except UnicodeDecodeError:
            decoded = None
        if decoded is not None and not any(_needs_escape(ch) for ch in decoded):
            text = decoded
        elif decoded is not None:
            text = "".join(
                _escape_bytes(ch.encode("utf-8")) if _needs_escape(ch) else ch for ch in decoded
            )
        else:
            text = _escape_bytes(data)
    if limit is not None and len(text) > limit:
        return f"{text[:limit]}…(+{len(text) - limit} chars)"
    return text


def _needs_escape(ch: str) -> bool:
    return ch == "\\" or not ch.isprintable()


def _escape_bytes(data: bytes) -> str:
    return "".join(chr(b) if 0x20 <= b <= 0x7E and b != 0x5C else f"\\x{b:02x}" for b in data)


def unescape(text: str) -> bytes:
    """The exact bytes behind `escape(data, limit=None)`; also reads `\\xHH` typed by a person."""
    out = bytearray()
    i = 0
    while i < len(text):
        ch = text[i]
        if text.startswith("\\x", i):
            pair = text[i + 2 : i + 4]
            if len(pair) == 2 and all(c in "0123456789abcdefABCDEF" for c in pair):
                out.append(int(pair, 16))
                i += 4
                continue
        out += ch.encode("utf-8")
        i += 1
    return bytes(out)


def to_hex(data: bytes) -> str:
    return data.hex()


def key_json(key: bytes, big: BigKey | None = None) -> dict[str, str | int]:
    """A key as JSON that must name its exact bytes: `key` for people (escaped, cut), `key_hex`
    for machines; an oversized key as `big_json`."""
    if big is not None:
        return big_json(big)
    return {"key": escape(key, JSON_TEXT_LIMIT), "key_hex": key.hex()}


def big_json(big: BigKey) -> dict[str, str | int]:
    """An oversized key as JSON: its text, length, first and last bytes, and sha256 once known."""
    digest = {"key_sha256": big.sha256} if big.sha256 else {}
    return {
        "key": big_text(big, None),
        "key_bytes": big.size,
        "key_head_hex": big.head.hex(),
        "key_tail_hex": big.tail.hex(),
        **digest,
    }


def big_text(big: BigKey, limit: int | None = 48) -> str:
    """An oversized key for people, never mistaken for a key of that text."""
    digest = f", sha256 {big.sha256}" if big.sha256 else ""
    head, tail = escape(big.head, limit), escape(big.tail, limit)
    return f"{head}…[oversized: {big.size:,} bytes{digest}]…{tail}"


def key_text(key: bytes, big: BigKey | None = None, limit: int | None = DEFAULT_LIMIT) -> str:
    return escape(key, limit) if big is None else big_text(big, limit and min(limit, 48))


def key_ref(key: bytes, big: BigKey | None = None) -> dict[str, str | int]:
    """A key as release events and audit entries name it: `key_json` up to BIG_KEY_BYTES, else a
    prefix, `key_sha256` and `key_bytes`. Whatever must find the key again keeps `key_json`."""
    if big is not None or len(key) <= BIG_KEY_BYTES:
        return key_json(key, big)
    shown = escape(key[:BIG_KEY_PREFIX_BYTES], limit=None)
    return {
        "key": f"{shown}…(+{len(key) - BIG_KEY_PREFIX_BYTES} bytes)",
        "key_sha256": hashlib.sha256(key).hexdigest(),
        "key_bytes": len(key),
    }


def duration(seconds: float) -> str:
    """A compact age: 45s, 12m05s, 3h07m, 4d02h."""
    s = int(seconds)
    if s < 0:
        return "-" + duration(-seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"


def ttl(ttl_ms: int) -> str:
    if ttl_ms == -1:
        return "none"
    if ttl_ms < 0:
        return "gone"
    return duration(ttl_ms / 1000)
