"""What the Slack app asks of lockguard's always-on side (`bot.serve.operations`), and how it
shows it.

The listeners do not own the scheduler, the health check or the metrics; they get a `Guard`:

- `scan_done(trigger, result)` / `scan_failed(trigger)`: a `/lockguard scan` completed or failed
  (counted in the metrics and for the digest);
- `releases(counts)`: an approval's outcome counts (`lockguard_releases_total`);
- `snapshot()`: the guard as it is now (`GuardSnapshot`): for `/lockguard status` and the Home
  tab, with the next scheduled scan and digest and which replica runs the schedules.

`schedule_blocks(snapshot, now_ms)` is the part of `/lockguard status` that shows it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from bot.core.display import duration
from bot.slack.blocks.guard_health import GuardHealth, watch_lines
from bot.slack.blocks.kit import Block, fields, section
from bot.slack.blocks.text import OWNER_LIMIT, code, count, date, redis_text

if TYPE_CHECKING:
    from bot.scan.result import ScanResult

#: Late watches `/lockguard status` lists at most.
STATUS_WATCHES = 10


@dataclass(frozen=True, slots=True)
class GuardSnapshot:
    """`health` as the digest and the Home tab show it (its `leader` is the lease holder's
    replica id, "" when none holds it); the schedules in words and when each runs next."""

    health: GuardHealth
    scan_schedule: str  # `Schedule.describe()`: "every 30s", "cron */15 * * * * (UTC)", "off"
    digest_schedule: str
    next_digest_ms: int | None
    replica: str  # this process
    leader_is_me: bool


class Guard(Protocol):
    def scan_done(self, trigger: str, result: ScanResult) -> None: ...

    def scan_failed(self, trigger: str) -> None: ...

    def releases(self, counts: Mapping[str, int]) -> None: ...

    def snapshot(self) -> GuardSnapshot: ...


def _when(ms: int | None, schedule: str, now_ms: int) -> str:
    if schedule == "off":
        return "off"
    if ms is None:
        return f"not scheduled ({schedule})"
    return f"{date(ms)} (in {duration(max(ms - now_ms, 0) / 1000)}; {schedule})"


def leader_words(snapshot: GuardSnapshot) -> str:
    """`host-1:77` (this replica), `host-2:12`, or nobody."""
    leader = snapshot.health.leader
    if not leader:
        return "no replica holds the lease now (the next to renew takes it)"
    return redis_text(leader, OWNER_LIMIT) + (
        " (this replica)" if snapshot.leader_is_me else f"; this is {code(snapshot.replica[:60])}"
    )


def schedule_blocks(snapshot: GuardSnapshot, now_ms: int) -> list[Block]:
    """Next scan, next digest, who runs the schedules, and what is late."""
    h = snapshot.health
    out: list[Block] = [
        fields(
            f"*Next scheduled scan*\n{_when(h.next_scan_ms, snapshot.scan_schedule, now_ms)}",
            f"*Next digest*\n{_when(snapshot.next_digest_ms, snapshot.digest_schedule, now_ms)}",
            f"*Schedules run by*\n{leader_words(snapshot)}",
            f"*Scans since the last digest*\n{h.scans_ok:,} completed, {h.scans_failed:,} failed"
            + (" · *overdue*" if h.overdue else ""),
        )
    ]
    late = [w for w in h.watches if w.overdue]
    if late:
        lines = watch_lines(late)[:STATUS_WATCHES]
        more = len(late) - len(lines)
        out.append(
            section(
                f"*Silence watches late*: {count(len(late), 'watch', 'watches')}\n"
                + "\n".join(lines)
                + (f"\n…and {more:,} more" if more else "")
            )
        )
    elif h.watches:
        out.append(section(f"*Silence watches*: all {len(h.watches):,} fresh"))
    return out
