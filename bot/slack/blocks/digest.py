"""The digest (`LOCKGUARD_DIGEST_SCHEDULE`): the lock inventory, the cases since the last digest
and the guard's own health, from the last scan (`bot.store.scans.last_scan`), the cases and a
`GuardHealth`. Quiet is not healthy: no scan ever, scans overdue or failing, or a late silence
watch is said first, in bold. The oldest locks are listed even when healthy, with their age (an
ageing healthy lock is the early warning). Redis content is inert code (`bot.slack.blocks.text`);
any input fits `limits.check_message`. The pieces are shared with the Home tab
(`bot.slack.blocks.home`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.cases.case import Case, State
from bot.core.display import duration, escape, ttl
from bot.core.model import Reason
from bot.scan.result import AGE_LABELS
from bot.slack.blocks import limits
from bot.slack.blocks.case_message import state_word
from bot.slack.blocks.kit import (
    BUDGET,
    Block,
    Message,
    context,
    divider,
    fields,
    header,
    message,
    pack,
    section,
)
from bot.slack.blocks.text import (
    KEY_LIMIT,
    OWNER_LIMIT,
    code,
    count,
    cut,
    date,
    mrkdwn,
    plain,
    redis_text,
)
from bot.slack.blocks.wording import OUTCOME_WORDS, REASON_LABEL, outcome_words

#: The longest bar of the age histogram, in characters (the largest bucket).
BAR_WIDTH = 20
BAR = "█"
#: Cases that still need something (a decision, a release, a resume) are listed first.
_ATTENTION = (State.INCOMPLETE, State.PENDING, State.APPROVED, State.OPENING)
_REASONS = {r.value: REASON_LABEL[r] for r in Reason}


@dataclass(frozen=True, slots=True)
class WatchState:
    """One silence watch (`LOCKGUARD_WATCHES`): a key the user's own job updates every run."""

    key_text: str
    age_seconds: float | None  # None: the key is missing (or holds no time: see `problem`)
    max_age_seconds: float
    overdue: bool
    problem: str = ""  # why no time could be read when not missing ("wrong type", "unreadable")


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
class Inventory:
    """The last scan's summary (`ScanResult.summary()`); a missing or malformed field is empty."""

    scanned: int
    flagged: int
    by_reason: dict[str, int]
    by_layout: dict[str, int]
    by_pattern: dict[str, int]
    histogram: dict[str, int]
    oldest: list[Mapping[str, Any]]
    oldest_held: float
    server_time_ms: int
    duration_seconds: float

    @property
    def locks(self) -> int:
        return max(self.scanned - self.by_reason.get(Reason.NOT_A_LOCK.value, 0), 0)


def _num(value: Any) -> float:
    try:
        n = float(value)
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return n if math.isfinite(n) else 0.0


def _int(value: Any) -> int:
    return int(_num(value))


def _counts(value: Any) -> dict[str, int]:
    return {str(k): _int(n) for k, n in value.items()} if isinstance(value, Mapping) else {}


def inventory(last_scan: Mapping[str, Any] | None) -> Inventory | None:
    if not isinstance(last_scan, Mapping):
        return None
    oldest = last_scan.get("oldest")
    return Inventory(
        scanned=_int(last_scan.get("scanned")),
        flagged=_int(last_scan.get("finding_count")),
        by_reason=_counts(last_scan.get("by_reason")),
        by_layout=_counts(last_scan.get("by_layout")),
        by_pattern=_counts(last_scan.get("by_pattern")),
        histogram=_counts(last_scan.get("age_histogram")),
        oldest=[e for e in oldest if isinstance(e, Mapping)] if isinstance(oldest, list) else [],
        oldest_held=_num(last_scan.get("oldest_held_seconds")),
        server_time_ms=_int(last_scan.get("server_time_ms")),
        duration_seconds=_num(last_scan.get("duration_seconds")),
    )


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


def word(text: str, limit: int = 40) -> str:
    """A name lockguard did not write (a layout, an outcome from a record): shown escaped."""
    return plain(escape(text.encode("utf-8", "backslashreplace"), limit))


def _reason_label(value: str) -> str:
    return _REASONS.get(value) or word(value)


def verdict_line(inv: Inventory) -> str:
    order = list(_REASONS)
    names = sorted(inv.by_reason, key=lambda k: (order.index(k) if k in order else len(order), k))
    parts = [f"{inv.by_reason[k]:,} {_reason_label(k)}" for k in names if inv.by_reason[k]]
    return cut(" · ".join(parts[:20]) or "no keys", 1500)


def layout_line(inv: Inventory) -> str:
    names = sorted(inv.by_layout, key=lambda k: (-inv.by_layout[k], k))
    parts = [f"{inv.by_layout[k]:,} {word(k)}" for k in names[:20] if inv.by_layout[k]]
    return cut(" · ".join(parts) or "none", 1500)


