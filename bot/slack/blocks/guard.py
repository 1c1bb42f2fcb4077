"""lockguard's always-on side as the Slack app sees it (`Guard`: the listeners report scans and
releases to it and read its `snapshot`; `bot.serve.operations` owns it), and how it shows itself.

Quiet is not healthy: `alarm` says first, in bold, when no scan ever completed, scans are
overdue or failing, or a silence watch is late.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from bot.core.display import duration
from bot.slack.blocks.inventory import Inventory, histogram, layout_line, verdict_line
from bot.slack.blocks.kit import Block, Listing, divider, fields, header, section
from bot.slack.blocks.text import OWNER_LIMIT, code, count, date, redis_text, word

if TYPE_CHECKING:
    from bot.scan.result import ScanResult

#: Late watches `/lockguard status` lists at most.
STATUS_WATCHES = 10


@dataclass(frozen=True, slots=True)
class WatchState:
    """One silence watch (`LOCKGUARD_WATCHES`): a key the user's own job updates every run."""

    key_text: str
    age_seconds: float | None  # None: missing, or holds no time (`problem` says why)
    max_age_seconds: float
    overdue: bool
    problem: str = ""


@dataclass(frozen=True, slots=True)
class GuardHealth:
    """How lockguard itself is doing; counts are since the last digest."""

    scans_ok: int = 0
    scans_failed: int = 0
    last_success_ms: int | None = None
    next_scan_ms: int | None = None
    leader: str = ""  # the replica running the schedules; "" unknown
    overdue: bool = False
    watches: tuple[WatchState, ...] = ()


@dataclass(frozen=True, slots=True)
class GuardSnapshot:
    """The guard's health, and its schedules in words and when each runs next."""

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


def alarm(inv: Inventory | None, health: GuardHealth, *, endpoint: str, now_ms: int) -> str:
    """What is wrong with the guard itself, in bold, or "" when nothing is."""
    lines = []
    if inv is None:
        lines.append(
            f":rotating_light: *lockguard has not completed a scan* on {code(endpoint)}: "
            "nothing is known about its locks. Check `/lockguard status`, the "
            "scheduler and that lockguard's Redis user may run SCAN."
        )
    elif health.overdue:
        since = (
            f"the last completed {date(health.last_success_ms)} "
            f"({duration((now_ms - health.last_success_ms) / 1000)} ago)"
            if health.last_success_ms
            else "none has completed since lockguard started"
        )
        lines.append(f":rotating_light: *Scans are overdue*: {since}; the counts may be stale.")
    if health.scans_failed:
        lines.append(
            f":warning: *{count(health.scans_failed, 'scan')} failed* since the last "
            f"digest ({health.scans_ok:,} completed)."
        )
    late = [w for w in health.watches if w.overdue]
    if late:
        lines.append(
            f":warning: *{count(len(late), 'silence watch', 'silence watches')} "
            f"{'is' if len(late) == 1 else 'are'} late*: listed below."
        )
    return "\n".join(lines)


def watch_lines(watches: Sequence[WatchState]) -> list[str]:
    """Late watches first (missing ones first of all)."""

    def rank(w: WatchState) -> tuple[int, float]:
        return (
            0 if w.overdue and w.age_seconds is None else 1 if w.overdue else 2,
            -(w.age_seconds or 0.0),
        )

    out = []
    for w in sorted(watches, key=rank):
        key, allowed = redis_text(w.key_text), f"(allowed {duration(w.max_age_seconds)})"
        if w.age_seconds is None and w.problem:
            out.append(f":red_circle: {key} · *{word(w.problem)}*: it holds no time {allowed}")
        elif w.age_seconds is None:
            out.append(f":red_circle: {key} · *missing*: the key does not exist {allowed}")
        else:
            state = ":red_circle: {} · *late*:" if w.overdue else ":large_green_circle: {} ·"
            out.append(f"{state.format(key)} updated {duration(w.age_seconds)} ago {allowed}")
    return out


def watch_listing(watches: Sequence[WatchState]) -> Listing:
    return Listing(
        "*Silence watches*",
        watch_lines(watches),
        "watch",
        "watches",
        "`/lockguard status`",
        weight=2,
        empty="No silence watches configured (`LOCKGUARD_WATCHES`).",
    )


def head_blocks(
    inv: Inventory | None, health: GuardHealth, *, endpoint: str, now_ms: int, title: str
) -> list[Block]:
    """The top of the digest and the Home tab: the alarm, then the inventory."""
    blocks = [header(f"lockguard has not completed a scan on {endpoint}" if inv is None else title)]
    warn = alarm(inv, health, endpoint=endpoint, now_ms=now_ms)
    if warn:
        blocks.append(section(warn))
    if inv is not None:
        last = date(inv.server_time_ms) if inv.server_time_ms else "time unknown"
        blocks += [
            fields(
                f"*Locks*\n{inv.locks:,} ({count(inv.scanned, 'key')} scanned)",
                f"*Flagged*\n{inv.flagged:,}",
                f"*Oldest held*\n{duration(inv.oldest_held)}",
                f"*Last scan*\n{last} ({inv.duration_seconds:.1f}s)",
            ),
            section(f"*By verdict*: {verdict_line(inv)}\n*By layout*: {layout_line(inv)}"),
            section(f"*Lock ages*\n{histogram(inv)}"),
        ]
    return blocks


def health_blocks(health: GuardHealth, *, now_ms: int) -> list[Block]:
    last, nxt = "never", "none scheduled"
    if health.last_success_ms:
        ago = duration((now_ms - health.last_success_ms) / 1000)
        last = f"{date(health.last_success_ms)} ({ago} ago)"
    if health.next_scan_ms:
        wait = duration(max(health.next_scan_ms - now_ms, 0) / 1000)
        nxt = f"{date(health.next_scan_ms)} (in {wait})"
    leader = redis_text(health.leader, OWNER_LIMIT) if health.leader else "unknown"
    return [
        divider(),
        section("*lockguard's own health*"),
        fields(
            f"*Scans since the last digest*\n{health.scans_ok:,} completed, "
            f"{health.scans_failed:,} failed",
            f"*Last successful scan*\n{last}" + (" · *overdue*" if health.overdue else ""),
            f"*Next scan*\n{nxt}",
            f"*Schedules run by*\n{leader}",
        ),
    ]


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
