"""Big keys do not amplify: a scan reads no key over 4 KiB whole (it is counted, named by its first
bytes, and a lock under it is tracked by its first and last bytes and length and offered with its
sha256); and should a key over 16 KiB reach an event, an audit entry or the stored scan summary
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

BIG = b"lock:" + b"k" * (60 * 1024)  # over MAX_KEY_BYTES, within MAX_TRACKED_KEY_BYTES
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
def test_a_60_kib_lock_is_offered_by_its_digest_and_never_enters_an_event_or_the_audit_whole(
    env: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 60 KiB key (over bot.scan.types.MAX_KEY_BYTES) is counted and named by its first
    bytes, offered in the case by its sha256, and released by `approve` with the small lock
    beside it; no event, audit entry or stored summary carries more than a few KiB."""
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
    digest = hashlib.sha256(BIG).hexdigest()
    assert sorted(lk.get("key_hex") or lk["key_sha256"] for lk in shown) == sorted(
        [SMALL.hex(), digest]
    )
    assert len(text) < 20_000
    code, text = run("cases", case_id)  # every lock of the case, the big one by its digest
    assert code == 0
    assert f"sha256 {digest}" in text
    assert len(text) < 20_000
    sub = env.pubsub(ignore_subscribe_messages=True)
    sub.subscribe("locks:reclaimed")
    monkeypatch.setenv("LOCKGUARD_DRY_RUN", "false")
    code, text = run("approve", case_id, "--by", "ann")
    assert code == 0, text
    assert "2 of 2 lock(s) released" in text
    assert digest in text  # the terminal names it by its digest
    assert len(text) < 20_000
    assert env.exists(SMALL, BIG) == 0
    events = {json.loads(raw)["key"]: json.loads(raw) for raw in _events(sub, 2)}
    small = events.pop("lock:stuck")
    assert set(small) == SMALL_EVENT_FIELDS
    assert small["key_hex"] == SMALL.hex()
    [(_, big)] = events.items()
    assert (big["key_sha256"], big["key_bytes"]) == (digest, len(BIG))
    assert len(json.dumps(big)) < 2_000
    audit = _audit_sizes(env)
    assert {e for e, _, _ in audit} >= {"scan", "case_opened", "release"}
    for event, size, data in audit:
        assert size < 4096, (event, size)
        assert BIG.hex()[:2000] not in json.dumps(data)
    last = scans.last_scan(env)
    assert last is not None
    assert len(json.dumps(last)) < 4096
