"""The `lockguard` command (also `python -m bot`). Exit codes: 0 healthy, 1 findings, 2 bad input
or configuration, 3 Redis unreachable or refused."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TextIO

from bot import __version__
from bot.cases.case import State, check_case_id
from bot.cases.decision import check_actor
from bot.compose import configure_logging, secrets_of
from bot.config import Settings, load_settings, unconfigured_note
from bot.config_report import add_config_command, cmd_config
from bot.core.errors import CaseDecidedError, CaseError, LockguardError
from bot.core.invocation import command
from bot.engine import Engine
from bot.fleet import Target
from bot.fleet.cases import case_engine, fleet_audit, fleet_cases
from bot.fleet.results import chosen, fleet_secrets
from bot.fleet.scanning import fleet_check, fleet_scan_json, fleet_scan_text
from bot.fleet.targets_file import load_fleet
from bot.report import approval_text, case_json, case_text, for_real
from bot.report.case_list import case_json_lines, case_lines
from bot.report.terminal import confirm_count, release_progress
from bot.scan import ReadMode

EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT, EXIT_REDIS = 0, 1, 2, 3


def _fleet(args: argparse.Namespace) -> list[Target]:
    """`--target NAME`'s target, else every target `main` loaded."""
    return chosen(args.fleet, getattr(args, "target", None))


