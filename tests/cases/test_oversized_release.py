"""An oversized key (over MAX_KEY_BYTES) that holds a lock, released by its exact bytes once the
approver was shown its sha256, on a real redis-server: the scan reads it in Redis and tracks it
by its first and last bytes and length; opening the case reads it whole once for its digest; the
release finds it again by that digest and deletes exactly it, with the usual holder check. Two
keys lockguard cannot tell apart are never offered, and a key changed since is left alone."""

from __future__ import annotations

import hashlib

import pytest
import redis

from bot.cases.reclaim_config import ReclaimConfig
from bot.core.rules import Policy
from bot.engine import Engine
from bot.release import Outcome
from bot.report.case_list import row
from bot.scan.result import ScanOptions
from bot.scan.types import MAX_KEY_BYTES, MAX_TRACKED_KEY_BYTES
from tests.cases.test_reclaim import Listener
from tests.core.test_layouts import uuid1_hex

pytestmark = pytest.mark.real
POLICY = Policy(stale_threshold_ms=1_000)
SIZE = 60 * 1024  # over MAX_KEY_BYTES, within MAX_TRACKED_KEY_BYTES


def big_key(middle: bytes = b"x", size: int = SIZE) -> bytes:
    """`lock:` + `middle` repeated + `:end`, `size` bytes in all."""
    body = size - len(b"lock:") - len(b":end")
    return b"lock:" + (middle * body)[:body] + b":end"


def engine(client: redis.Redis) -> Engine:
    return Engine(
        client,
        ScanOptions([b"lock:*"], POLICY),
        ReclaimConfig(dry_run=False, policy=POLICY, release_channel="locks:reclaimed"),
        endpoint="redis://test",
    )


def old_token(client: redis.Redis) -> bytes:
    """A redis-py token minted two hours ago: held past the threshold on first sight."""
    return uuid1_hex(int(client.time()[0]) * 1000 - 7_200_000)


def test_an_abandoned_lock_under_an_oversized_key_is_released_by_its_exact_bytes(
    real_redis: redis.Redis,
) -> None:
    key = big_key()
    real_redis.set(key, old_token(real_redis))
    neighbour = big_key(b"y")  # same first bytes, other last bytes and contents: kept
    real_redis.set(neighbour, b"not-a-lock-token-at-all" * 3)
    events = Listener(real_redis)
    e = engine(real_redis)
    result, case = e.scan()
    assert result.stats.oversized == 2
    assert case is not None
    assert case.total_locks == 1
    (lock,) = case.locks
    assert lock.big is not None
    assert lock.big.sha256 == hashlib.sha256(key).hexdigest()  # what the approver is shown
    assert lock.big.size == SIZE
    assert key.startswith(lock.big.head)
    assert key.endswith(lock.big.tail)
    assert len(lock.key) < MAX_KEY_BYTES  # the case files it by its name, never whole
    listed = row(1, lock)  # its row in the case's list file (Slack) and `lockguard cases CASE`
    assert listed[2] == lock.big.sha256
    assert f"[oversized: {SIZE:,} bytes, sha256 " in listed[1]
    assert len(listed[1]) < 1_000
    rep = e.approve(case.id, "alice")
    assert rep.counts == {Outcome.RELEASED.value: 1}
    assert real_redis.exists(key) == 0
    assert real_redis.exists(neighbour) == 1
    (event,) = events.rest()  # approve() has returned: published, and only one
    assert event["key_sha256"] == lock.big.sha256
    assert event["key_bytes"] == SIZE
    assert len(str(event)) < 2_000
    assert all(len(str(entry)) < 20_000 for entry in e.audit(20))


def test_a_lock_re_acquired_under_the_oversized_key_since_approval_is_left(
    real_redis: redis.Redis,
) -> None:
    key = big_key()
    real_redis.set(key, old_token(real_redis))
    e = engine(real_redis)
    _, case = e.scan()
    assert case is not None
    real_redis.set(key, uuid1_hex(int(real_redis.time()[0]) * 1000))  # a new holder
    rep = e.approve(case.id, "alice")
    assert rep.counts == {Outcome.SKIPPED_REACQUIRED.value: 1}
    assert real_redis.exists(key) == 1


def test_an_oversized_key_gone_since_approval_is_already_gone(real_redis: redis.Redis) -> None:
    key = big_key()
    real_redis.set(key, old_token(real_redis))
    e = engine(real_redis)
    _, case = e.scan()
    assert case is not None
    real_redis.delete(key)
    rep = e.approve(case.id, "alice")
    assert rep.counts == {Outcome.ALREADY_GONE.value: 1}


