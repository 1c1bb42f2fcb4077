"""Big keys do not amplify: a scan reads no key over 4 KiB (it is counted and named by its first
bytes); and should a key over 16 KiB reach an event, an audit entry or the stored scan summary
some other way, it is named there by a prefix, `key_sha256` and `key_bytes`, never whole."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any, cast

import pytest
import redis

from bot.core.display import BIG_KEY_BYTES, BIG_KEY_PREFIX_BYTES, key_json, key_ref
from bot.store import scans
from bot.store.keyspace import AUDIT_STREAM
from tests.test_cli_cases import env as env  # the CLI's real-redis fixture
from tests.test_cli_cases import plant_abandoned, run

BIG = b"lock:" + b"k" * (512 * 1024)
SMALL = b"lock:stuck"
SMALL_EVENT_FIELDS = {
    "event",
    "key",
    "key_hex",
    "layout",
    "reason",
    "case_id",
    "approved_by",
    "released_at",
    "released_at_ms",
}


@pytest.mark.parametrize("size", [0, 1, 100, BIG_KEY_BYTES - 1, BIG_KEY_BYTES])
def test_a_key_up_to_16_kib_is_named_as_before(size: int) -> None:
    key = b"\x00\xff" * (size // 2) + b"x" * (size % 2)
    assert key_ref(key) == key_json(key)


@pytest.mark.parametrize(
    "key",
    [
        b"a" * (BIG_KEY_BYTES + 1),
        b"\x1b[2K\r" * (BIG_KEY_BYTES // 4 + 1),
        "é".encode() * BIG_KEY_BYTES,  # the prefix cut falls inside a character: escaped, not lost
    ],
)
def test_a_bigger_key_is_named_by_a_prefix_and_its_sha256(key: bytes) -> None:
    ref = key_ref(key)
    assert set(ref) == {"key", "key_sha256", "key_bytes"}
    assert ref["key_sha256"] == hashlib.sha256(key).hexdigest()
    assert ref["key_bytes"] == len(key)
    text = str(ref["key"])
    assert text.endswith(f"…(+{len(key) - BIG_KEY_PREFIX_BYTES} bytes)")
    assert len(text) <= 4 * BIG_KEY_PREFIX_BYTES + 30
    assert not any(ord(c) < 0x20 or ord(c) == 0x7F for c in text)


def _events(sub: redis.client.PubSub, want: int) -> list[bytes]:
    out: list[bytes] = []
    deadline = time.monotonic() + 5
    while len(out) < want and time.monotonic() < deadline:
        msg = sub.get_message(timeout=0.1)
        if msg and msg["type"] == "message":
            out.append(msg["data"])
    return out


def _audit_sizes(r: redis.Redis) -> list[tuple[str, int, dict[str, Any]]]:
    """(event, bytes of the whole entry, its data) for every audit entry."""
    entries = cast("list[tuple[bytes, dict[bytes, bytes]]]", r.xrange(AUDIT_STREAM))
    return [
        (f[b"event"].decode(), sum(len(k) + len(v) for k, v in f.items()), json.loads(f[b"data"]))
        for _, f in entries
    ]


@pytest.mark.real
def test_a_512_kib_key_is_reported_oversized_and_never_enters_a_case_an_event_or_the_audit(
    env: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scan reads no key over 4 KiB (bot.scan.types.MAX_KEY_BYTES): the 512 KiB one is
    counted and named by its first bytes, the small lock beside it is released as ever, and no
    event, audit entry or stored summary carries more than a few KiB."""
    plant_abandoned(env, BIG)
    plant_abandoned(env, SMALL)
    code, text = run("scan", "--json")
    assert code == 1
    doc = json.loads(text)
    assert doc["oversized_keys"] == 1
    assert doc["oversized"][0]["key_bytes"] == len(BIG)
    assert doc["oversized"][0]["key_prefix"].startswith("lock:kkkk")
    assert len(text) < 20_000
    case_id = doc["case"]["case_id"]
    code, text = run("cases", "--json")
    shown = json.loads(text)["cases"][0]["locks"]
    assert [lk["key_hex"] for lk in shown] == [SMALL.hex()]
    sub = env.pubsub(ignore_subscribe_messages=True)
    sub.subscribe("locks:reclaimed")
    monkeypatch.setenv("LOCKGUARD_DRY_RUN", "false")
    code, text = run("approve", case_id, "--by", "ann")
    assert code == 0, text
    assert "1 of 1 lock(s) released" in text
    assert env.exists(SMALL) == 0
    assert env.exists(BIG) == 1  # never touched
    [raw] = _events(sub, 1)
    small = json.loads(raw)
    assert set(small) == SMALL_EVENT_FIELDS
    assert (small["key"], small["key_hex"]) == ("lock:stuck", SMALL.hex())
    audit = _audit_sizes(env)
    assert {e for e, _, _ in audit} >= {"scan", "case_opened", "release"}
    for event, size, data in audit:
        assert size < 4096, (event, size)
        assert BIG.hex()[:2000] not in json.dumps(data)
    last = scans.last_scan(env)
    assert last is not None
    assert len(json.dumps(last)) < 4096
