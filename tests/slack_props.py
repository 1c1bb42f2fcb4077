"""Strategies and checks shared by the Slack property tests (`test_slack_properties*.py`).

The strategies make what Redis may hold (key and identity bytes, owner text, a server's version
string) out of pieces that mean something to Slack's mrkdwn or to a reader: mentions, links,
formatting, entities, quotes, newlines, RTL and zero-width marks, invalid UTF-8, and text near
the display limits or far past them. Some carry `CANARY`, a word lockguard never writes itself, so
a check can tell where Redis content ended up.

The checks read a message as Slack would: `assert_inert` walks every string of a message and
allows a `<…>` only where the builder wrote it, `entries` finds the numbered lines of a list, and
`assert_shows` reads a key's inline code back to its exact bytes.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from hypothesis import strategies as st

from bot.cases.case import Case, CaseLock, State
from bot.core.display import escape, unescape
from bot.core.model import FINDING_REASONS, Finding, Layout, Reason
from bot.scan.result import ScanResult
from bot.slack.blocks.text import is_user_id

NOW = 1_800_000_000_000
HOUR = 3_600_000
#: Where the messages say Redis is (configuration, not Redis content).
ENDPOINTS = ["redis.internal:6379", "10.0.0.5:6380/2", "[::1]:6379", "localhost:6379/15"]
#: Lowercase, so never a Slack id; in no sentence lockguard writes.
CANARY = "qzcanary"

MARKUP = [
    "<!channel>",
    "<!here>",
    "<!everyone>",
    "<@U123>",
    "<@W0ABC|bob>",
    "<#C1>",
    "<#C1|general>",
    "<!subteam^S0GRP>",
    "<!date^1700000000^{date}|x>",
    "<https://evil.example|click>",
    "<mailto:a@b.c|mail>",
    "<http://x>",
    "*bold*",
    "_it_",
    "~s~",
    "`",
    "```",
    "`code`",
    "&amp;",
    "&lt;",
    "&gt;",
    "&",
    "<",
    ">",
    "> quote",
    "\n> quote",
    "\n",
    "\r\n",
    "\t",
    " ",
    "  ",
    "\\",
    "\\x60",
    "\\x20",
    "\\x",
    "@here",
    "#general",
    "https://evil.example",
    ":smile:",
    "\u200f",
    "\u200e",
    "\u202e",
    "\u2066",
    "\u200b",
    "\u200d",
    "\ufeff",
    "\u2028",
    "\u00a0",
    "é",
    "e\u0301",
    "🔒",
    "日本",
    "…(+9 chars)",
    "_(empty)_",
    "\x00",
    "\x1b[31m",
    "\x7f",
    CANARY,
]
BYTE_PIECES = [p.encode() for p in MARKUP] + [b"\xff", b"\xc3", b"\x80", b"\xed\xa0\x80"]

#: The notes lockguard writes on a finding it does not offer (`bot.core.rules`, `bot.core.layouts`).
NOTES = [
    "",
    "not a type a lock is kept in",
    "a list: no lock library keeps a lock in one",
    "a hash with more fields than lockguard reads: its holders cannot all be proven",
    "held 12s so far: offered for release once held past the 300s threshold",
    "a hash whose fields are not a lock holder's (Redisson: <uuid>:<thread> -> count)",
    "the value is 3,000,000 bytes long: not a lock token",
]

user_ids = st.from_regex(r"[UW][A-Z0-9]{2,12}", fullmatch=True)
group_ids = st.from_regex(r"S[A-Z0-9]{2,12}", fullmatch=True)
case_ids = st.from_regex(r"LG-[0-9]{6}-[0-9a-f]{6}", fullmatch=True)


def _huge(pieces: list[Any], empty: Any) -> st.SearchStrategy[Any]:
    """One to four pieces repeated to 100 … 20,000 characters (or bytes)."""
    return st.tuples(
        st.lists(st.sampled_from(pieces), min_size=1, max_size=4), st.integers(100, 20_000)
    ).map(lambda t: (empty.join(t[0]) * (t[1] // len(empty.join(t[0])) + 1))[: t[1]])


def redis_bytes(max_pieces: int = 10) -> st.SearchStrategy[bytes]:
    """A key or identity: any bytes, markup-laden, huge now and then."""
    return st.one_of(
        st.lists(
            st.one_of(st.sampled_from(BYTE_PIECES), st.binary(max_size=8)), max_size=max_pieces
        ).map(b"".join),
        st.binary(max_size=200),
        _huge(BYTE_PIECES, b""),
    )


def redis_text(max_pieces: int = 10, *, canary: bool = True) -> st.SearchStrategy[str]:
    """An owner (or any text from Redis, or typed by a person): markup-laden, huge now and then."""
    pieces = MARKUP if canary else [p for p in MARKUP if p != CANARY]
    return st.one_of(
        st.lists(st.one_of(st.sampled_from(pieces), st.text(max_size=8)), max_size=max_pieces).map(
            "".join
        ),
        st.text(max_size=200),
        _huge(pieces, ""),
    )


def one_line(text: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return text.map(lambda s: re.sub(r"[\n\r\u2028\u2029\x0b\x0c\x1c-\x1e\x85]", " ", s))


def findings(keys: st.SearchStrategy[bytes] | None = None) -> st.SearchStrategy[Finding]:
    return st.builds(
        Finding,
        key=keys if keys is not None else redis_bytes(),
        type=st.sampled_from(["string", "hash", "list", "zset"]),
        layout=st.sampled_from(Layout),
        reason=st.sampled_from(Reason),
        identity=redis_bytes(4),
        owner=st.one_of(st.just(""), redis_text()),
        ttl_ms=st.integers(-2, 10**10),
        held_seconds=st.floats(-10, 1e9, allow_nan=False),
        idle_seconds=st.integers(0, 10**7),
        observations=st.integers(0, 10**4),
        rearms=st.integers(0, 10**4),
        counter=st.none() | st.integers(0, 10**15),
        observed_ms=st.just(NOW),
        partial=st.booleans(),
        releasable=st.booleans(),
        note=st.sampled_from(NOTES),
    )


@st.composite
def scan_results(draw: st.DrawFn, many: int = 3_000) -> ScanResult:
    """A scan's result: up to 25 drawn findings, now and then copied out to `many` (each copy
    with its own key, and its key and owner cut to a few hundred characters: escaping 20 kB
    costs milliseconds, and thousands of them would make a slow test, not a stronger one), and
    counts of the locks the scan did not keep."""
    base = draw(st.lists(findings(), max_size=25))
    extra = draw(st.one_of(st.just(0), st.integers(0, 40), st.integers(0, many))) if base else 0
    worst = base + [
        replace(f, key=f.key[:300] + b"#%d" % i, owner=f.owner[:150])
        for i, f in ((i, base[i % len(base)]) for i in range(extra))
    ]
    by: Counter[Reason] = Counter(f.reason for f in worst)
    hidden = draw(st.sampled_from([0, 0, 1, 9_000, 10**6]))  # flagged, not kept
    by[draw(st.sampled_from(sorted(FINDING_REASONS)))] += hidden
    by[Reason.HEALTHY] += draw(st.integers(0, 10**7))
    by[Reason.NOT_A_LOCK] += draw(st.integers(0, 10**4))
    proposal = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "already_in_a_live_case": st.integers(0, 10**6),
                "snoozed_after_rejection": st.integers(0, 10**6),
            },
        )
    )
    return ScanResult(
        scanned=sum(by.values()),
        by_reason=by,
        worst=worst,
        oldest_held_seconds=draw(st.floats(0, 1e9)),
        server_time_ms=NOW,
        duration_seconds=draw(st.floats(0, 1e5)),
        proposal=proposal,
    )


def case_locks() -> st.SearchStrategy[CaseLock]:
    return st.builds(
        CaseLock,
        key=redis_bytes(),
        layout=st.sampled_from(Layout),
        identity=redis_bytes(4),
        reason=st.sampled_from(Reason),
        ttl_ms=st.integers(-2, 10**10),
        observed_ms=st.just(NOW),
        held_seconds=st.floats(-10, 1e9, allow_nan=False),
        owner=st.one_of(st.just(""), redis_text()),
        counter=st.none() | st.integers(0, 10**15),
    )


OUTCOMES = [
    "released",
    "skipped_reacquired",
    "already_gone",
    "recovered",
    "skipped_unproven",
    "error",
    "dry_run",
]
#: Who decided: a Slack user id, or a name given to the CLI's `--by` (stored in Redis).
deciders = st.one_of(st.just(""), user_ids, redis_text(4))


@st.composite
def cases(
    draw: st.DrawFn, locks: tuple[CaseLock, ...] | None = None, case_id: str | None = None
) -> Case:
    """A case in any state: hostile keys, deciders, reasons and outcome details."""
    if locks is None:
        locks = tuple(draw(st.lists(case_locks(), max_size=50)))
    outcomes = []
    for lk in locks:
        if draw(st.booleans()):
            outcomes.append(
                {
                    "key": "",
                    "key_hex": lk.key.hex(),
                    "outcome": draw(st.sampled_from(OUTCOMES)),
                    # one line: a newline-free detail keeps each lock's line findable
                    "detail": draw(one_line(redis_text(4, canary=False))),
                    "event_published": draw(st.booleans()),
                }
            )
    created = NOW + draw(st.integers(-30 * 24 * HOUR, 0))
    return Case(
        id=case_id if case_id is not None else draw(case_ids),
        state=draw(st.sampled_from(State)),
        created_ms=created,
        expires_ms=created + draw(st.integers(0, 48 * HOUR)),
        locks=locks,
        lock_count=len(locks) + draw(st.sampled_from([0, 0, 1, 50, 10**6])),
        decided_by=draw(deciders),
        decided_ms=draw(st.none() | st.integers(NOW, NOW + HOUR)),
        decision_reason=draw(st.one_of(st.just(""), redis_text(canary=False))),
        outcomes=tuple(outcomes),
        outcome_counts=draw(st.dictionaries(st.sampled_from(OUTCOMES), st.integers(1, 10**6))),
        dry_run=draw(st.booleans()),
    )


# -- reading messages as Slack does ------------------------------------------------------------

DATE = re.compile(r"<!date\^\d+\^\{date_short_pretty\} \{time\}\|[^<>|]+>")
TOKEN = re.compile(r"<[^<>]*>")
_CODE = re.compile(r"`[^`\n]*`")
_ENTITY = re.compile(r"&(?:amp|lt|gt);")
#: A numbered line of a list: its number, the key's inline code, and the rest of the entry (its
#: continuation lines are indented by six spaces).
_ENTRY = re.compile(r"^(\d+)\. (`[^`\n]*`|_\(empty\)_) · (.*(?:\n {6}.*)*)", re.M)
#: A `\xHH` escape cut short at the end of a truncated text.
_PARTIAL = re.compile(r"\\(?:x[0-9a-fA-F]?)?$")


def strings(msg: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(kind, text) of every string in a message or view: its fallback `text`, every text
    object's text (`mrkdwn` or `plain_text`), and any other string value (ids, values, metadata)
    as `other`."""
    if "text" in msg and isinstance(msg["text"], str) and "type" not in msg:
        yield "fallback", msg["text"]
    yield from _walk({k: v for k, v in msg.items() if k != "text" or "type" in msg})