def histogram(inv: Inventory) -> str:
    """The age buckets as text bars in a code block, the largest bucket BAR_WIDTH long."""
    counts = [max(inv.histogram.get(label, 0), 0) for label in AGE_LABELS]
    if not any(counts):
        return "_No locks to age._"
    bars = [BAR * (max(round(n * BAR_WIDTH / max(counts)), 1) if n else 0) for n in counts]
    rows = [
        f"{label:<5} {bar:<{BAR_WIDTH}} {n:,}"
        for label, bar, n in zip(AGE_LABELS, bars, counts, strict=True)
    ]
    return "```\n" + mrkdwn("\n".join(rows)) + "\n```"


def shown_key(entry: Mapping[str, Any]) -> str:
    """A key of the summary: its exact bytes (`key_hex`) made inert, else its escaped text."""
    try:
        return redis_text(bytes.fromhex(str(entry["key_hex"])))
    except (KeyError, ValueError):
        return code(cut(str(entry.get("key", "")), KEY_LIMIT))


def oldest_lines(inv: Inventory) -> list[str]:
    """The oldest locks, healthy ones too: age, owner, verdict, TTL, layout."""
    out = []
    for i, e in enumerate(inv.oldest, 1):
        owner = str(e.get("owner") or "")
        who = f"owner {redis_text(owner, OWNER_LIMIT)}" if owner else "owner unknown"
        out.append(
            f"{i}. {shown_key(e)} · held *{duration(_num(e.get('held_seconds')))}* · "
            f"{who} · {_reason_label(str(e.get('reason', '')))} · "
            f"TTL {ttl(_int(e.get('ttl_ms')))} · {word(str(e.get('layout', '')))}"
        )
    return out


def pattern_lines(inv: Inventory) -> list[str]:
    names = sorted(inv.by_pattern, key=lambda k: (-inv.by_pattern[k], k))
    return [f"{code(cut(p, KEY_LIMIT + 40))} · {count(inv.by_pattern[p], 'key')}" for p in names]


def watch_lines(watches: Sequence[WatchState]) -> list[str]:
    """Late watches first (missing ones first of all), each with its age and allowed age."""

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


def head_blocks(
    inv: Inventory | None, health: GuardHealth, *, endpoint: str, now_ms: int, title: str
) -> list[Block]:
    """The top of the digest and the Home tab: what is wrong with the guard, if anything, then
    the counts by verdict and layout, and the age histogram."""
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
    """Scans run and failed, last success, next scan, who runs the schedules."""
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


@dataclass(frozen=True, slots=True)
class Listing:
    """A titled list of lines for `fit`; "…and N more <noun>" counts what did not fit."""

    title: str
    lines: Sequence[str]
    noun: str  # what one line is ("lock"), plural with an "s" unless `plural` says otherwise
    plural: str = ""
    hint: str = ""  # where the rest are, e.g. "`/lockguard cases`"
    weight: int = 1  # its share of the room, against the others'
    total: int | None = None  # when `lines` are only the first of more
    empty: str = ""  # mrkdwn shown when there are no lines ("": nothing is shown)

    def show(self, n: int) -> list[Block]:
        """The title, the first `n` lines, and the count of the rest."""
        if not self.lines:
            return [context(self.empty)] if self.empty else []
        body, _ = pack(self.lines[:n], budget=10**9, max_blocks=10**6)
        left = (len(self.lines) if self.total is None else self.total) - n
        noun = self.noun if left == 1 else self.plural or self.noun + "s"
        more = [context(f"…and {left:,} more {noun}{': ' if self.hint else ''}{self.hint}")]
        return [section(self.title), *body, *(more if left > 0 else [])]


def fit(items: Sequence[Listing], *, budget: int, max_blocks: int) -> list[list[Block]]:
    """Each listing's blocks, together within `budget` characters of JSON and `max_blocks`
    blocks. Lines are added one at a time, each to the listing with the least room per weight
    so far, until no more fits: a listing of long lines cannot crowd out the others."""
    shown = [0] * len(items)
    built = [item.show(0) for item in items]
    while built and sum(map(limits.blocks_size, built)) > budget:  # cannot happen in practice
        built.pop()
    sizes = [limits.blocks_size(b) for b in built]
    open_ = {i for i in range(len(built)) if items[i].lines}
    while open_:
        i = min(open_, key=lambda k: (sizes[k] / max(items[k].weight, 1), k))
        trial = items[i].show(shown[i] + 1)
        size, blocks = sum(sizes) - sizes[i] + limits.blocks_size(trial), sum(map(len, built))
        if size > budget or blocks - len(built[i]) + len(trial) > max_blocks:
            open_.discard(i)
            continue
        shown[i], built[i], sizes[i] = shown[i] + 1, trial, limits.blocks_size(trial)
        if shown[i] == len(items[i].lines):
            open_.discard(i)
    return built + [[] for _ in range(len(items) - len(built))]


def _since(cases: Iterable[Case], since_ms: int | None) -> list[Case]:
    """Cases opened since the last digest, and older ones decided since (what became of them)."""
    return [
        c
        for c in cases
        if since_ms is None
        or c.created_ms > since_ms
        or (c.decided_ms is not None and c.decided_ms > since_ms)
    ]


def case_state(case: Case, now_ms: int) -> str:
    """The case's state in words; a pending case with an approval waits for one more."""
    approvals = list(case.approvals)
    return state_word(case, now_ms, approvals, len(approvals) + 1 if approvals else 1)