def test_two_oversized_keys_lockguard_cannot_tell_apart_are_never_offered(
    real_redis: redis.Redis,
) -> None:
    token = old_token(real_redis)
    one, two = big_key(), bytearray(big_key())
    two[SIZE // 2] = ord("z")  # same first and last bytes and length, another key
    real_redis.set(one, token)
    real_redis.set(bytes(two), token)
    result, case = engine(real_redis).scan()
    assert case is None
    assert result.proposal["oversized_not_offered"] == 1


def test_a_twin_made_after_the_case_opened_is_not_the_one_released(
    real_redis: redis.Redis,
) -> None:
    """The release finds the key by the sha256 the approver was shown: a key made since with the
    same first and last bytes and length is another key, and stays."""
    key = big_key()
    real_redis.set(key, old_token(real_redis))
    e = engine(real_redis)
    _, case = e.scan()
    assert case is not None
    twin = bytearray(key)
    twin[SIZE // 2] = ord("z")
    real_redis.set(bytes(twin), real_redis.get(key))  # even with the same token
    rep = e.approve(case.id, "alice")
    assert rep.counts == {Outcome.RELEASED.value: 1}
    assert real_redis.exists(key) == 0
    assert real_redis.exists(bytes(twin)) == 1


def test_an_oversized_lock_in_a_live_case_is_not_read_whole_again(
    real_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next scans see it in the pending case and do not read its 2 MiB again for a digest."""
    real_redis.set(big_key(), old_token(real_redis))
    e = engine(real_redis)
    _, case = e.scan()
    assert case is not None
    from bot.scan import oversized

    def never(*args: object) -> object:
        raise AssertionError("read whole again")

    monkeypatch.setattr(oversized, "find", never)
    result, again = e.scan()
    assert again is None
    assert result.proposal["already_in_a_live_case"] == 1


def test_a_key_too_big_to_name_in_a_command_is_only_counted_and_never_offered(
    real_redis: redis.Redis,
) -> None:
    """Over MAX_TRACKED_KEY_BYTES every command naming the key would hold Redis for more than
    a moment (it copies and hashes the name each time): the scan counts and names it, and sends
    no command that names it; no case offers it."""
    key = big_key(size=MAX_TRACKED_KEY_BYTES + 1)
    real_redis.set(key, old_token(real_redis))
    real_redis.config_resetstat()
    result, case = engine(real_redis).scan()
    assert case is None
    assert result.stats.oversized == 1
    assert result.stats.oversized_keys == [(key[:64], len(key))]
    assert result.stats.oversized_read == {}
    assert result.scanned == 0
    called = real_redis.info("commandstats")
    assert not {"cmdstat_type", "cmdstat_pttl", "cmdstat_object|idletime"} & set(called)
    assert real_redis.get(key) is not None


def test_an_oversized_lock_rejected_and_snoozed_is_not_read_whole_again(
    real_redis: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rejected, the same holder is snoozed (the rule ADD_LUA applies, asked read-only first):
    the next scan neither offers it nor reads its key whole for a digest."""
    real_redis.set(big_key(), old_token(real_redis))
    e = engine(real_redis)
    _, case = e.scan()
    assert case is not None
    e.reject(case.id, "alice", "known, leave it")
    from bot.scan import oversized

    def never(*args: object) -> object:
        raise AssertionError("read whole again")

    monkeypatch.setattr(oversized, "find", never)
    result, again = e.scan()
    assert again is None
    assert result.proposal["snoozed_after_rejection"] == 1


def test_an_oversized_key_with_glob_characters_in_its_first_bytes_is_found_again(
    real_redis: redis.Redis,
) -> None:
    """Its first bytes go into SCAN MATCH escaped: `[a-]`, `*`, `?` and a backslash are
    themselves, so the release finds exactly this key and not one the raw bytes would match."""
    key = b"lock:[a-]*?\\" + big_key()[len(b"lock:[a-]*?\\") :]
    lookalike = b"lock:]" + key[len(b"lock:]") :]  # what the unescaped class would also match
    token = old_token(real_redis)
    real_redis.set(key, token)
    real_redis.set(lookalike, token)
    e = engine(real_redis)
    _, case = e.scan()
    assert case is not None
    assert case.total_locks == 2
    assert e.approve(case.id, "alice").counts == {Outcome.RELEASED.value: 2}
    assert real_redis.exists(key, lookalike) == 0
