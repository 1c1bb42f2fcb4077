"""Text for Slack's mrkdwn: anything from Redis made inert, lengths cut with a visible marker.

Slack reads `&`, `<` and `>` as markup (`<!channel>`, `<@U123>`, `<url|label>`), and `*`, `_`,
`~` and backticks as formatting. Everything lockguard did not write itself goes through here:

- Redis content (keys, owners, identities) becomes inline code: escaped and cut by
  `bot.core.display.escape` (binary bytes as `\\xHH`), backticks inside shown as `\\x60` and spaces
  at its edges as `\\x20` (both round-trip through `bot.core.display.unescape`), then `&`, `<`, `>`
  escaped. Inside code nothing formats, and nothing pings.
- Words written by people (a reject reason) or carried from errors are escaped, never code.

Every mrkdwn text object the builders make is `verbatim`, so Slack does not turn a bare `@here`,
`#channel` or URL into a mention or a link either.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from bot.core.display import escape
from bot.core.model import BigKey

#: How much of a key a message shows (the rest is cut with a note of its length).
KEY_LIMIT = 120
#: Owners and identities are shorter still.
OWNER_LIMIT = 60
ELLIPSIS = "…"

_SLACK_USER = re.compile(r"[UW][A-Z0-9]{2,30}")
_SLACK_GROUP = re.compile(r"S[A-Z0-9]{2,30}")


def is_user_id(text: str) -> bool:
    """A Slack user id (U… or W…), as Slack sends it and lockguard records a decider."""
    return _SLACK_USER.fullmatch(text) is not None


def is_group_id(text: str) -> bool:
    """A Slack user group id (S…)."""
    return _SLACK_GROUP.fullmatch(text) is not None


def mrkdwn(text: str) -> str:
    """`text` with Slack's three control characters escaped: shown as typed, never markup."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def code(shown: str) -> str:
    """Inline code of display text (as `bot.core.display.escape` made it): inert in mrkdwn."""
    if not shown:
        return "_(empty)_"
    shown = shown.replace("`", "\\x60")
    if shown[0] == " ":
        shown = "\\x20" + shown[1:]
    if len(shown) > 1 and shown[-1] == " ":
        shown = shown[:-1] + "\\x20"
    return f"`{mrkdwn(shown)}`"


def redis_text(data: bytes | str, limit: int = KEY_LIMIT) -> str:
    """A key, owner or identity from Redis as inert inline code, cut at `limit` characters."""
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "backslashreplace")
    return code(escape(raw, limit))


def lock_text(key: bytes, big: BigKey | None = None, limit: int = KEY_LIMIT) -> str:
    """A lock's key (`redis_text`); an oversized one (`big`) as its first bytes, its length and
    sha256 (what its release is checked against), and its last bytes."""
    if big is None:
        return redis_text(key, limit)
    digest = f", sha256 `{big.sha256}`" if big.sha256 else ""
    head, tail = redis_text(big.head, min(limit, 48)), redis_text(big.tail, min(limit, 48))
    return f"{head}…_(oversized: {big.size:,} bytes{digest})_…{tail}"


def cut(text: str, limit: int) -> str:
    """`text` at most `limit` characters long, ending in "…" when it was cut."""
    if len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)].rstrip() + ELLIPSIS


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def plain(text: str, limit: int | None = None) -> str:
    """Words lockguard did not write (a reason typed by a person, an error's detail): escaped
    for mrkdwn and, with `limit`, cut so that the escaped text fits (no entity is split). Control
    characters (but newline and tab) show as `\\xHH`: Slack shows nothing for them, and JSON
    would spend six characters on each of the message's size limit."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    out = mrkdwn(text)
    if limit is None or len(out) <= limit:
        return out
    kept: list[str] = []
    size = 1  # the "…"
    for ch in text:
        piece = mrkdwn(ch)
        if size + len(piece) > limit:
            break
        kept.append(piece)
        size += len(piece)
    return "".join(kept).rstrip() + ELLIPSIS


def mention(user: str) -> str:
    """Who decided: a Slack user id becomes a mention; any other name (a CLI `--by`) code."""
    if is_user_id(user):
        return f"<@{user}>"
    return redis_text(user, OWNER_LIMIT)


def utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def date(ms: int) -> str:
    """A time Slack shows in the reader's own timezone; UTC where the token is not understood."""
    return f"<!date^{ms // 1000}^{{date_short_pretty}} {{time}}|{utc(ms)}>"


def count(n: int, word: str, plural_word: str | None = None) -> str:
    """ "1 lock", "3,200 locks"."""
    return f"{n:,} {word if n == 1 else plural_word or word + 's'}"


def word(text: str, limit: int = 40) -> str:
    """A name lockguard did not write (a layout, an outcome from a record): shown escaped."""
    return plain(escape(text.encode("utf-8", "backslashreplace"), limit))
