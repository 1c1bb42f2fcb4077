"""Mass-incident benchmark (issue 36): one case of thousands of stuck locks, from the scan that
offers it to all of them released, through Slack's real protocol; and the memory of a
100,000-lock case in Redis and in the process.

    .venv/bin/python bench/mass_bench.py [--sizes 3000,20000] [--memory 100000]

For each size it starts a redis-server (free loopback port, no persistence), a stand-in for
Slack's Web API (`tests/slack_mock.FakeSlack`) and `lockguard serve` in HTTP mode on a free port,
plants that many abandoned redis-py locks, has a scan post its findings (as a scheduled scan
does) and times:
- listed: from the scan's result to its message posted and the case's whole list uploaded in
  its thread (`files_upload_v2`), when an Approve click is taken;
- released: from the typed count's `view_submission` (the Approve click of a case above
  LOCKGUARD_CONFIRM_TYPED_ABOVE opens the modal) to the `chat.update` saying "Released" (every
  lock deleted, verified and announced before it is sent).

`--memory N`, in a child process of its own so its peak RSS (VmHWM) is its own: a scan that opens
a case of N locks, the case's CSV as Slack gets it, then `lockguard approve`'s release, with the
peak RSS after each, and the bytes Redis holds for the case (`MEMORY USAGE` of its record and
its lock list, then of its outcomes). Not part of the tests.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot import serve  # noqa: E402
from bot.compose import build_engine  # noqa: E402
from bot.config import load_settings  # noqa: E402
from bot.demo.embedded import RedisProcess  # noqa: E402
from bot.demo.slack_walkthrough import approve_value  # noqa: E402
from bot.slack.blocks import ids  # noqa: E402
from bot.store.keyspace import slack_message_key  # noqa: E402
from tests.core.test_layouts import uuid1_hex  # noqa: E402
from tests.slack_mock import FakeSlack  # noqa: E402
from tests.slack_requests import block_action, view_submission  # noqa: E402

SECRET = "bench-signing-secret"
CHANNEL = "C0BENCH"
USER = "U0BENCH"


def plant(r: object, n: int) -> None:
    now_ms = int(r.time()[0]) * 1000  # type: ignore[attr-defined]
    with r.pipeline(transaction=False) as pipe:  # type: ignore[attr-defined]
        for i in range(n):
            pipe.set(b"lock:mass:%d" % i, uuid1_hex(now_ms - 7_200_000 - i))
            if i % 10_000 == 9_999:
                pipe.execute()
        pipe.execute()


def settings_for(port: int, fake_url: str) -> object:
    return load_settings(
        env={
            "REDIS_HOST": "127.0.0.1",
            "REDIS_PORT": str(port),
            "LOCKGUARD_DRY_RUN": "false",
            "LOCKGUARD_APPROVERS": USER,
            "SLACK_BOT_TOKEN": "xoxb-bench",
            "SLACK_SIGNING_SECRET": SECRET,
            "SLACK_API_URL": fake_url,
            "LOCKGUARD_SLACK_CHANNEL": CHANNEL,
            "LOCKGUARD_HTTP_HOST": "127.0.0.1",
            "LOCKGUARD_SCAN_SCHEDULE": "off",
            "LOCKGUARD_DIGEST_SCHEDULE": "off",
        },
        env_file=None,
    )


def wait(what: str, ok: object, timeout: float) -> float:
    t0 = time.perf_counter()
    while not ok():  # type: ignore[operator]
        if time.perf_counter() - t0 > timeout:
            raise SystemExit(f"{what}: not within {timeout} s")
        time.sleep(0.002)
    return time.perf_counter() - t0


def one_size(n: int) -> dict[str, float]:
    server = RedisProcess()
    fake = FakeSlack().start()
    r = server.client()
    settings = settings_for(server.port, fake.url)
    served = serve.start(settings, port=0, err=io.StringIO())  # type: ignore[arg-type]
    engine = build_engine(settings)  # type: ignore[arg-type]
    url = served.url + "/slack/events"
    try:
        plant(r, n)
        t_scan = time.perf_counter()
        found = engine.scan("schedule")
        scanned = time.perf_counter() - t_scan
        t_post = time.perf_counter()
        served.slack.posts.post_scan(CHANNEL, *found)  # the message, then the file
        post = fake.wait_for("chat.postMessage", 1, timeout=60)[0]
        case_id = approve_value(post.body)
        wait("listed", lambda: r.hget(slack_message_key(case_id), "listed") == b"1", 60)
        listed = time.perf_counter() - t_post
        block_action(
            url,
            SECRET,
            action_id=ids.APPROVE,
            value=case_id,
            user_id=USER,
            channel_id=CHANNEL,
            message_ts=str(post.response["ts"]),
            trigger_id="1.2.bench",
        )
        fake.wait_for("views.open", 1, timeout=10)
        typed = {
            ids.APPROVE_COUNT_BLOCK: {
                ids.APPROVE_COUNT_ACTION: {"type": "plain_text_input", "value": str(n)}
            }
        }
        t0 = time.perf_counter()
        reply = view_submission(
            url,
            SECRET,
            callback_id=ids.APPROVE_MODAL,
            private_metadata=case_id,
            values=typed,
            user_id=USER,
        )
        assert reply.status == 200, reply.text
        released = wait(
            "released",
            lambda: any(
                str(c.body.get("text", "")).split(": ", 1)[-1].startswith("Released")
                for c in fake.calls("chat.update")
            ),
            600,
        )
        progress = sum(
            "Releasing…" in json.dumps(c.body, ensure_ascii=False)
            for c in fake.calls("chat.update")
        )
        left = sum(1 for _ in r.scan_iter(match=b"lock:mass:*", count=10_000))
        assert left == 0, f"{left} locks left"
        del t0
        return {"scan": scanned, "listed": listed, "released": released, "progress": progress}
    finally:
        served.stop()
        engine.client.close()
        fake.stop()
        r.close()
        server.stop()


def peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def memory_child(n: int) -> None:
    """In a child: a case of `n` locks, its CSV, its release; peak RSS after each (JSON)."""
    from bot.report.case_list import case_csv
    from bot.store.keyspace import case_key, locks_key, outcomes_key

    server = RedisProcess()
    r = server.client()
    out: dict[str, float] = {"start_mb": peak_mb()}
    try:
        settings = load_settings(
            env={
                "REDIS_HOST": "127.0.0.1",
                "REDIS_PORT": str(server.port),
                "LOCKGUARD_DRY_RUN": "false",
            },
            env_file=None,
        )
        engine = build_engine(settings)  # type: ignore[arg-type]
        plant(r, n)
        out["planted_mb"] = peak_mb()
        _, case = engine.scan("cli", propose=True)
        assert case is not None
        assert case.lock_count == n, case.lock_count
        out["scan_mb"] = peak_mb()
        used = int(r.memory_usage(case_key(case.id)) or 0)
        used += int(r.memory_usage(locks_key(case.id), samples=0) or 0)
        out["redis_case_bytes"] = used
        t0 = time.perf_counter()
        content = case_csv(lk for batch in engine.case_lock_batches(case.id) for lk in batch)
        out["csv_s"] = time.perf_counter() - t0
        out["csv_bytes"] = len(content)
        out["csv_mb"] = peak_mb()
        del content
        t0 = time.perf_counter()
        rep = engine.approve(case.id, "bench")
        out["approve_s"] = time.perf_counter() - t0
        assert rep.released == n, rep.counts
        out["approve_mb"] = peak_mb()
        out["redis_outcomes_bytes"] = int(r.memory_usage(outcomes_key(case.id), samples=0) or 0)
    finally:
        r.close()
        server.stop()
    print(json.dumps(out))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="3000,20000")
    ap.add_argument("--memory", type=int, default=100_000, help="0: skip")
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        os.environ.pop(var, None)
    if args.child:
        memory_child(args.child)
        return 0
    print(
        "| locks | scan (s) | post → list in thread (s) | typed count → all released (s) |"
        " progress updates |"
    )
    print("|---:|---:|---:|---:|---:|")
    for n in (int(x) for x in args.sizes.split(",") if x):
        got = one_size(n)
        print(
            f"| {n:,} | {got['scan']:.2f} | {got['listed']:.2f} | {got['released']:.2f} | "
            f"{int(got['progress'])} |"
        )
    if args.memory:
        child = subprocess.run(
            [sys.executable, __file__, "--child", str(args.memory)],
            check=True,
            capture_output=True,
            text=True,
        )
        m = json.loads(child.stdout.strip().splitlines()[-1])
        print(f"\nA case of {args.memory:,} locks:")
        print(
            f"- in Redis: {m['redis_case_bytes'] / 2**20:.1f} MiB (record and lock list, "
            f"{m['redis_case_bytes'] / args.memory:.0f} B a lock); its outcomes after the "
            f"release {m['redis_outcomes_bytes'] / 2**20:.1f} MiB"
        )
        print(
            f"- process peak RSS: {m['start_mb']:.0f} MB at start, {m['planted_mb']:.0f} "
            f"after planting, {m['scan_mb']:.0f} after the scan that opens the case, "
            f"{m['csv_mb']:.0f} after its CSV ({m['csv_bytes'] / 2**20:.1f} MiB, "
            f"{m['csv_s']:.2f} s), {m['approve_mb']:.0f} after releasing all "
            f"({m['approve_s']:.1f} s)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
