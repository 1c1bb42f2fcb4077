"""What `lockguard approve` and `scan` ask and show on a terminal: the typed count of a big case,
a progress bar while its locks are released, a spinner while a scan runs. Off a terminal: no
prompt (`--yes-count N`), a line per tenth of a big release, no spinner.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from bot.cases.approval import Progress
from bot.cases.case import Case, State
from bot.cases.typed_count import needs_typed_count, typed_number
from bot.core.errors import CaseError
from bot.core.invocation import command

#: Off a terminal, a release of at least this many locks prints a line per tenth.
LINES_FROM = 5_000


def confirm_count(
    case: Case,
    typed_above: int,
    yes_count: int | None,
    stdin: TextIO | None = None,
    err: TextIO | None = None,
) -> None:
    """Returns when `case` may be approved as far as its size goes, else CaseError (exit 2). A
    pending case of more than `typed_above` locks takes their number, typed or `yes_count`; a
    `yes_count` given for any case must be its number (a script naming the wrong case stops)."""
    stdin = stdin or sys.stdin
    err = err or sys.stderr
    n = case.total_locks
    if yes_count is not None:
        if yes_count != n:
            raise CaseError(
                f"--yes-count {yes_count} is not the number of locks of case {case.id} ({n}); "
                "nothing was approved"
            )
        return
    if case.state is not State.PENDING or not needs_typed_count(case, typed_above):
        return
    why = (
        f"case {case.id} holds {n:,} locks, more than LOCKGUARD_CONFIRM_TYPED_ABOVE "
        f"({typed_above:,}): approving it takes their number"
    )
    if not stdin.isatty():
        raise CaseError(
            f"{why}. Run it on a terminal and type {n} when asked, or pass --yes-count {n} "
            f"(see `{command()} cases {case.id}` for every lock); nothing was approved"
        )
    err.write(f"lockguard: {why} (`{command()} cases {case.id}` lists every one).\n")
    err.write(f"Type {n} to approve case {case.id}: ")
    err.flush()
    typed = stdin.readline()
    if typed_number(typed) != n:
        shown = typed.strip()[:20] or "nothing"
        raise CaseError(f"{shown!r} is not {n}: nothing was approved")


@contextmanager
def release_progress(err: TextIO) -> Iterator[Progress]:
    """A progress callback for `Engine.approve` (locks done, locks in the case): a bar on a
    terminal, else a line per tenth of a release of at least `LINES_FROM` locks."""
    if not err.isatty():
        yield _lines(err)
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.progress import (
        Progress as Bar,
    )

    columns = (
        TextColumn("releasing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("locks"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Bar(*columns, console=Console(file=err), transient=False) as bar:
        task = bar.add_task("release", total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


@contextmanager
def scan_status(err: TextIO, where: str) -> Iterator[Callable[[object], None]]:
    """A spinner on a terminal's `err` with the flagged locks found so far (the callback, chained
    into the scan's `on_finding`, counts them); nothing drawn off a terminal."""
    if not err.isatty():
        yield lambda _finding: None
        return
    from rich.console import Console
    from rich.progress import Progress as Bar
    from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Bar(*columns, console=Console(file=err), transient=True) as bar:
        task = bar.add_task(f"scanning {where}", total=None)
        flagged = [0]

        def seen(_finding: object) -> None:
            flagged[0] += 1
            if flagged[0] % 100 == 1:  # a redraw per hundred is plenty
                bar.update(task, description=f"scanning {where}: {flagged[0]:,} flagged so far")

        yield seen


def _lines(err: TextIO) -> Progress:
    last = [0]

    def report(done: int, total: int) -> None:
        step = max(LINES_FROM, total // 10)
        if total >= LINES_FROM and (done - last[0] >= step or done == total):
            last[0] = done
            print(f"lockguard: {done}/{total} lock(s) done", file=err, flush=True)

    return report
