"""The `lockguard` command (also `python -m bot`).

Exit codes: 0 healthy, 1 findings, 2 bad input or configuration, 3 Redis unreachable
or refused.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import TextIO

from bot import __version__
from bot.cases.case import State, check_case_id
from bot.compose import build_engine, configure_logging, secrets_of
from bot.config import Settings, load_settings
from bot.config_report import add_config_command
from bot.core.display import escape
from bot.core.errors import CaseDecidedError, LockguardError
from bot.evidence import EVIDENCE_LIMIT
from bot.report import (
    FOR_REAL,
    Offers,
    RankedFindings,
    approval_text,
    approve_hint,
    audit_text,
    case_json,
    case_text,
    check_text,
    scan_json_head,
    table,
    write_scan_json,
)
from bot.scan import ReadMode

EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT, EXIT_REDIS = 0, 1, 2, 3


def _cmd_scan(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    engine = build_engine(settings)
    mode = ReadMode(args.read_mode)
    if args.json:
        # Findings are spooled (to disk past 8 MB) so that stdout gets one valid JSON object,
        # or nothing when the scan fails, with memory flat however many locks are found.
        # The worst EVIDENCE_LIMIT are kept and their evidence read; the rest follow by score.
        with tempfile.SpooledTemporaryFile(max_size=8 << 20, mode="w+b") as spool:
            found = RankedFindings(spool)
            result, case = engine.scan("cli", mode=mode, on_finding=found.add, keep=EVIDENCE_LIMIT)
            head = scan_json_head(result, case, settings.endpoint)
            write_scan_json(out, head, found.lines(result.worst))
        return EXIT_FINDINGS if result.findings else EXIT_OK
    offers = Offers(settings.stale_threshold_seconds)
    result, case = engine.scan("cli", mode=mode, keep=args.limit, on_finding=offers.add)
    patterns = [escape(p) for p in settings.patterns]
    threshold = settings.stale_threshold_seconds
    out.write(table(result, settings.endpoint, patterns, threshold_seconds=threshold) + "\n")
    for line in offers.lines(result, case, engine.auto_remediate):
        out.write(line + "\n")
    snoozed = result.proposal.get("snoozed_after_rejection", 0)
    if isinstance(snoozed, int) and snoozed:
        out.write(
            f"{snoozed} releasable lock(s) not proposed again: rejected earlier with the "
            "same holder (LOCKGUARD_REJECT_SNOOZE_SECONDS)\n"
        )
    if case is not None:
        out.write("\n" + case_text(case, result.server_time_ms) + "\n")
        out.write("\n".join(approve_hint(case.id, settings.dry_run)) + "\n")
    return EXIT_FINDINGS if result.findings else EXIT_OK


def _cmd_cases(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    engine = build_engine(settings)
    now = engine.now_ms()
    found = engine.cases(args.limit)
    if args.json:
        out.write(json.dumps({"cases": [case_json(c, now) for c in found]}, indent=1) + "\n")
    elif not found:
        out.write(
            "no cases: a scan opens one when a flagged lock may be offered for release "
            "(`lockguard scan` says when)\n"
        )
    else:
        out.write("\n".join(case_text(c, now) for c in found) + "\n")
    return EXIT_OK


def _cmd_approve(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    engine = build_engine(settings)
    try:
        rep = engine.approve(
            args.case_id, args.by, resume=args.resume, progress=_progress(sys.stderr)
        )
    except CaseDecidedError as exc:
        if exc.state == State.APPROVED.value and engine.case(args.case_id).dry_run:
            raise CaseDecidedError(
                f"{exc}; it was approved in dry run, which released nothing and closed it: "
                f"`lockguard scan` opens a new case of its locks, then `{FOR_REAL} <that case> "
                f"--by {args.by.strip() or 'NAME'}` releases them",
                state=exc.state,
            ) from None
        raise
    out.write(approval_text(rep) + "\n")
    if rep.errors:
        print(
            f"lockguard: error: {rep.errors} lock(s) of case {rep.case.id} could not be "
            f"released (see above); the case is {rep.case.state.value}: "
            f"`lockguard approve {rep.case.id} --by NAME --resume` retries them",
            file=sys.stderr,
        )
        return EXIT_REDIS
    return EXIT_OK


def _progress(err: TextIO) -> Callable[[int, int], None]:
    """Progress for big cases on stderr: a line per 10% (at least 5,000 locks apart)."""
    last = [0]

    def report(done: int, total: int) -> None:
        step = max(5_000, total // 10)
        if total >= 5_000 and (done - last[0] >= step or done == total):
            last[0] = done
            print(f"lockguard: {done}/{total} lock(s) done", file=err, flush=True)

    return report


def _cmd_reject(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    engine = build_engine(settings)
    case = engine.reject(args.case_id, args.by, args.reason)
    out.write(case_text(case, engine.now_ms()) + "\n")
    return EXIT_OK


def _cmd_audit(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    case_id = check_case_id(args.case) if args.case else None
    entries = build_engine(settings).audit(args.limit, case_id)
    if args.json:
        out.write(
            json.dumps(
                {
                    "entries": [
                        {
                            "id": e.id,
                            "event": e.event,
                            "at_ms": e.at_ms,
                            "case_id": e.case_id or None,
                            "actor": e.actor or None,
                            "data": e.data,
                        }
                        for e in entries
                    ]
                },
                indent=1,
            )
            + "\n"
        )
    else:
        out.write(audit_text(entries) + "\n")
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace, settings: Settings | None, out: TextIO) -> int:
    from bot.demo.walkthrough import run_demo

    return run_demo(out, assume_yes=args.yes, wait_seconds=args.wait)


def _cmd_serve(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    from bot.serve import run

    return run(settings)


def _cmd_check(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    status = build_engine(settings).status()
    schedule = settings.scan_schedule_spec
    interval = schedule.interval_seconds()
    limit = None if interval is None else 2 * interval
    out.write(check_text(status, limit, schedule.describe()) + "\n")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lockguard",
        description="Find abandoned Redis locks and release them safely. Configuration comes "
        "from the environment (REDIS_URL or REDIS_HOST/REDIS_PORT, REDIS_PASSWORD, "
        "LOCKGUARD_LOCK_PATTERNS, ...); see README.md.",
    )
    parser.add_argument("--version", action="version", version=f"lockguard {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_scan(sub)
    p = sub.add_parser("serve", help="run the Slack app (HTTP; Socket Mode with SLACK_APP_TOKEN)")
    p.set_defaults(func=_cmd_serve)
    p = sub.add_parser(
        "check",
        help="check that Redis answers, when the last scan ran and whether scans are overdue",
    )
    p.set_defaults(func=_cmd_check)
    _add_case_commands(sub)
    _add_demo(sub)
    add_config_command(sub)
    return parser


def _add_scan(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("scan", help="scan once and report every matching lock")
    p.add_argument("--json", action="store_true", help="one JSON object for scripts")
    p.add_argument(
        "--limit",
        type=_positive_int,
        default=50,
        help="locks shown in the table, worst first (default 50)",
    )
    p.add_argument(
        "--read-mode",
        choices=[m.value for m in ReadMode],
        default="auto",
        help="lua: one script per batch; pipeline: for servers without scripting",
    )
    p.set_defaults(func=_cmd_scan)


def _add_case_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`cases`, `approve`, `reject` and `audit`: the break-glass path."""
    p = sub.add_parser("cases", help="open and recent approval cases")
    p.add_argument("--json", action="store_true")
    p.add_argument("--limit", type=_positive_int, default=20)
    p.set_defaults(func=_cmd_cases)

    p = sub.add_parser(
        "approve",
        help="approve a case and release its locks (break-glass path); dry run by default",
        description="Approve a pending case and release its locks. Dry run is the default "
        "(LOCKGUARD_DRY_RUN=true): the approval is recorded and closes the case, and no lock is "
        "touched. To release for real, approve a pending case with dry run off: "
        f"`{FOR_REAL} CASE --by NAME`.",
    )
    p.add_argument("case_id", metavar="CASE")
    p.add_argument("--by", required=True, metavar="NAME", help="who approves (audited)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="finish the release of an approved case whose approver died half-way",
    )
    p.set_defaults(func=_cmd_approve)

    p = sub.add_parser("reject", help="reject a case: its locks are left alone")
    p.add_argument("case_id", metavar="CASE")
    p.add_argument("--by", required=True, metavar="NAME", help="who rejects (audited)")
    p.add_argument("--reason", required=True, metavar="TEXT")
    p.set_defaults(func=_cmd_reject)

    p = sub.add_parser("audit", help="recent audit log entries, newest first")
    p.add_argument("--limit", type=_positive_int, default=50)
    p.add_argument("--case", metavar="CASE", help="only this case's entries")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_audit)


