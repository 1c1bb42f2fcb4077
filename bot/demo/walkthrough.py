"""`lockguard demo`: the whole job on an embedded Redis, with no setup and nothing of the user's.

The real engine scans planted locks twice; then the real app (`bot.demo.slack_walkthrough`), on
a stand-in Slack, opens the case from `/lockguard scan` and takes the operator's Approve (or
Reject); then the release, the reclaim events, the live lock left alone and the audit trail.
Only the stale threshold is shortened, so the demo takes seconds instead of 15 minutes.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO, cast

import redis

from bot.cases import audit
from bot.cases.approval import ApprovalReport, LockOutcome
from bot.cases.case import Case, State
from bot.cases.reclaim_config import ReclaimConfig
from bot.core.display import escape, ttl
from bot.core.errors import ConfigError, LockguardError
from bot.core.rules import Policy
from bot.demo.embedded import RedisProcess
from bot.demo.planted import CHANNEL, COUNTER_KEY, LIVE_KEY, NOT_DUE_KEYS, Background, plant
from bot.demo.slack_walkthrough import CHANNEL as SLACK_CHANNEL
from bot.demo.slack_walkthrough import (
    USER,
    USERS,
    SlackDemo,
    answered,
    approve_value,
    people,
    person,
    shown,
)
from bot.engine import Engine
from bot.ops.bolt_route import SLACK_EVENTS_PATH
from bot.report import approval_text, audit_text, case_text, table
from bot.report.scan import terminal_width
from bot.scan.result import ScanOptions
from bot.slack.blocks import ids
from bot.store.scans import server_ms

DEMO_THRESHOLD_MS = 3_000
PATTERNS = [b"lock:*", b"job-lock:*", b"redisson:*", b"\x17*"]
OPERATOR = USERS[USER]
REJECT_REASON = "declined at the demo prompt"


@contextmanager
def embedded_redis(out: TextIO) -> Iterator[redis.Redis]:
    """A real redis-server when one starts, fakeredis otherwise; ConfigError when neither is
    there, saying how to get one."""
    server, why = None, "no redis-server installed"
    if shutil.which("redis-server") is not None:
        try:
            server = RedisProcess()
        except (FileNotFoundError, RuntimeError):
            why = "the installed redis-server did not start"
    if server is None:
        try:
            import fakeredis
        except ImportError:
            raise ConfigError(
                f"the demo needs a Redis of its own: {why}, and fakeredis (its stand-in) is "
                "not installed; install it with: pip install 'lockguard[demo]' "
                "(or install redis-server, e.g. apt-get install redis-server)"
            ) from None
        out.write(f"embedded Redis: fakeredis ({why})\n")
        client: redis.Redis = fakeredis.FakeRedis()
    else:
        out.write(
            f"embedded Redis: redis-server {server.version} on 127.0.0.1:{server.port} "
            "(no persistence, removed at the end)\n"
        )
        client = server.client()
    try:
        yield client
    finally:
        client.close()
        if server is not None:
            server.stop()


def _wait(out: TextIO, seconds: float) -> None:
    """Progress while waiting: a redrawn bar on a terminal, one dot per step elsewhere."""
    steps = max(1, int(seconds * 4))
    tty = hasattr(out, "isatty") and out.isatty()
    label = f"   waiting {seconds:.0f}s for the second scan (TTLs and counters are watched) "
    if not tty:
        out.write(label)
    for i in range(steps + 1):
        if tty:
            out.write(f"\r{label}[{'#' * i}{'.' * (steps - i)}]")
        elif i:
            out.write(".")
        out.flush()
        if i < steps:
            time.sleep(seconds / steps)
    out.write(" done\n")


def _ask(out: TextIO, question: str) -> bool:
    out.write(question)
    out.flush()
    if not sys.stdin or not sys.stdin.isatty():
        out.write("\n  (no terminal to ask: treated as 'no'; pass --yes to approve)\n")
        return False
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def run_demo(out: TextIO, *, assume_yes: bool = False, wait_seconds: float = 4.0) -> int:
    wait_seconds = max(wait_seconds, DEMO_THRESHOLD_MS / 1000 + 0.5)
    out.write(
        "lockguard demo: abandoned Redis locks found, offered for release in Slack, "
        "released only once a person approves\n\n"
    )
    options = ScanOptions(patterns=PATTERNS, policy=Policy(stale_threshold_ms=DEMO_THRESHOLD_MS))
    cfg = ReclaimConfig(
        dry_run=False,
        release_channel=CHANNEL,
        case_ttl_ms=600_000,
        policy=options.policy,
        patterns=tuple(PATTERNS),
    )
    with embedded_redis(out) as client:
        bg = Background(client)
        try:
            engine = Engine(client, options, cfg, endpoint="embedded")
            return _run(out, engine, bg, assume_yes, wait_seconds)
        finally:
            bg.close()
            out.write("\ncleaned up: background workers stopped, embedded Redis removed\n")


def _run(out: TextIO, engine: Engine, bg: Background, assume_yes: bool, wait_seconds: float) -> int:
    _plant_and_scan(out, engine, bg, wait_seconds)
    out.write(
        "\n4. approval, in Slack: the app (`lockguard serve`, HTTP mode) on a local "
        "stand-in for Slack's Web API\n"
    )
    try:
        with SlackDemo(engine) as slack:
            reports = _in_slack(out, engine, slack, assume_yes)
            if reports is not None:
                _home_and_digest(out, slack)
    except (LockguardError, OSError, TimeoutError) as exc:
        out.write(f"   the Slack part failed: {exc}\n")
        return 1
    if reports is None:
        return 1
    out.write("\n5. release (compare-and-delete on the approved holder), verification, wake-ups\n")
    for rep in reports:
        out.write(_indent(people(approval_text(rep))) + "\n")
    if not reports:
        out.write("   nothing was released\n")
    _events(out, bg, sum(o.event_published for rep in reports for o in rep.outcomes))
    alive = _left_alone(out, engine.client)
    out.write("\n8. audit trail (newest first)\n")
    out.write(_indent(audit_text(audit.recent(engine.client, 12), who=person)) + "\n")
    released = sum(rep.released for rep in reports)
    out.write(
        f"\nresult: {released} abandoned lock(s) released after @{OPERATOR} approved them"
        if reports
        else f"\nresult: @{OPERATOR} rejected the case; no lock was released"
    )
    out.write(", the live lock left alone\n" if alive else "; the live lock is GONE\n")
    return 0 if alive else 1


def _plant_and_scan(out: TextIO, engine: Engine, bg: Background, wait_seconds: float) -> None:
    """Steps 1 to 3: the locks planted, then two watching scans `wait_seconds` apart."""
    client = engine.client
    out.write(
        f"\n1. planting locks (stale threshold shortened to "
        f"{DEMO_THRESHOLD_MS // 1000}s for the demo; default 900s)\n"
    )
    for key, what in plant(client, server_ms(client) / 1000):
        out.write(f"   {escape(key):<34} {what}\n")
    bg.start()
    patterns = [escape(p) for p in PATTERNS]

    out.write(
        "\n2. scan 1: first sight (only what values say about age is known yet; these "
        "CLI scans only watch, the scan typed in Slack opens the case)\n"
    )
    result, _ = engine.scan(keep=20, propose=False)
    out.write(_indent(table(result, "embedded", patterns, width=_width(out))) + "\n")
    _wait(out, wait_seconds)

    out.write("\n3. scan 2: leases compared with scan 1\n")
    result, _ = engine.scan(keep=20, propose=False)
    out.write(_indent(table(result, "embedded", patterns, width=_width(out))) + "\n")


def _width(out: TextIO) -> int | None:
    """The room for a table indented under a step, on a terminal (None elsewhere)."""
    width = terminal_width(out)
    return None if width is None else width - 3


def _events(out: TextIO, bg: Background, expected: int) -> None:
    """Step 6: the reclaim events the subscriber received (waiting up to 1s for `expected`)."""
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and len(bg.events) < expected:
        time.sleep(0.05)
    out.write(f"\n6. reclaim events received by a subscriber on '{CHANNEL}': {len(bg.events)}\n")
    for ev in bg.events:
        out.write(f"   {json.dumps(ev, separators=(',', ':'))}\n")


def _left_alone(out: TextIO, client: redis.Redis) -> bool:
    """Step 7: the live lock is still its owner's; what became of two of the planted ones."""
    value, pttl = cast("bytes | None", client.get(LIVE_KEY)), client.pttl(LIVE_KEY)
    state = (
        f"still held by its owner, token {escape(value or b'', 12)}, TTL {ttl(pttl)}"
        if value
        else "GONE (this would be a bug)"
    )
    out.write(
        f"\n7. the live lock {escape(LIVE_KEY)}: {state} (reported as "
        "long_held_renewing, never put in a case)\n"
    )
    for key in (b"lock:nightly-report", COUNTER_KEY):
        out.write(f"   {escape(key)}: {'gone' if not client.exists(key) else 'still there'}\n")
    for key in NOT_DUE_KEYS:
        out.write(
            f"   {escape(key)}: {'still there' if client.exists(key) else 'gone'} (its library "
            "renews on its own: offered only once that renewal is overdue, as the scans say)\n"
        )
    return value is not None


