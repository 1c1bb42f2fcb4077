"""The last-scan record keeps the scan's worst findings by impact (what digests and the Home tab
list as "Worst now"): in score order, with the impact, bounded however many and however big the
keys; only the scan that committed the record writes them, and a narrowed scan none. Waiters are
real connections subscribed to a Redisson lock's channel on a real redis-server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from bot.cases.opening import scan_and_propose
from bot.core.display import DEFAULT_LIMIT
from bot.core.impact import impact_words
from bot.core.model import Finding, Layout, Reason
from bot.core.rules import Policy
from bot.evidence import ranking
from bot.scan.result import ScanOptions
from bot.store import scans
from bot.store.keyspace import LAST_SCAN
from tests.cases.test_reclaim import DRY, dump
from tests.conftest import RedisServer
from tests.evidence.test_evidence import env as env  # the fixture: CLI env on real redis
from tests.test_cli_scan_notes import rows, run

OWNER = b"6f1c2c1e-6f3a-4a5b-9c1d-2b3c4d5e6f70:87"
OPTS = ScanOptions(patterns=[b"lock:*"], policy=Policy(stale_threshold_ms=1_000))


@pytest.fixture
def waiters(redis_server: RedisServer) -> Iterator[list[Any]]:
    """Pub/sub connections of other processes (Redisson clients waiting), closed after."""
    made: list[Any] = []
    yield made
    for p in made:
        p.close()


def subscribe(server: RedisServer, made: list[Any], channel: bytes, n: int) -> None:
    for _ in range(n):
        p = server.client().pubsub()
        made.append(p)
        p.subscribe(channel)
        assert p.get_message(timeout=2) is not None


def scan(r: redis.Redis, options: ScanOptions = OPTS) -> dict[str, Any]:
    scan_and_propose(r, options, DRY, propose=False)
    last = scans.last_scan(r)
    assert last is not None
    return last


def test_the_record_lists_the_worst_findings_by_impact_with_their_evidence(
    real_redis: redis.Redis, redis_server: RedisServer, waiters: list[Any]
) -> None:
    r = real_redis
    r.hset(b"lock:settle", OWNER, b"1")  # no TTL: its watchdog died with its JVM
    r.hset(b"lock:quiet", OWNER, b"1")
    r.set(b"lock:old", b"tok")
    r.set(b"lock:fine", b"tok", px=600_000)  # healthy: never among the worst
    subscribe(redis_server, waiters, b"redisson_lock__channel:{lock:settle}", 3)
    before = dump(r)
    worst = scan(r)["worst"]
    assert worst[0]["key"] == "lock:settle"
    assert {e["key"] for e in worst} == {"lock:settle", "lock:quiet", "lock:old"}
    first = worst[0]
    assert (first["layout"], first["reason"], first["ttl_ms"]) == ("redisson", "infinite_ttl", -1)
    assert first["owner"]
    assert first["held_seconds"] >= 0
    assert (first["impact"]["waiters"], first["impact"]["woken"]) == (3, 3)
    scores = [e["impact"]["score"] for e in worst]
    assert scores == sorted(scores, reverse=True)
    old = next(e for e in worst if e["key"] == "lock:old")
    assert old["impact"]["waiters"] is None
    assert old["impact"]["owner_alive"] is None
    assert old["impact"]["owner_evidence"] == "lockguard cannot tell for python_redis_lock locks"
    assert dump(r) == before  # no byte of any lock changed


def test_at_most_ten_are_kept_and_big_hostile_keys_are_cut(r: redis.Redis) -> None:
    hostile = [b"lock:<!channel>", b"lock:\x00\xff`x`", b"lock:" + b"\xff" * 10_000]
    for k in hostile + [b"lock:%02d" % i for i in range(20)]:
        r.set(k, b"tok")
    worst = scan(r)["worst"]
    assert len(worst) == scans.WORST_KEPT == 10
    assert all(len(e["key"]) <= DEFAULT_LIMIT + 20 for e in worst)
    assert len(json.dumps(worst)) < 6_000  # small whatever the keys: no exact bytes kept
    cut = scans.worst_entry(finding(b"lock:" + b"\xff" * 10_000))["key"]
    assert cut.startswith("lock:\\xff")
    assert cut.endswith("…(+39885 chars)")
    assert scans.worst_entry(finding(b"lock:<!channel>"))["key"] == "lock:<!channel>"


def test_a_narrowed_scan_keeps_the_last_full_scans_record(r: redis.Redis) -> None:
    r.set(b"lock:a", b"tok")
    r.set(b"lock:billing:b", b"tok")
    full = scan(r)
    narrowed = ScanOptions(patterns=[b"lock:billing:*"], policy=OPTS.policy, narrowed=True)
    assert scan(r, narrowed) == full
    assert {e["key"] for e in full["worst"]} == {"lock:a", "lock:billing:b"}


def test_only_the_scan_that_committed_the_record_adds_to_it(r: redis.Redis) -> None:
    ranked = [finding(b"lock:x")]
    assert scans.record_worst(r, 1, ranked) is False  # no record at all: none is made
    assert r.exists(LAST_SCAN) == 0
    r.set(LAST_SCAN, json.dumps({"server_time_ms": 2, "scanned": 5}))
    assert scans.record_worst(r, 1, ranked) is False  # another scan's record stands
    assert json.loads(r.get(LAST_SCAN) or b"") == {"server_time_ms": 2, "scanned": 5}
    r.set(LAST_SCAN, b"\xffnot json")
    assert scans.record_worst(r, 2, ranked) is False
    assert r.get(LAST_SCAN) == b"\xffnot json"
    r.set(LAST_SCAN, json.dumps({"server_time_ms": 2, "scanned": 5}))
    assert scans.record_worst(r, 2, [*ranked, finding(b"lock:ok", Reason.HEALTHY)]) is True
    last = scans.last_scan(r) or {}
    assert last["scanned"] == 5
    assert [e["key"] for e in last["worst"]] == ["lock:x"]  # flagged findings only


def test_a_refused_write_is_logged_and_the_scan_goes_on(
    r: redis.Redis, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refused(*_args: object) -> bool:
        raise redis.exceptions.NoPermissionError("no permissions")

    monkeypatch.setattr(scans, "record_worst", refused)
    r.set(b"lock:a", b"tok")
    result, _ = scan_and_propose(r, OPTS, DRY, propose=False)
    assert result.findings == 1
    last = scans.last_scan(r) or {}
    assert last["finding_count"] == 1
    assert "worst" not in last
    assert "worst_not_recorded" in caplog.text


@pytest.mark.parametrize(
    ("layout", "said"),
    [
        (Layout.REDIS_PY, "lockguard cannot tell for redis_py locks"),
        (Layout.COUNTER, "lockguard cannot tell for counter locks"),
        (Layout.PYTHON_REDIS_LOCK, "lockguard cannot tell for python_redis_lock locks"),
    ],
)
def test_an_owner_no_source_can_tell_about_is_said_in_one_sentence(
    r: redis.Redis, layout: Layout, said: str
) -> None:
    [ranked] = ranking.rank(r, [finding(b"lock:x", layout=layout)])
    assert ranked.impact is not None
    assert (ranked.impact.owner_alive, ranked.impact.owner_evidence) == (None, said)
    assert impact_words(ranked.impact, layout) == ""  # the words say only what is known


def test_json_says_the_sentence_and_the_table_and_slack_say_nothing_unknown(
    env: redis.Redis,
) -> None:
    """`scan --json` says in `owner_evidence` that lockguard cannot tell; the table's IMPACT
    column and the Slack lines (both `impact_words`) say only what is known: "-"."""
    env.set(b"lock:old", b"tok")
    env.set(b"lock:py", b"b64tokenb64tokenb64token")  # python-redis-lock's 24-char id
    code, out = run("scan", "--json")
    assert code == 1
    found = {f["key"]: f for f in json.loads(out)["findings"]}
    assert (
        found["lock:old"]["impact"]["owner_evidence"]
        == "lockguard cannot tell for python_redis_lock locks"
    )
    said = found["lock:py"]["impact"]["owner_evidence"]
    assert said == f"lockguard cannot tell for {found['lock:py']['layout']} locks"
    code, table = run("scan")
    assert code == 1
    row = rows(table)["lock:old"].split()
    # LAYOUT, KEY, OWNER, IMPACT (a token under lock: is python-redis-lock's, its own id=)
    assert row[4:8] == ["python_redis_lock", "lock:old", "-", "-"]


def finding(
    key: bytes, reason: Reason = Reason.INFINITE_TTL, *, layout: Layout = Layout.STRING
) -> Finding:
    return Finding(
        key=key,
        type="string",
        layout=layout,
        reason=reason,
        identity=b"tok",
        owner="",
        ttl_ms=-1,
        held_seconds=60.0,
        idle_seconds=1,
        observations=1,
        rearms=0,
        counter=None,
        observed_ms=0,
    )


@pytest.mark.real
def test_on_a_cluster_the_record_lists_the_worst_too(rc: RedisCluster) -> None:
    for k in (b"lock:a", b"lock:b", b"{x}lock:c"):
        rc.set(k, b"tok")
    worst = scan(rc)["worst"]  # type: ignore[arg-type]
    assert {e["key"] for e in worst} == {"lock:a", "lock:b"}