def _walk(node: Any) -> Iterator[tuple[str, str]]:
    if isinstance(node, Mapping):
        for k, v in node.items():
            if isinstance(v, str):
                if k == "text":
                    yield ("plain_text" if node.get("type") == "plain_text" else "mrkdwn"), v
                elif k != "type":
                    yield "other", v
            else:
                yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def all_text(msgs: Iterable[Mapping[str, Any]]) -> str:
    return "\n".join(s for m in msgs for _, s in strings(m))


def tokens(msgs: Iterable[Mapping[str, Any]]) -> Counter[str]:
    """Every `<…>` Slack would read as a mention, link or date, in all of `msgs`."""
    return Counter(t for m in msgs for _, s in strings(m) for t in TOKEN.findall(s))


def assert_inert(msgs: Iterable[Mapping[str, Any]], allowed: Iterable[str] = ()) -> None:
    """Nothing in `msgs` pings, links or quotes but what the builder meant to: every `<`, `>` and
    `&` belongs to a date token, an `allowed` mention, or an entity; and `CANARY` (Redis content)
    is nowhere but inside inline code."""
    keep = set(allowed)
    for msg in msgs:
        for kind, text in strings(msg):
            rest = DATE.sub("", text)
            rest = TOKEN.sub(lambda m: "" if m.group(0) in keep else m.group(0), rest)
            assert "<" not in rest, (kind, text)
            assert ">" not in rest, (kind, text)
            assert "&" not in _ENTITY.sub("", rest), (kind, text)
            outside = _CODE.sub("", text) if kind == "mrkdwn" else text
            assert CANARY not in outside, (kind, text)


