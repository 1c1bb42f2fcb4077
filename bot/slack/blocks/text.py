"""Text for Slack's mrkdwn: anything from Redis made inert, lengths cut with a visible marker,
and lockguard's codes (verdicts, outcomes, states) in words a person understands.

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


def owner_text(owner: str) -> str:
    """`owner `web-1``, or `owner unknown`."""
    return f"owner {redis_text(owner, OWNER_LIMIT)}" if owner else "owner unknown"


def layout_text(layout: Layout, counter: int | None) -> str:
    """A lock's layout; a counting semaphore's with its count."""
    if layout is Layout.COUNTER and counter is not None:
        return f"counter (n={counter:,})"
    return layout.value


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


def refusal_text(detail: str) -> str:
    """Any other refusal from the engine (a `LockguardError`'s clean message), escaped."""
    return f"Not done: {plain(detail, 2000)}"


def in_order(names: Iterable[str], order: Iterable[str]) -> list[str]:
    """`names` in the order of `order`; any other after them, by name."""
    known = list(order)
    return sorted(names, key=lambda k: (known.index(k) if k in known else len(known), k))


# -- lockguard's codes in words ----------------------------------------------------------------

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
