"""Self-test of tests/bullmq_keys.py: the planted BullMQ keys have the types, TTLs and value
shapes intended. (lockguard's verdicts on these keys are tested elsewhere.)"""

from __future__ import annotations

import re
import time

import pytest
import redis

from tests.bullmq_keys import (
    LOCK,
    LOCK_DURATION_MS,
    LOCK_RENEW_TIME_MS,
    NOT_A_LOCK,
    plant_bullmq,
    plant_bullmq_abandoned_lock,
)

pytestmark = pytest.mark.real

UUID4 = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
TOKEN = re.compile(rf"^({UUID4}):(\d+)$".encode())
UUID_ID = rf"{UUID4}"

# suffix after b"<prefix>:<queue>:" -> Redis type
FIXED_TYPES = {
    "wait": "list",
    "active": "list",
    "delayed": "zset",
    "prioritized": "zset",
    "completed": "zset",
    "failed": "zset",
    "waiting-children": "zset",
    "marker": "zset",
    "repeat": "zset",
    "stalled": "set",
    "stalled-check": "string",
    "limiter": "string",
    "id": "string",
    "pc": "string",
    "meta": "hash",
    "events": "stream",
    "metrics:completed": "hash",
    "metrics:failed": "hash",
    "metrics:completed:data": "list",
    "metrics:failed:data": "list",
    "repeat:hourly-digest": "hash",
    "de:digest:42": "string",
    "de:welcome:io@example.com": "string",
}
PATTERN_TYPES = [
    (rf"^(\d+|{UUID_ID}|repeat:hourly-digest:\d+)$", "hash"),  # job hashes
    (rf"^(\d+|{UUID_ID}):lock$", "string"),
    (r"^\d+:logs$", "list"),
    (rf"^{UUID_ID}:dependencies$", "set"),
    (rf"^{UUID_ID}:(processed|failed)$", "hash"),
    (rf"^{UUID_ID}:unsuccessful$", "zset"),
]
WITH_TTL = {"stalled-check", "limiter", "de:digest:42"}


def expected_type(suffix: str) -> str:
    if suffix in FIXED_TYPES:
        return FIXED_TYPES[suffix]
    for pattern, kind in PATTERN_TYPES:
        if re.match(pattern, suffix):
            return kind
    raise AssertionError(f"unexpected key suffix {suffix!r}")


def suffixes(keys: dict[bytes, str], base: bytes = b"bull:emails:") -> dict[str, str]:
    assert all(k.startswith(base) for k in keys)
    return {k[len(base) :].decode(): v for k, v in keys.items()}


def test_mapping_is_exactly_the_keys_in_redis(real_redis: redis.Redis) -> None:
    keys = plant_bullmq(real_redis)
    assert set(real_redis.scan_iter(match=b"*", count=1000)) == set(keys)
    assert set(keys.values()) == {LOCK, NOT_A_LOCK}
    # every key family the brief asks for is there
    names = set(suffixes(keys))
    assert FIXED_TYPES.keys() <= names
    for pattern, _ in PATTERN_TYPES:
        assert any(re.match(pattern, n) for n in names), pattern


def test_types(real_redis: redis.Redis) -> None:
    keys = plant_bullmq(real_redis)
    for suffix in suffixes(keys):
        key = b"bull:emails:" + suffix.encode()
        assert real_redis.type(key).decode() == expected_type(suffix), suffix


def test_only_job_lock_keys_are_locks(real_redis: redis.Redis) -> None:
    keys = plant_bullmq(real_redis)
    locks = sorted(k for k, v in keys.items() if v == LOCK)
    assert len(locks) == 2
    assert all(k.endswith(b":lock") for k in locks)
    assert not [k for k, v in keys.items() if v == NOT_A_LOCK and k.endswith(b":lock")]
    job_ids = {k[len(b"bull:emails:") : -len(b":lock")] for k in locks}
    assert any(j.isdigit() for j in job_ids)  # a numeric id
    assert any(re.fullmatch(UUID_ID.encode(), j) for j in job_ids)  # a flow child (UUID id)