def mentions(users: Iterable[str]) -> set[str]:
    """The mentions a builder may write for these Slack users (`bot.slack.blocks.text.mention`)."""
    return {f"<@{u}>" for u in users if is_user_id(u)}


def section_texts(msgs: Iterable[Mapping[str, Any]]) -> Iterator[str]:
    for msg in msgs:
        for block in msg["blocks"]:
            if block["type"] == "section" and "text" in block:
                yield block["text"]["text"]


def entries(msgs: Iterable[Mapping[str, Any]]) -> list[tuple[int, str, str]]:
    """(number, key code, rest) of every numbered line of the lists in `msgs`, in order: the
    sections `pack` made, each starting with such a line."""
    return [
        (int(m[1]), m[2], m[3])
        for text in section_texts(msgs)
        if _ENTRY.match(text)
        for m in _ENTRY.finditer(text)
    ]


def unslack(text: str) -> str:
    """Text as Slack shows it: its three entities undone."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def assert_shows(code: str, data: bytes, limit: int) -> None:
    """`code` (inline code in a message) shows `data`: exactly, read back with
    `bot.core.display.unescape`, or when `data` is longer than `limit` characters escaped, its start
    and a note of how much is cut."""
    if code == "_(empty)_":
        assert data == b""
        return
    assert len(code) >= 2, code
    assert code[0] == code[-1] == "`", code
    body = unslack(code[1:-1])
    # Slack does not show spaces at the edges of inline code: they are written `\x20`
    assert body == body.strip(" "), code
    full = escape(data, None)
    if len(full) <= limit:
        assert unescape(body) == data, (code, data)
        return
    note = f"…(+{len(full) - limit} chars)"
    assert body.endswith(note), (code, note)
    head = _PARTIAL.sub("", body[: -len(note)])
    assert data.startswith(unescape(head)), (code, data[:200])
    assert len(head) >= limit - 3, code


def owner_bytes(owner: str) -> bytes:
    return owner.encode("utf-8", "backslashreplace")


def flagged(result: ScanResult) -> list[Finding]:
    return [f for f in result.worst if f.reason in FINDING_REASONS]
