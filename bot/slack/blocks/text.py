"""Text for Slack's mrkdwn: anything lockguard did not write made inert, lengths cut with a
visible marker, and lockguard's codes (verdicts, outcomes, states) in words.

Slack reads `&`, `<`, `>` as markup (`<!channel>`, `<@U123>`) and `*`, `_`, `~`, backticks as
formatting. Redis content (keys, owners) becomes inline code, where nothing formats or pings:
escaped by `bot.core.display.escape`, backticks as `\\x60` and edge spaces as `\\x20` (both
round-trip through `unescape`), then `&<>` escaped. People's words and errors are escaped, never
code.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime

from bot.cases.case import State
from bot.core.display import escape
from bot.core.model import BigKey, Layout, Reason

#: How much of a key a message shows (the rest is cut with a note of its length).
KEY_LIMIT = 120
#: Owners and identities are shorter still.
OWNER_LIMIT = 60
ELLIPSIS = "…"

_SLACK_USER = re.compile(r"[UW][A-Z0-9]{2,30}")
_SLACK_GROUP = re.compile(r"S[A-Z0-9]{2,30}")


def is_user_id(text: str) -> bool:
    return _SLACK_USER.fullmatch(text) is not None


def is_group_id(text: str) -> bool:
    return _SLACK_GROUP.fullmatch(text) is not None


def mrkdwn(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def code(shown: str) -> str:
    """Inline code of display text (as `bot.core.display.escape` made it)."""
    if not shown:
        return "_(empty)_"
    shown = shown.replace("`", "\\x60")
    if shown[0] == " ":
        shown = "\\x20" + shown[1:]
    if len(shown) > 1 and shown[-1] == " ":
        shown = shown[:-1] + "\\x20"
    return f"`{mrkdwn(shown)}`"


def redis_text(data: bytes | str, limit: int = KEY_LIMIT) -> str:
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "backslashreplace")
    return code(escape(raw, limit))


def lock_text(key: bytes, big: BigKey | None = None, limit: int = KEY_LIMIT) -> str:
    """A lock's key; an oversized one as its first bytes, length, sha256 and last bytes."""
    if big is None:
        return redis_text(key, limit)
    digest = f", sha256 `{big.sha256}`" if big.sha256 else ""
    head, tail = redis_text(big.head, min(limit, 48)), redis_text(big.tail, min(limit, 48))
    return f"{head}…_(oversized: {big.size:,} bytes{digest})_…{tail}"


def owner_text(owner: str) -> str:
    """`owner `web-1``, or `owner unknown`."""
    return f"owner {redis_text(owner, OWNER_LIMIT)}" if owner else "owner unknown"


def layout_text(layout: Layout, counter: int | None) -> str:
    if layout is Layout.COUNTER and counter is not None:
        return f"counter (n={counter:,})"
    return layout.value


def cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)].rstrip() + ELLIPSIS


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def plain(text: str, limit: int | None = None) -> str:
    """People's words or an error's detail, escaped and cut without splitting an entity. Control
    characters show as `\\xHH`: Slack shows nothing for them, and JSON spends six on each."""
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
    """A Slack user id as a mention; any other name (a CLI `--by`) as code."""
    if is_user_id(user):
        return f"<@{user}>"
    return redis_text(user, OWNER_LIMIT)


def utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def date(ms: int) -> str:
    """In the reader's own timezone; UTC where Slack does not understand the token."""
    return f"<!date^{ms // 1000}^{{date_short_pretty}} {{time}}|{utc(ms)}>"


def count(n: int, word: str, plural_word: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else plural_word or word + 's'}"


def word(text: str, limit: int = 40) -> str:
    return plain(escape(text.encode("utf-8", "backslashreplace"), limit))


def refusal_text(detail: str) -> str:
    return f"Not done: {plain(detail, 2000)}"


def in_order(names: Iterable[str], order: Iterable[str]) -> list[str]:
    """`names` in the order of `order`; others after them, by name."""
    known = list(order)
    return sorted(names, key=lambda k: (known.index(k) if k in known else len(known), k))


#: Short names, for counts and compact lines.
REASON_LABEL = {
    Reason.INFINITE_TTL: "no expiry",
    Reason.STALE_LEASE: "stale lease",
    Reason.KEPT_ALIVE_BY_CONTENDERS: "kept alive by contenders",
    Reason.LONG_HELD_RENEWING: "long held, renewing",
    Reason.HEALTHY: "healthy",
    Reason.NOT_A_LOCK: "not a lock",
    Reason.DEADLOCK: "deadlock",
}

#: What the verdict means for the lock.
REASON_WORDS = {
    Reason.INFINITE_TTL: "nobody will ever release it",
    Reason.STALE_LEASE: "held past the threshold with no renewal",
    Reason.KEPT_ALIVE_BY_CONTENDERS: "abandoned, but failed contenders keep resetting its TTL",
    Reason.LONG_HELD_RENEWING: (
        "held long, but its owner keeps renewing it (looks alive; not offered)"
    ),
    Reason.HEALTHY: "healthy",
    Reason.NOT_A_LOCK: "not a lock lockguard recognises: counted, never touched",
    Reason.DEADLOCK: (
        "its holder and the holders of other locks wait in each other's queues: no TTL will "
        "ever end it; releasing this one lock breaks the cycle"
    ),
}

#: What happened to a lock on approval (`bot.release.Outcome` values, and `dry_run`).
OUTCOME_WORDS = {
    "released": "released",
    "skipped_reacquired": "skipped: re-acquired since it was seen",
    "already_gone": "already gone",
    "recovered": "recovered: its owner renewed it",
    "skipped_unproven": "refused: not provably the holder that was approved",
    "error": "error",
    "dry_run": "dry run: not touched",
}


def outcome_words(outcome: str) -> str:
    return OUTCOME_WORDS.get(outcome, outcome.replace("_", " "))


#: The state of a case, as its message's header says it.
STATE_WORDS = {
    State.OPENING: "Being opened",
    State.PENDING: "Waiting for a decision",
    State.APPROVED: "Releasing",
    State.REJECTED: "Rejected",
    State.EXPIRED: "Expired",
    State.RELEASED: "Released",
    State.INCOMPLETE: "Incomplete",
}