def _cmd_scan(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    targets, mode, conc = _fleet(args), ReadMode(args.read_mode), settings.target_concurrency
    if args.json:
        return fleet_scan_json(targets, mode, conc, out)
    return fleet_scan_text(targets, mode, args.limit, conc, out)


def _cmd_cases(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    if args.case_id:
        return _cmd_case_list(args, settings, out)
    return fleet_cases(_fleet(args), args.limit, args.json, settings.target_concurrency, out)


def _cmd_case_list(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """`lockguard cases CASE`: the case, then every lock, read a batch at a time. `--json`: JSON
    Lines, the case first (without its preview of locks), then one object per lock."""
    engine = _case_engine(args, settings, out)
    case = engine.case(args.case_id)
    locks = (lock for batch in engine.case_lock_batches(case.id) for lock in batch)
    if args.json:
        head = {k: v for k, v in case_json(case, engine.now_ms()).items() if k != "locks"}
        out.write(json.dumps({"case": head}, ensure_ascii=False) + "\n")
        lines = case_json_lines(locks)
    else:
        out.write(case_text(case, engine.now_ms(), show=0) + "\n")
        lines = case_lines(locks)
    for line in lines:
        out.write(line + "\n")
    return EXIT_OK


def _case_engine(args: argparse.Namespace, settings: Settings, out: TextIO) -> Engine:
    name, conc = getattr(args, "target", None), settings.target_concurrency
    return case_engine(args.fleet, args.case_id, name, conc, out)


def _cmd_approve(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    engine = _case_engine(args, settings, out)
    check_actor(args.by)  # who approves first, as the engine checks it, before any read
    if not args.resume:
        confirm_count(engine.case(args.case_id), settings.confirm_typed_above, args.yes_count)
    try:
        with release_progress(sys.stderr) as progress:
            rep = engine.approve(args.case_id, args.by, resume=args.resume, progress=progress)
    except CaseDecidedError as exc:
        if exc.state == State.APPROVED.value and engine.case(args.case_id).dry_run:
            raise CaseDecidedError(
                f"{exc}; it was approved in dry run, which released nothing and closed it: "
                f"`{command()} scan` opens a new case of its locks, then `{for_real()} <that case> "
                f"--by {args.by.strip() or 'NAME'}` releases them",
                state=exc.state,
            ) from None
        raise
    out.write(approval_text(rep) + "\n")
    if rep.errors:
        print(
            f"lockguard: error: {rep.errors} lock(s) of case {rep.case.id} could not be "
            f"released (see above); the case is {rep.case.state.value}: "
            f"`{command()} approve {rep.case.id} --by NAME --resume` retries them",
            file=sys.stderr,
        )
        return EXIT_REDIS
    return EXIT_OK


def _cmd_reject(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    engine = _case_engine(args, settings, out)
    case = engine.reject(args.case_id, args.by, args.reason)
    out.write(case_text(case, engine.now_ms()) + "\n")
    return EXIT_OK


def _cmd_audit(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    case_id = check_case_id(args.case) if args.case else None
    conc = settings.target_concurrency
    return fleet_audit(_fleet(args), args.limit, case_id, args.json, conc, out)


def _cmd_demo(args: argparse.Namespace, settings: Settings | None, out: TextIO) -> int:
    from bot.demo.walkthrough import run_demo

    return run_demo(out, assume_yes=args.yes, wait_seconds=args.wait)


def _cmd_serve(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    from bot.serve import run

    # The fleet was loaded by `main`, so every target's password is masked in serve's logs too.
    return run(settings, targets=_fleet(args))


def _cmd_check(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    return fleet_check(_fleet(args), settings.target_concurrency, out)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lockguard",
        description="Find abandoned Redis locks and release them safely. Configuration comes "
        "from the environment (REDIS_URL or REDIS_HOST/REDIS_PORT, REDIS_PASSWORD, "
        "LOCKGUARD_LOCK_PATTERNS, ...), or LOCKGUARD_TARGETS_FILE for many Redis; see "
        "README.md and docs/settings.md.",
    )
    parser.add_argument("--version", action="version", version=f"lockguard {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_scan(sub)
    p = sub.add_parser(
        "serve",
        help="run the Slack app (HTTP; Socket Mode with SLACK_APP_TOKEN)",
        description=SERVE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(func=_cmd_serve)
    p = sub.add_parser(
        "check",
        help="check that Redis answers, when the last scan ran and whether scans are overdue",
    )
    _add_target(p)
    p.set_defaults(func=_cmd_check)
    _add_case_commands(sub)
    _add_demo(sub)
    add_config_command(sub)
    for action in sub._choices_actions:  # each command's --help says what it does
        command = sub.choices[action.dest]
        if command.description is None and action.help:
            command.description = action.help[0].upper() + action.help[1:] + "."
    return parser


SERVE_HELP = """\
Run the Slack app: /lockguard commands, Approve/Reject buttons and the Home tab, with
scheduled scans and digests, the webhook, /healthz, /livez and /metrics in one process.

Needed (a missing one is exit 2, named, before anything connects):
  SLACK_BOT_TOKEN            the bot token (xoxb-...)
  SLACK_SIGNING_SECRET       HTTP mode: the app's signing secret
  SLACK_APP_TOKEN            or Socket Mode (no public URL): an app-level token (xapp-...)
  LOCKGUARD_SLACK_CHANNEL    the incident channel's id (C...)
  LOCKGUARD_APPROVERS        who may approve (Slack user ids, or * for anyone in the channel),
  or LOCKGUARD_APPROVER_GROUP  or a Slack user group
  and where Redis is         REDIS_URL, or REDIS_HOST / REDIS_PORT (or LOCKGUARD_TARGETS_FILE)

Often set: LOCKGUARD_HTTP_HOST and LOCKGUARD_HTTP_PORT (or PORT; default 127.0.0.1:3000),
LOCKGUARD_SCAN_SCHEDULE, LOCKGUARD_DIGEST_SCHEDULE, LOCKGUARD_DRY_RUN (true by default),
LOCKGUARD_WEBHOOK_KEY, LOCKGUARD_METRICS_TOKEN. Each secret may come from NAME_FILE instead.
`lockguard config` shows every setting and where it came from."""


def _add_scan(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("scan", help="scan once and report every matching lock")
    p.add_argument("--json", action="store_true", help="one JSON object for scripts")
    _add_limit(p, 50, "locks shown in the table, worst first")
    p.add_argument(
        "--read-mode",
        choices=[m.value for m in ReadMode],
        default="auto",
        help="lua: two scripts per batch (SCAN, then a read); pipeline: without scripting",
    )
    _add_target(p)
    p.set_defaults(func=_cmd_scan)


def _add_case_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "cases",
        help="open and recent approval cases; with CASE, every lock of that case",
    )
    p.add_argument(
        "case_id",
        metavar="CASE",
        nargs="?",
        type=_case_id,
        help="list every lock of this case (read a batch at a time, however many)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="for scripts: one JSON object; with CASE, JSON Lines (the case, then each lock)",
    )
    _add_limit(p, 20, "cases shown, newest first")
    _add_target(p)
    p.set_defaults(func=_cmd_cases)

    p = sub.add_parser(
        "approve",
        help="approve a case and release its locks (break-glass path); dry run by default",
        description="Approve a pending case and release its locks. Dry run is the default "
        "(LOCKGUARD_DRY_RUN=true): the approval is recorded and closes the case, and no lock is "
        "touched. To release for real, approve a pending case with dry run off: "
        "`LOCKGUARD_DRY_RUN=false lockguard approve CASE --by NAME`.",
    )
    p.add_argument("case_id", metavar="CASE", type=_case_id, help=CASE_HELP)
    p.add_argument("--by", required=True, metavar="NAME", help="who approves (audited)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="finish the release of an approved case whose approver died half-way",
    )
    p.add_argument(
        "--yes-count",
        type=_positive_int,
        metavar="N",
        help="for scripts: the case's number of locks, which approving a case of more than "
        "LOCKGUARD_CONFIRM_TYPED_ABOVE takes (on a terminal it is asked for instead)",
    )
    _add_target(p)
    p.set_defaults(func=_cmd_approve)

    p = sub.add_parser("reject", help="reject a case: its locks are left alone")
    p.add_argument("case_id", metavar="CASE", type=_case_id, help=CASE_HELP)
    p.add_argument("--by", required=True, metavar="NAME", help="who rejects (audited)")
    p.add_argument(
        "--reason", required=True, metavar="TEXT", help="why (audited; shown with the case)"
    )
    _add_target(p)
    p.set_defaults(func=_cmd_reject)

    p = sub.add_parser("audit", help="recent audit log entries, newest first")
    _add_limit(p, 50, "entries shown, newest first")
    p.add_argument("--case", metavar="CASE", type=_case_id, help="only this case's entries")
    p.add_argument("--json", action="store_true", help="one JSON object for scripts")
    _add_target(p)
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
    p.set_defaults(func=_cmd_demo, needs_settings=False, uses_fleet=False)


def _add_limit(p: argparse.ArgumentParser, default: int, what: str) -> None:
    p.add_argument(
        "--limit", type=_positive_int, default=default, help=f"{what} (default {default})"
    )


def _add_target(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--target",
        metavar="NAME",
        help="only this target of LOCKGUARD_TARGETS_FILE (default: every target)",
    )


CASE_HELP = "the case's id, LG-YYMMDD-xxxxxx, as `lockguard scan` and `lockguard cases` print it"


def _case_id(text: str) -> str:
    try:
        return check_case_id(text)
    except CaseError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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
    secrets: tuple[str, ...] = ()
    try:
        settings = load_settings() if getattr(args, "needs_settings", True) else None
        if settings is not None:
            if getattr(args, "uses_fleet", True):  # every target's password masked in the logs
                args.fleet = load_fleet(settings)
                secrets = fleet_secrets(args.fleet)
            configure_logging(settings, secrets)
            note = unconfigured_note(settings.endpoint) if args.func is not cmd_config else ""
            if note:
                print(note, file=sys.stderr)
        return int(args.func(args, settings, out))
    except LockguardError as exc:
        print(f"lockguard: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("lockguard: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        # A Redis failure outside any command's `redis_errors` is still one line (exit 3), never
        # a traceback nor a secret. Anything else is a bug.
        from redis import RedisError
        from redis.exceptions import RedisClusterException

        from bot.store.connection import describe

        if not isinstance(exc, (RedisError, RedisClusterException)):
            raise
        where = settings.endpoint if settings is not None else "Redis"
        held = secrets_of(settings) if settings is not None else ()
        err = describe(exc, where, held + secrets)
        print(f"lockguard: error: {err}", file=sys.stderr)
        return err.exit_code
