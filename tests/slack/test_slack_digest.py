"""The digest: what a person reading it in the channel notices, and that Slack accepts it."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import redis
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bot.cases.case import Case, CaseLock, State
from bot.core.model import Finding, Layout, Reason
from bot.core.rules import Policy
from bot.scan.loop import run_scan
from bot.scan.result import AGE_LABELS, ScanOptions, ScanResult
from bot.slack.blocks.digest import digest_message
from bot.slack.blocks.guard import GuardHealth, WatchState
from bot.slack.blocks.inventory import BAR, BAR_WIDTH
from bot.slack.blocks.kit import MESSAGE_BLOCKS
from bot.store import scans
from tests.block_kit import check_message
from tests.core.test_layouts import uuid1_hex

NOW = 1_800_000_000_000
HOUR = 3_600_000
DAY = 24 * HOUR
ENDPOINT = "redis.internal:6379"
DATE = re.compile(r"<!date\^(\d+)\^\{date_short_pretty\} \{time\}\|[^<>|]+>")
HOSTILE = [
    b"lock:<!channel>",
    b"lock:*x*",
    b"\x00\xff<@U1>",
    b"lock:<https://evil|click>",
    b"lock:`code` _i_ ~s~ @here &amp;",
    b" lock:edge ",
    b"\xff" * 10_000,
]


def finding(
    key: bytes,
    reason: Reason = Reason.HEALTHY,
    *,
    owner: str = "web-1",
    held: float = 60.0,
    ttl_ms: int = 30_000,
    layout: Layout = Layout.REDIS_PY,
) -> Finding:
    return Finding(
        key=key,
        type="string",
        layout=layout,
        reason=reason,
        identity=b"tok",
        owner=owner,
        ttl_ms=ttl_ms,
        held_seconds=held,
        idle_seconds=1,
        observations=5,
        rearms=0,
        counter=None,
        observed_ms=NOW,
    )


def summary(
    oldest: list[Finding] | None = None,
    *,
    hist: dict[str, int] | None = None,
    patterns: dict[bytes, int] | None = None,
    healthy: int = 40,
    flagged: int = 0,
) -> dict[str, Any]:
    """What `bot.store.scans.last_scan` returns after a scan: the real `ScanResult.summary()`."""
    oldest = oldest if oldest is not None else [finding(b"lock:a")]
    by_reason = Counter(
        {Reason.HEALTHY: healthy, Reason.STALE_LEASE: flagged, Reason.NOT_A_LOCK: 2}
    )
    result = ScanResult(
        scanned=sum(by_reason.values()),
        by_reason=by_reason,
        by_layout=Counter({Layout.REDIS_PY: healthy + flagged, Layout.OTHER: 2}),
        oldest_held_seconds=max((f.held_seconds for f in oldest), default=0.0),
        server_time_ms=NOW - 60_000,
        duration_seconds=0.7,
        by_pattern=Counter(patterns or {b"lock:*": healthy + flagged + 2}),
        oldest=oldest,
        age_histogram=[(hist or {"<1m": healthy + flagged}).get(label, 0) for label in AGE_LABELS],
    )
    return result.summary()


def health(**kw: Any) -> GuardHealth:
    base: dict[str, Any] = {
        "scans_ok": 96,
        "scans_failed": 0,
        "last_success_ms": NOW - 60_000,
        "next_scan_ms": NOW + 14 * 60_000,
        "leader": "lockguard-7d9f-abc",
        "overdue": False,
        "watches": (),
    }
    return GuardHealth(**{**base, **kw})


def case(
    case_id: str, state: State, *, created_ms: int = NOW - HOUR, key: bytes = b"lock:a", **kw: Any
) -> Case:
    lock = CaseLock(
        key=key,
        layout=Layout.REDIS_PY,
        identity=b"tok",
        reason=Reason.STALE_LEASE,
        ttl_ms=-1,
        observed_ms=created_ms,
        held_seconds=7200.0,
        owner="web-1",
    )
    return Case(
        id=case_id,
        state=state,
        created_ms=created_ms,
        expires_ms=created_ms + DAY,
        locks=(lock,),
        lock_count=1,
        **kw,
    )


def digest(
    last: dict[str, Any] | None = None,
    cases: list[Case] | None = None,
    h: GuardHealth | None = None,
    since_ms: int | None = NOW - DAY,
) -> dict[str, Any]:
    msg = digest_message(
        last if last is not None else summary(),
        cases or [],
        h or health(),
        endpoint=ENDPOINT,
        now_ms=NOW,
        since_ms=since_ms,
    )
    check_message(msg)
    return msg


def texts(node: Any) -> list[str]:
    """Every `text` string anywhere in a message, a view or a block."""
    if isinstance(node, dict):
        return [
            t
            for k, v in node.items()
            for t in ([v] if k == "text" and isinstance(v, str) else texts(v))
        ]
    if isinstance(node, list):
        return [t for v in node for t in texts(v)]
    return []


def all_text(node: Any) -> str:
    return "\n".join(texts(node))


def assert_inert(node: Any, *, mentions: bool = False) -> None:
    """Nothing from Redis became markup: the only `<` are lockguard's date tokens (and, where
    `mentions`, mentions of well-formed Slack user ids); every mrkdwn text is verbatim."""
    for text in texts(node):
        bare = DATE.sub("", text)
        if mentions:
            bare = re.sub(r"<@[UW][A-Z0-9]{2,30}>", "", bare)
        assert "<" not in bare, text
        assert ">" not in bare, text
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("type") == "mrkdwn":
                assert item.get("verbatim") is True
            stack += list(item.values())
        elif isinstance(item, list):
            stack += item


# -- the inventory -----------------------------------------------------------------------------


def test_an_ageing_healthy_lock_is_listed_with_its_age_and_owner() -> None:
    last = summary(
        [
            finding(b"lock:nightly-report", held=72 * 3600, owner="cron-host-3"),
            finding(b"lock:hourly", held=2 * 3600),
        ]
    )
    text = all_text(digest(last))
    line = next(t for t in text.splitlines() if "lock:nightly-report" in t)
    assert "3d00h" in line
    assert "owner `cron-host-3`" in line
    assert "healthy" in line
    assert "healthy ones included" in text
    assert text.index("lock:nightly-report") < text.index("lock:hourly")  # oldest first


def test_locks_are_counted_per_pattern_and_per_layout() -> None:
    last = summary(patterns={b"lock:billing:*": 30, b"bull:*:lock": 12})
    text = all_text(digest(last))
    assert "`lock:billing:*` · 30 keys" in text
    assert "`bull:*:lock` · 12 keys" in text
    assert "40 redis_py" in text
    assert "2 other" in text
    assert "40 healthy" in text


def _bars(msg: dict[str, Any]) -> dict[str, tuple[int, int]]:
    block = next(t for t in texts(msg) if t.startswith("*Lock ages*"))
    body = block.split("```")[1].strip("\n")
    out = {}
    for row in body.splitlines():
        label, rest = row.replace("&lt;", "<").replace("&gt;", ">").split(" ", 1)
        out[label] = (rest.count(BAR), int(rest.split()[-1].replace(",", "")))
    return out


def test_the_age_histogram_bars_are_proportional_to_the_largest_bucket() -> None:
    hist = {"<1m": 1200, "<15m": 600, "<1h": 300, "<6h": 0, "<1d": 3, "<7d": 60, ">=7d": 120}
    bars = _bars(digest(summary(hist=hist)))
    assert list(bars) == list(AGE_LABELS)
    assert {label: n for label, (_, n) in bars.items()} == hist
    assert bars["<1m"][0] == BAR_WIDTH  # the largest bucket is the full width
    assert bars["<15m"][0] == BAR_WIDTH // 2
    assert bars["<1h"][0] == BAR_WIDTH // 4
    assert bars[">=7d"][0] == 2
    assert bars["<7d"][0] == 1
    assert bars["<1d"][0] == 1  # tiny but there: still visible
    assert bars["<6h"][0] == 0


# -- loud when the guard is not working ----------------------------------------------------------


def test_no_scan_yet_is_said_loudly_at_the_top() -> None:
    msg = digest_message(
        None,
        [],
        health(scans_ok=0, scans_failed=4, last_success_ms=None),
        endpoint=ENDPOINT,
        now_ms=NOW,
        since_ms=None,
    )
    check_message(msg)
    assert msg["text"].startswith("lockguard has not completed a scan")
    assert msg["blocks"][0]["type"] == "header"
    assert "lockguard has not completed a scan" in msg["blocks"][0]["text"]["text"]
    assert "*lockguard has not completed a scan*" in msg["blocks"][1]["text"]["text"]
    assert "*4 scans failed*" in msg["blocks"][1]["text"]["text"]
    assert "Lock ages" not in all_text(msg)  # no calm-looking numbers


def test_overdue_scans_are_said_at_the_top() -> None:
    msg = digest(h=health(overdue=True, last_success_ms=NOW - 3 * HOUR))
    warn = msg["blocks"][1]["text"]["text"]
    assert "*Scans are overdue*" in warn
    assert "3h00m ago" in warn
    assert "overdue" in msg["text"]


def test_a_calm_guard_has_no_alarm() -> None:
    msg = digest()
    assert msg["blocks"][0]["text"]["text"] == f"lockguard digest: {ENDPOINT}"
    assert ":rotating_light:" not in all_text(msg)
    assert ":warning:" not in all_text(msg)


def test_silence_watches_late_ones_first_and_missing_ones_said_as_missing() -> None:
    watches = (
        WatchState("job:ok:last-run", 30.0, 3600.0, False),
        WatchState("job:etl:last-run", 26 * 3600.0, 86400.0, True),
        WatchState("job:backup:last-run", None, 86400.0, True),
    )
    msg = digest(h=health(watches=watches))
    text = all_text(msg)
    assert "*2 silence watches are late*" in msg["blocks"][1]["text"]["text"]
    missing = next(t for t in text.splitlines() if "job:backup:last-run" in t)
    assert "*missing*" in missing
    assert "allowed 1d00h" in missing
    late = next(t for t in text.splitlines() if "job:etl:last-run" in t)
    assert "*late*" in late
    assert "1d02h ago" in late
    assert (
        text.index("job:backup:last-run")
        < text.index("job:etl:last-run")
        < text.index("job:ok:last-run")
    )


def test_the_guards_own_health() -> None:
    msg = digest(h=health(scans_ok=95, scans_failed=1))
    text = all_text(msg)
    assert "95 completed, 1 failed" in text
    last = next(t for t in texts(msg) if t.startswith("*Last successful scan*"))
    assert DATE.search(last)
    assert int(DATE.search(last).group(1)) == (NOW - 60_000) // 1000
    assert "(1m00s ago)" in last
    assert "(in 14m00s)" in text
    assert "*Schedules run by*\n`lockguard-7d9f-abc`" in text
    nobody = all_text(digest(h=health(leader="", next_scan_ms=None)))
    assert "*Schedules run by*\nunknown" in nobody
    assert "none scheduled" in nobody


# -- cases since the last digest -----------------------------------------------------------------


def test_a_case_rejected_since_the_last_digest_shows_who_and_why() -> None:
    cases = [
        case(
            "LG-270115-aaaaaa",
            State.REJECTED,
            decided_by="U0ALICE42",
            decided_ms=NOW - 2 * HOUR,
            decision_reason="nightly batch still running",
        ),
        case(
            "LG-270115-bbbbbb",
            State.RELEASED,
            decided_by="U0BOB",
            decided_ms=NOW - HOUR,
            outcome_counts={"released": 2, "already_gone": 1},
        ),
        case(
            "LG-270110-cccccc", State.RELEASED, created_ms=NOW - 5 * DAY, decided_ms=NOW - 4 * DAY
        ),
    ]
    msg = digest(cases=cases)
    text = all_text(msg)
    rejected = text[text.index("LG-270115-aaaaaa") :].split("\n`LG-")[0]
    assert "*Rejected*" in rejected
    assert "decided by `U0ALICE42`" in rejected  # shown, not a mention: a digest pings nobody
    assert "“nightly batch still running”" in rejected
    assert "2 released · 1 already gone" in text
    assert "LG-270110-cccccc" not in text  # decided before the last digest
    assert "2 cases of 2 locks" in text
    assert "<@" not in text


def test_500_cases_are_summarised_with_and_n_more() -> None:
    cases = [
        case(
            f"LG-270115-{i:06x}",
            State.REJECTED,
            decided_by="U0ALICE",
            decided_ms=NOW - HOUR,
            decision_reason="r" * 300,
        )
        for i in range(500)
    ]
    msg = digest(cases=cases)
    text = all_text(msg)
    shown = len(re.findall(r"`LG-270115-[0-9a-f]{6}`", text))
    more = re.search(r"…and ([\d,]+) more cases: `/lockguard cases`", text)
    assert more
    assert shown + int(more.group(1).replace(",", "")) == 500
    assert "500 cases of 500 locks: 500 rejected" in text
    assert len(msg["blocks"]) <= MESSAGE_BLOCKS


# -- nothing from Redis is markup; any size fits -------------------------------------------------


def test_hostile_keys_owners_and_names_stay_inert() -> None:
    last = summary(
        [finding(k, owner="<!here> *boss*") for k in HOSTILE],
        patterns={b"lock:<!channel>*": 3, b"\xfe<@U2>": 1},
    )
    cases = [
        case(
            "LG-<!channel>",
            State.REJECTED,
            key=HOSTILE[0],
            decided_by="<@U0EVIL>",
            decided_ms=NOW,
            decision_reason="<!everyone> see <https://evil|here>",
        )
    ]
    watches = (WatchState("job:<!channel>", None, 60.0, True),)
    msg = digest(last, cases, health(leader="<!subteam^S1>", watches=watches))
    assert_inert(msg)
    text = all_text(msg)
    assert "`lock:&lt;!channel&gt;`" in text
    assert "`\\x00\\xff&lt;@U1&gt;`" in text
    assert "owner `&lt;!here&gt; *boss*`" in text
    assert "…(+" in text  # the 10 kB key is cut, with a note
    assert "<!" not in msg["text"]
    assert "<@" not in msg["text"]


def _sizes(most: int) -> st.SearchStrategy[int]:
    """Small sizes, and often the largest: where the limits bite."""
    return st.sampled_from([0, 1, most]) | st.integers(0, most)


def _scan(
    oldest: list[Finding], tpl: bytes, n: int, hist: list[int], layouts: dict[str, int]
) -> dict[str, Any]:
    last = summary(
        oldest,
        patterns={tpl * 3 + b"%d" % i: i for i in range(n)},
        hist=dict(zip(AGE_LABELS, hist, strict=True)),
    )
    last["by_layout"].update(layouts)  # a record lockguard did not write: still inert, fits
    return last


def _cases(
    n: int, key: bytes, who: str, reason: str, state: State, outcomes: dict[str, int]
) -> list[Case]:
    return [
        case(
            f"LG-270115-{i:06x}",
            state,
            key=key,
            decided_by=who,
            decided_ms=NOW,
            decision_reason=reason,
            outcome_counts={"released": i, **outcomes},
            approvals=((who, NOW),) if state is State.PENDING else (),
        )
        for i in range(n)
    ]


_keys = st.builds(lambda b, n: b * n, st.binary(max_size=40), _sizes(300))
_entries = st.builds(
    lambda k, o, held, reason, t: finding(k, reason, owner=o, held=held, ttl_ms=t),
    _keys,
    st.text(max_size=80),
    st.floats(0, 1e9),
    st.sampled_from(list(Reason)),
    st.integers(-2, 10**10),
)
SCANS = st.none() | st.builds(
    _scan,
    st.lists(_entries, max_size=10),
    st.binary(max_size=100),
    _sizes(2000),
    st.lists(st.integers(0, 10**9), min_size=7, max_size=7),
    st.dictionaries(st.text(max_size=60), st.integers(0, 10**9), max_size=20),
)
_watches = st.lists(
    st.builds(
        WatchState,
        st.text(max_size=300),
        st.none() | st.floats(0, 1e9),
        st.floats(0, 1e9),
        st.booleans(),
        st.sampled_from(["", "wrong type", "unreadable"]),
    ),
    max_size=60,
)
HEALTH = st.builds(
    GuardHealth,
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.none() | st.integers(1, NOW),
    st.none() | st.integers(NOW, 2 * NOW),
    st.text(max_size=300),
    st.booleans(),
    _watches.map(tuple),
)
CASES = st.builds(
    _cases,
    _sizes(500),
    _keys,
    st.text(max_size=60),
    st.text(max_size=600),
    st.sampled_from(list(State)),
    st.dictionaries(st.text(max_size=100), st.integers(0, 10**6), max_size=14),
)
#: The largest input the brief names: 10 oldest locks with 10 kB binary keys, 2,000 patterns,
#: 500 cases, 60 watches, hostile text everywhere.
WORST = {
    "last": _scan(
        [finding(bytes(range(256)) * 40, owner="<!here>" * 20) for _ in range(10)],
        b"<!channel>\xff" * 10,
        2000,
        [10**9] * 7,
        {"<@U1>" * 20: 5},
    ),
    "cases": _cases(
        500,
        b"\xff<" * 5000,
        "<@U0EVIL>",
        "<!everyone> " * 60,
        State.INCOMPLETE,
        {f"\x00<!{i}>" * 10: 1 for i in range(14)},
    ),
    "h": GuardHealth(
        5,
        5,
        NOW - DAY,
        NOW + 60_000,
        "<!channel>" * 40,
        True,
        tuple(WatchState("<!here>" * 50, None, 60.0, True) for _ in range(60)),
    ),
}


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(last=SCANS, cases=CASES, h=HEALTH, since=st.none() | st.integers(0, NOW))
@example(since=None, **WORST)
@example(last=None, cases=[], h=GuardHealth(), since=None)
def test_every_digest_fits_a_slack_message_and_stays_inert(
    last: dict[str, Any] | None, cases: list[Case], h: GuardHealth, since: int | None
) -> None:
    msg = digest_message(last, cases, h, endpoint=ENDPOINT, now_ms=NOW, since_ms=since)
    check_message(msg)
    assert_inert(msg)
    if last is None:
        assert "lockguard has not completed a scan" in msg["blocks"][0]["text"]["text"]
    elif last["oldest"]:
        assert any(t.startswith("1. ") for t in texts(msg))  # the oldest lock is always shown


def test_a_real_scans_record_gives_a_digest_that_ages_a_healthy_lock(r: redis.Redis) -> None:
    now_ms = int(r.time()[0]) * 1000
    r.set(b"lock:nightly", uuid1_hex(now_ms - 72 * HOUR), px=600_000)  # taken 3 days ago
    for i in range(5):
        r.set(b"lock:fresh:%d" % i, uuid1_hex(now_ms - 1_000), px=600_000)
    policy = Policy(stale_threshold_ms=30 * DAY, flag_infinite_ttl=False)
    run_scan(r, ScanOptions([b"lock:*"], policy))
    msg = digest_message(
        scans.last_scan(r), [], health(), endpoint=ENDPOINT, now_ms=now_ms, since_ms=now_ms - DAY
    )
    check_message(msg)
    text = all_text(msg)
    first = next(t for t in text.splitlines() if t.startswith("1. "))
    assert first.startswith("1. `lock:nightly` · held *3d00h* · owner ")
    assert "owner unknown" not in first
    assert "healthy" in first
    assert "`lock:*` · 6 keys" in text
    assert "6 healthy" in text
    assert _bars(msg)["<1m"] == (BAR_WIDTH, 5)
