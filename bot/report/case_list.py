"""A case's whole list, so an approver has seen every lock their approval releases: as CSV (the
file in the case's Slack thread), and as lines and JSON Lines (`lockguard cases CASE`). Each
streams the locks, so memory stays flat for a case of 100,000. A key cut at `KEY_SHOWN` is named
by `key_sha256` too. Keys and holders are whoever wrote them: a cell a spreadsheet would run as a
formula gets a `'` before it (OWASP's CSV injection advice).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterable, Iterator

from bot.cases.case import CaseLock
from bot.core.display import big_text, duration, escape, key_text, ttl

#: A key in a terminal line, escaped, cut at this many characters (`--json` has them whole).
KEY_IN_LINE = 120

COLUMNS = ("n", "key", "key_sha256", "layout", "verdict", "held", "ttl", "holder", "renewal")
#: Characters of a key shown in a row; a longer one is named by its digest too.
KEY_SHOWN = 512
HOLDER_SHOWN = 200
_FORMULA_FIRST = ("=", "+", "-", "@", "\t", "\r")


def cell(text: str) -> str:
    """`text`, never read as a formula by a spreadsheet."""
    return "'" + text if text.startswith(_FORMULA_FIRST) else text


def row(n: int, lock: CaseLock) -> list[str]:
    if lock.big is not None:  # its digest is what the approver compares
        key, digest = big_text(lock.big, None), lock.big.sha256
    else:
        key, digest = escape(lock.key, None), ""
    if len(key) > KEY_SHOWN:
        key = key[:KEY_SHOWN] + "…"
        digest = hashlib.sha256(lock.key).hexdigest()
    return [
        str(n),
        cell(key),
        digest,
        lock.layout.value,
        lock.reason.value,
        duration(lock.held_seconds),
        ttl(lock.ttl_ms),
        cell(escape(lock.owner.encode(), HOLDER_SHOWN)),
        cell(lock.renewal),
    ]


def case_csv(locks: Iterable[CaseLock]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for n, lock in enumerate(locks, 1):
        writer.writerow(row(n, lock))
    return out.getvalue().encode("utf-8")


def case_lines(locks: Iterable[CaseLock]) -> Iterator[str]:
    """One line per lock for a terminal, numbered as in the CSV (a header first)."""
    yield f"  {'#':>6}  {'verdict':<26} {'held':>7}  {'ttl':>6}  {'layout':<18} key (holder)"
    for n, lock in enumerate(locks, 1):
        holder = f"  ({escape(lock.owner.encode(), 60)})" if lock.owner else ""
        yield (
            f"  {n:>6}  {lock.reason.value:<26} {duration(lock.held_seconds):>7}  "
            f"{ttl(lock.ttl_ms):>6}  {lock.layout.value:<18} "
            f"{key_text(lock.key, lock.big, KEY_IN_LINE)}"
            f"{holder}"
        )


def case_json_lines(locks: Iterable[CaseLock]) -> Iterator[str]:
    for n, lock in enumerate(locks, 1):
        yield json.dumps({"n": n, **lock.to_json()}, ensure_ascii=False)