def _in_slack(
    out: TextIO, engine: Engine, slack: SlackDemo, assume_yes: bool
) -> list[ApprovalReport] | None:
    """Scan from Slack, click Approve (or Reject), show the message before and after. What was
    released (nothing when rejected); None when the app refused the scan."""
    out.write(f"   {slack.started_line}\n")
    out.write(
        f"   (Slack shows people by name; lockguard records their Slack user id: @{OPERATOR} "
        f"is {USER} in Redis and in the reclaim events)\n"
    )
    reply = slack.slash("scan")
    out.write(
        f"   @{OPERATOR} types `/lockguard scan` in the channel: signed POST "
        f"{SLACK_EVENTS_PATH}, {answered(reply)}\n"
    )
    if reply.status != 200:
        return None
    post = slack.findings()
    case_id = approve_value(post.body)
    out.write(
        f"\n   the app posts its findings (chat.postMessage to {SLACK_CHANNEL}):\n"
        f"{shown(post.body)}\n"
    )
    case = engine.case(case_id)
    out.write(
        "\n   the case in Redis, as `lockguard cases` shows it:\n"
        + _indent(case_text(case, engine.now_ms()), "     ")
        + "\n\n"
    )
    if assume_yes or _ask(
        out, f"   approve release of {case.lock_count} lock(s) in case {case_id}? [y/N] "
    ):
        reply = slack.click(ids.APPROVE, case_id, post)
        out.write(
            f"   @{OPERATOR} clicks [ Approve ]{' (--yes)' if assume_yes else ''} and "
            f"confirms: signed POST {SLACK_EVENTS_PATH}, {answered(reply)}\n"
        )
    else:
        reply = slack.click(ids.REJECT, case_id, post)
        out.write(
            f"   @{OPERATOR} clicks [ Reject ]: {answered(reply)}; the app opens its "
            "reject dialog (views.open)\n"
        )
        reply = slack.submit_reject(slack.opened_view(), REJECT_REASON)
        out.write(
            f"   @{OPERATOR} submits it with the reason '{REJECT_REASON}': {answered(reply)}\n"
        )
    after = slack.settled(case_id, post)
    out.write(f"\n   the app updates its message (chat.update):\n{shown(after)}\n")
    case = engine.case(case_id)
    if case.state is State.REJECTED:
        out.write(f"   {case_id}: rejected, no lock was touched\n")
        return []
    return [_report(case)]


