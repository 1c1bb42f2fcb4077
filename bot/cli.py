"""The `lockguard` command (also `python -m bot`).

Exit codes (DESIGN §4): 0 healthy, 1 findings, 2 bad input or configuration, 3 Redis unreachable
or refused.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from typing import TextIO

from bot import __version__
from bot.connection import make_client, redis_errors
from bot.display import escape
from bot.engine import ScanOptions, run_scan
from bot.errors import LockguardError
from bot.model import Finding
from bot.report import finding_json, table
from bot.rules import Policy
from bot.scanner import ReadMode
from bot.settings import Settings, load_settings

EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT, EXIT_REDIS = 0, 1, 2, 3


def scan_options(settings: Settings, mode: ReadMode = ReadMode.AUTO) -> ScanOptions:
    return ScanOptions(
        patterns=settings.patterns,
        policy=Policy(stale_threshold_ms=settings.stale_threshold_seconds * 1000,
                      flag_infinite_ttl=settings.flag_infinite_ttl),
        scan_count=settings.scan_count,
        mode=mode,
    )


def _cmd_scan(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    client = make_client(settings)
    options = scan_options(settings, ReadMode(args.read_mode))
    secrets = _secrets(settings)
    if args.json:
        # Findings are spooled (to disk past 8 MB) so that stdout gets one valid JSON object,
        # or nothing when the scan fails, with memory flat however many locks are found.
        with tempfile.SpooledTemporaryFile(max_size=8 << 20, mode="w+") as spool:
            def on_finding(f: Finding) -> None:
                spool.write(json.dumps(finding_json(f)) + "\n")

            with redis_errors(settings.endpoint, secrets):
                result = run_scan(client, options, on_finding=on_finding, keep=0)
            spool.seek(0)
            summary = result.summary()
            out.write("{")
            for k, v in summary.items():
                out.write(f"{json.dumps(k)}: {json.dumps(v)}, ")
            out.write(f'"redis": {json.dumps(settings.endpoint)}, "findings": [')
            first = True
            for line in spool:
                out.write(("" if first else ",") + "\n  " + line.rstrip("\n"))
                first = False
            out.write("\n]}\n")
        return EXIT_FINDINGS if result.findings else EXIT_OK
    with redis_errors(settings.endpoint, secrets):
        result = run_scan(client, options, keep=args.limit)
    patterns = [escape(p) for p in settings.patterns]
    out.write(table(result, settings.endpoint, patterns) + "\n")
    return EXIT_FINDINGS if result.findings else EXIT_OK


def _cmd_check(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    from bot import store

    client = make_client(settings)
    with redis_errors(settings.endpoint, _secrets(settings)):
        client.ping()
        info = client.info("server")
        last = store.last_scan(client)
        heartbeat = client.get(store.HEARTBEAT)
    out.write(f"redis: ok ({settings.endpoint}, redis_version {info.get('redis_version')})\n")
    if last is None:
        out.write("last scan: none recorded yet\n")
    else:
        out.write(f"last scan: {last.get('scanned')} lock(s), {last.get('finding_count')} finding(s)"
                  f"{'' if heartbeat else ' (heartbeat expired: no scan for 15 min)'}\n")
    return EXIT_OK


def _secrets(settings: Settings) -> tuple[str, ...]:
    return tuple(
        s.get_secret_value()
        for s in (settings.redis_password, settings.slack_bot_token,
                  settings.slack_signing_secret, settings.slack_app_token)
        if s is not None
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lockguard",
        description="Find abandoned Redis locks and release them safely. Configuration comes "
        "from the environment (REDIS_URL or REDIS_HOST/REDIS_PORT, REDIS_PASSWORD, "
        "LOCKGUARD_LOCK_PATTERNS, ...); see README.md.",
    )
    parser.add_argument("--version", action="version", version=f"lockguard {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("scan", help="scan once and report every matching lock")
    p.add_argument("--json", action="store_true", help="one JSON object for scripts")
    p.add_argument("--limit", type=_positive_int, default=50,
                   help="locks shown in the table, worst first (default 50)")
    p.add_argument("--read-mode", choices=[m.value for m in ReadMode], default="auto",
                   help="lua: one script per batch; pipeline: for servers without scripting")
    p.set_defaults(func=_cmd_scan)

    p = sub.add_parser("check", help="check that Redis answers and when the last scan ran")
    p.set_defaults(func=_cmd_check)
    return parser


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
    try:
        settings = load_settings()
        return int(args.func(args, settings, out))
    except LockguardError as exc:
        print(f"lockguard: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("lockguard: interrupted", file=sys.stderr)
        return 130