def _case_line(case: Case, now_ms: int) -> str:
    state = case.effective_state(now_ms)
    line = (
        f"{code(cut(case.id, 40))} · *{case_state(case, now_ms)}* · "
        f"{count(case.lock_count or len(case.locks), 'lock')} · opened {date(case.created_ms)}"
    )
    if state is State.PENDING:
        line += f" · expires {date(case.expires_ms)}"
    if case.decided_by:  # shown, not mentioned: a daily digest must not ping every decider
        line += f" · decided by {redis_text(case.decided_by, OWNER_LIMIT)}"
        if case.decided_ms:
            line += f" at {date(case.decided_ms)}"
    if case.decision_reason:
        line += f"\n      “{plain(case.decision_reason, 300)}”"
    if case.outcome_counts:
        line += "\n      " + outcomes_text(case.outcome_counts)
    return line


def outcomes_text(counts: Mapping[str, int]) -> str:
    order = list(OUTCOME_WORDS)
    names = sorted(counts, key=lambda k: (order.index(k) if k in order else len(order), k))
    return " · ".join(f"{counts[k]:,} {word(outcome_words(k), 60)}" for k in names[:8] if counts[k])


def _cases_title(
    recent: list[Case], inv: Inventory | None, since_ms: int | None, now_ms: int
) -> str:
    when = f"since the last digest ({date(since_ms)})" if since_ms else "in the retention period"
    flagged = f"The last scan flagged {count(inv.flagged, 'lock')}." if inv is not None else ""
    if not recent:
        return f"*Cases {when}*\nNo case was opened or decided. {flagged}".rstrip()
    states = Counter(case_state(c, now_ms) for c in recent)
    outcomes = sum((Counter(c.outcome_counts) for c in recent), Counter[str]())
    locks = sum(c.lock_count or len(c.locks) for c in recent)
    text = f"*Cases {when}*: {count(len(recent), 'case')} of {count(locks, 'lock')}: " + " · ".join(
        f"{n:,} {plain(w, 60).lower()}" for w, n in states.most_common(8)
    )
    if outcomes:
        text += f"\nWhat became of their locks: {outcomes_text(outcomes)}"
    return text + (f"\n{flagged}" if flagged else "")


def digest_message(
    last_scan: dict[str, Any] | None,
    cases: list[Case],
    health: GuardHealth,
    *,
    endpoint: str,
    now_ms: int,
    since_ms: int | None,
) -> Message:
    """The digest: alarms first, then the inventory (per verdict, layout and pattern, an age
    histogram, the oldest locks), the cases since `since_ms` (the last digest; None: the first)
    and what became of them, silence watches, and lockguard's own health."""
    inv = inventory(last_scan)
    top = head_blocks(
        inv, health, endpoint=endpoint, now_ms=now_ms, title=f"lockguard digest: {endpoint}"
    )
    bottom = health_blocks(health, now_ms=now_ms)
    rank = {state: i for i, state in enumerate(_ATTENTION)}
    recent = sorted(
        _since(cases, since_ms),
        key=lambda c: (rank.get(c.effective_state(now_ms), len(rank)), -c.created_ms),
    )
    cases_title = _cases_title(recent, inv, since_ms, now_ms)
    items = [  # each weight is its share of the room against the others
        Listing(
            "*Oldest locks* at the last scan, healthy ones included (an ageing healthy lock "
            "is the early warning)",
            oldest_lines(inv) if inv is not None else [],
            "lock",
            weight=5,
            empty="*Oldest locks*: none, no locks were seen." if inv else "",
        ),
        Listing(
            "*Silence watches*",
            watch_lines(health.watches),
            "watch",
            "watches",
            "`/lockguard status`",
            weight=2,
            empty="No silence watches configured (`LOCKGUARD_WATCHES`).",
        ),
        Listing(
            cases_title,
            [_case_line(c, now_ms) for c in recent[:200]],
            "case",
            hint="`/lockguard cases`",
            weight=3,
            total=len(recent),
            empty=cases_title,
        ),
        Listing("*Keys per pattern*", pattern_lines(inv) if inv is not None else [], "pattern"),
    ]
    room = BUDGET - limits.blocks_size(top + bottom) - 4 * limits.blocks_size([divider()]) - 8
    oldest, watch_list, case_list, patterns = fit(
        items, budget=room, max_blocks=limits.MESSAGE_BLOCKS - len(top) - len(bottom) - 4
    )
    body: list[Block] = []
    for blocks in (oldest, patterns, case_list, watch_list):
        if blocks:
            body += [divider(), *blocks]
    text = (
        f"lockguard has not completed a scan on {endpoint}"
        if inv is None
        else f"lockguard digest for {endpoint}: {count(inv.locks, 'lock')}, {inv.flagged:,} "
        f"flagged, oldest held {duration(inv.oldest_held)}"
    )
    if inv is not None and health.overdue:
        text += "; scans are overdue"
    text += f"; {count(len(recent), 'case')} " + (
        "since the last digest" if since_ms else "in the retention period"
    )
    return message(text, top + body + bottom)
