"""One place that turns bytes into text a person can read: escaped, truncated, hex when binary.

Keys and values are shown, never interpreted: control bytes, non-UTF-8 bytes and backslashes are
escaped as `\\xHH` (so the text round-trips to the exact bytes with `unescape`), and long values are
cut with a note of how many bytes were left out.
"""

from __future__ import annotations

import hashlib
import re

DEFAULT_LIMIT = 120
#: A key (or identity) written into JSON (`scan --json`, case records, reclaim events, audit) is
#: escaped and cut at this many characters; `key_hex` beside it always carries the exact bytes.
JSON_TEXT_LIMIT = 1024
#: A key longer than this many bytes is named in release events and audit entries (`key_ref`) by
#: a prefix and its sha256, not by its text and hex: one 512 KiB key would otherwise make every
#: event and audit entry about it a megabyte.
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
        shown = text[:limit]
        return f"{shown}…(+{len(text) - limit} chars)"
    return text


def _needs_escape(ch: str) -> bool:
    return ch == "\\" or not ch.isprintable()


def _escape_bytes(data: bytes) -> str:
    out = []
    for b in data:
        if 0x20 <= b <= 0x7E and b != 0x5C:
            out.append(chr(b))
        else:
            out.append(f"\\x{b:02x}")
    return "".join(out)


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


def key_json(key: bytes) -> dict[str, str]:
    """A key as JSON that must name its exact bytes shows it (`scan --json`, case records):
    `key` for people (escaped, cut at JSON_TEXT_LIMIT), `key_hex` for machines (the exact
    bytes). Release events and audit entries use `key_ref`."""
    return {"key": escape(key, JSON_TEXT_LIMIT), "key_hex": key.hex()}


def key_ref(key: bytes) -> dict[str, str | int]:
    """A key as release events and audit entries name it: `key_json` up to BIG_KEY_BYTES;
    a bigger key by its first BIG_KEY_PREFIX_BYTES (escaped, with a note of the bytes left
    out), `key_sha256` (hex sha256 of the exact bytes) and `key_bytes` (its length), so an entry
    stays small however big the key. Whatever must find the key again (a case) keeps `key_json`."""
    if len(key) <= BIG_KEY_BYTES:
        return {**key_json(key)}
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