def _add_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("demo", help="the whole job on an embedded Redis: no setup needed")
    p.add_argument("--yes", action="store_true", help="approve without asking")
    p.add_argument(
        "--wait",
        type=float,
        default=4.0,
        metavar="SECONDS",
        help="time between the demo's two scans (default 4)",
    )
    p.set_defaults(func=_cmd_demo, needs_settings=False)


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {n}")
    return n


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: 2 on bad usage, 0 on --help
        return int(exc.code or 0)
    settings: Settings | None = None
    try:
        settings = load_settings() if getattr(args, "needs_settings", True) else None
        if settings is not None:
            configure_logging(settings)
        return int(args.func(args, settings, out))
    except LockguardError as exc:
        print(f"lockguard: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("lockguard: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        # Last resort: a Redis failure outside any command's `redis_errors` is still one line
        # naming the endpoint (exit 3), never a traceback nor a secret. Anything else is a bug.
        from redis import RedisError
        from redis.exceptions import RedisClusterException

        from bot.store.connection import describe

        if not isinstance(exc, (RedisError, RedisClusterException)):
            raise
        where = settings.endpoint if settings is not None else "Redis"
        err = describe(exc, where, secrets_of(settings) if settings is not None else ())
        print(f"lockguard: error: {err}", file=sys.stderr)
        return err.exit_code