def _home_and_digest(out: TextIO, slack: SlackDemo) -> None:
    """The app's Home tab as the operator opens it, and the digest the schedule would post."""
    reply = slack.open_home()
    out.write(
        f"\n   @{OPERATOR} opens the app's Home tab (app_home_opened): {answered(reply)}; "
        "the app publishes it (views.publish):\n"
        f"{shown(slack.home_view())}\n"
    )
    out.write(
        "\n   the digest LOCKGUARD_DIGEST_SCHEDULE posts (daily by default), posted now "
        f"(chat.postMessage to {SLACK_CHANNEL}):\n{shown(slack.post_digest())}\n"
    )


def _report(case: Case) -> ApprovalReport:
    """What the release did, from the case as Redis holds it (the click ran it in the app)."""
    recorded = {str(o.get("key_hex")): o for o in case.outcomes}
    rows = tuple(
        LockOutcome(
            lk,
            str(o["outcome"]),
            str(o.get("detail") or ""),
            tuple(str(w) for w in o.get("wake") or ()),
            bool(o.get("event_published")),
        )
        for lk in case.locks
        if (o := recorded.get(lk.key.hex())) is not None
    )
    return ApprovalReport(case, rows, case.dry_run, dict(case.outcome_counts))


def _indent(text: str, pad: str = "   ") -> str:
    return "\n".join(pad + line for line in text.splitlines())