def test_lock_values_ttls_and_their_jobs(real_redis: redis.Redis) -> None:
    keys = plant_bullmq(real_redis)
    locks = [k for k, v in keys.items() if v == LOCK]
    active = set(real_redis.lrange(b"bull:emails:active", 0, -1))
    stalled = real_redis.smembers(b"bull:emails:stalled")
    workers = set()
    for key in locks:
        assert real_redis.type(key) == b"string"
        pttl = real_redis.pttl(key)
        # live, renewed every ~lockRenewTime: lockDuration - lockRenewTime < PTTL <= lockDuration
        assert LOCK_DURATION_MS - LOCK_RENEW_TIME_MS < pttl <= LOCK_DURATION_MS
        match = TOKEN.match(real_redis.get(key))
        assert match, real_redis.get(key)
        workers.add(match.group(1))
        job_id = key[len(b"bull:emails:") : -len(b":lock")]
        assert job_id in active
        assert job_id in stalled
        job = real_redis.hgetall(b"bull:emails:" + job_id)
        assert {
            b"name",
            b"data",
            b"opts",
            b"timestamp",
            b"delay",
            b"priority",
            b"processedOn",
            b"ats",
        } <= set(job)
        assert job[b"ats"] == b"1"
    assert len(workers) == 1
    assert active == {k[len(b"bull:emails:") : -len(b":lock")] for k in locks}


def test_ttls(real_redis: redis.Redis) -> None:
    keys = plant_bullmq(real_redis)
    for suffix, kind in suffixes(keys).items():
        pttl = real_redis.pttl(b"bull:emails:" + suffix.encode())
        if kind == LOCK or suffix in WITH_TTL:
            assert pttl > 0, suffix
        else:
            assert pttl == -1, suffix
    assert 0 < real_redis.pttl(b"bull:emails:stalled-check") <= 30_000
    assert 0 < real_redis.pttl(b"bull:emails:limiter") <= 60_000
    assert 0 < real_redis.pttl(b"bull:emails:de:digest:42") <= 600_000


def test_values(real_redis: redis.Redis) -> None:
    plant_bullmq(real_redis)
    r = real_redis
    assert r.get(b"bull:emails:id") == b"15"  # one INCR per added job
    assert r.ttl(b"bull:emails:id") == -1
    assert r.get(b"bull:emails:pc") == b"1"
    assert r.get(b"bull:emails:limiter") == b"2"  # two moves to active in this window
    assert r.get(b"bull:emails:stalled-check").isdigit()
    assert r.hgetall(b"bull:emails:meta") == {
        b"opts.maxLenEvents": b"10000",
        b"version": b"bullmq:6.2.0",
    }
    assert r.get(b"bull:emails:de:digest:42") == b"12"
    assert r.hget(b"bull:emails:12", "deid") == b"digest:42"
    assert dict(r.zrange(b"bull:emails:marker", 0, -1, withscores=True)).keys() == {b"0", b"1"}
    assert r.lrange(b"bull:emails:wait", 0, -1) == [b"12", b"11", b"10"]
    assert r.zrange(b"bull:emails:prioritized", 0, -1) == [b"14"]
    assert r.zrange(b"bull:emails:repeat", 0, -1) == [b"hourly-digest"]
    (sched_job,) = [j for j in r.zrange(b"bull:emails:delayed", 0, -1) if j.startswith(b"repeat:")]
    assert r.hget(b"bull:emails:" + sched_job, "rjk") == b"hourly-digest"
    events = r.xrange(b"bull:emails:events")
    assert events
    assert all(b"event" in fields for _, fields in events)
    assert {f[b"event"] for _, f in events} >= {
        b"added",
        b"waiting",
        b"active",
        b"completed",
        b"failed",
        b"delayed",
        b"waiting-children",
    }
    assert r.llen(b"bull:emails:9:logs") == 2
    assert r.llen(b"bull:emails:metrics:completed:data") >= 1


def test_flow_parent_keys(real_redis: redis.Redis) -> None:
    keys = plant_bullmq(real_redis)
    r = real_redis
    (deps,) = [k for k in keys if k.endswith(b":dependencies")]
    parent = deps[: -len(b":dependencies")]
    (child,) = r.smembers(deps)  # members are child job KEYS
    assert r.hget(child, "parentKey") == parent
    assert child + b":lock" in keys
    assert keys[child + b":lock"] == LOCK
    assert r.hlen(parent + b":processed") == 1
    assert r.hlen(parent + b":failed") == 1
    assert r.zscore(b"bull:emails:waiting-children", parent[len(b"bull:emails:") :]) is not None
    (unsuccessful,) = [k for k in keys if k.endswith(b":unsuccessful")]
    failed_parent = unsuccessful[: -len(b":unsuccessful")][len(b"bull:emails:") :]
    assert r.zscore(b"bull:emails:failed", failed_parent) is not None


def test_worker_token_prefix_and_queue(real_redis: redis.Redis) -> None:
    worker = "3f2c8e4a-9b1d-4c6e-8a7f-0d5e6b4c3a21"
    keys = plant_bullmq(real_redis, prefix=b"{bq}", queue=b"mail", worker_token=worker)
    assert all(k.startswith(b"{bq}:mail:") for k in keys)
    locks = [k for k, v in keys.items() if v == LOCK]
    assert len(locks) == 2
    assert {real_redis.get(k).rsplit(b":", 1)[0] for k in locks} == {worker.encode()}


def test_abandoned_lock_alone(real_redis: redis.Redis) -> None:
    keys = plant_bullmq_abandoned_lock(real_redis)
    assert set(real_redis.scan_iter(match=b"*")) == set(keys)
    (lock,) = [k for k, v in keys.items() if v == LOCK]
    assert lock == b"bull:emails:1:lock"
    assert real_redis.type(lock) == b"string"
    assert 0 < real_redis.pttl(lock) <= 10_000  # counting down, overdue for renewal
    match = TOKEN.match(real_redis.get(lock))
    assert match
    assert match.group(2) == b"0"
    assert real_redis.lrange(b"bull:emails:active", 0, -1) == [b"1"]
    assert real_redis.smembers(b"bull:emails:stalled") == {b"1"}
    assert real_redis.hget(b"bull:emails:1", "ats") == b"1"


def test_abandoned_lock_expires_by_itself(real_redis: redis.Redis) -> None:
    keys = plant_bullmq_abandoned_lock(real_redis, remaining_ms=100)
    (lock,) = [k for k, v in keys.items() if v == LOCK]
    assert 0 < real_redis.pttl(lock) <= 100
    deadline = time.monotonic() + 5
    while real_redis.exists(lock):  # gone by itself, once its 100 ms have really passed
        assert time.monotonic() < deadline, f"still there, pttl {real_redis.pttl(lock)}"
        time.sleep(0.02)
    # the job stays active until a stalled check moves it back to wait
    assert real_redis.lrange(b"bull:emails:active", 0, -1) == [b"1"]


def test_abandoned_lock_on_a_busy_queue(real_redis: redis.Redis) -> None:
    live = plant_bullmq(real_redis)
    dead_worker = "dead0000-0000-4000-8000-000000000000"
    dead = plant_bullmq_abandoned_lock(real_redis, worker_token=dead_worker)
    assert real_redis.get(b"bull:emails:id") == b"16"
    assert dead[b"bull:emails:16:lock"] == LOCK
    assert real_redis.get(b"bull:emails:16:lock") == dead_worker.encode() + b":0"
    assert real_redis.lrange(b"bull:emails:wait", 0, -1) == [b"12", b"11", b"10"]
    locks = {k for k, v in {**live, **dead}.items() if v == LOCK}
    assert len(locks) == 3
    assert b"16" in real_redis.lrange(b"bull:emails:active", 0, -1)


@pytest.mark.parametrize("remaining_ms", [0, -1, LOCK_DURATION_MS + 1])
def test_abandoned_lock_always_has_a_ttl(real_redis: redis.Redis, remaining_ms: int) -> None:
    with pytest.raises(ValueError, match="PTTL"):
        plant_bullmq_abandoned_lock(real_redis, remaining_ms=remaining_ms)
