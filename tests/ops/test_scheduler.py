"""The scheduler (`bot.ops.scheduler`): one active replica runs each tick; a dead leader is replaced
within one lease; a release cut short by SIGKILL is finished by one replica, once, within
seconds of the kill."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis

from bot.cases.approval import ApprovalReport
from bot.cases.case import Case, State
from bot.cases.reclaim_config import ReclaimConfig
from bot.cases.release_lease import HELD, LAPSED, NEVER, ReleaseBusyError
from bot.core.errors import RedisUnavailableError, ScanBusyError
from bot.core.rules import Policy
from bot.engine import Engine
from bot.ops.leader import Leader
from bot.ops.resumer import Resumer, unfinished
from bot.ops.scheduler import Scheduler, shared_scheduler
from bot.ops.schedules import parse_schedule
from bot.ops.shards import Shards
from bot.scan.result import ScanOptions, ScanResult
from tests.cases.test_reclaim import Listener
from tests.conftest import RedisServer
from tests.core.test_layouts import uuid1_hex
from tests.killed_approver import kill_mid_release
from tests.ops.test_ops_replicas import plant_jobs

POLICY = Policy(stale_threshold_ms=1_000)
OPTS = ScanOptions(patterns=[b"lock:*"], policy=POLICY)
LIVE = ReclaimConfig(dry_run=False, policy=POLICY)
LEASE_MS = 2_000
EVERY_1S = parse_schedule("every 1s")
OFF = parse_schedule("off")


@dataclass
class Replica:
    """One `serve` process's scheduling half over one Redis: its Engine, its lease kept by the
    heartbeat (a fleet of one), its Scheduler on its own APScheduler, and what its callbacks
    saw (monotonic time, what)."""

    name: str
    scheduler: Scheduler
    shards: Shards
    scans: list[tuple[float, ScanResult, Case | None]] = field(default_factory=list)
    errors: list[tuple[str, BaseException]] = field(default_factory=list)
    resumed: list[ApprovalReport] = field(default_factory=list)
    digests: list[float] = field(default_factory=list)

    @property
    def leader(self) -> Leader:
        return self.scheduler.leader

    def start(self) -> None:
        """As `serve` starts them: the jobs, their APScheduler, the heartbeat."""
        self.scheduler.start()
        self.scheduler.aps.start()
        self.shards.start()

    def stop(self, *, release: bool = True) -> None:
        """As `serve` stops them: the jobs (running ones finish), then the lease."""
        self.scheduler.stop()
        if self.scheduler.aps.running:
            self.scheduler.aps.shutdown(wait=True)
        self.shards.stop(release=release)


@pytest.fixture
def replicas(
    redis_server: RedisServer, real_redis: redis.Redis
) -> Iterator[Callable[..., Replica]]:
    made: list[Replica] = []

    def make(name: str, scan: Any = EVERY_1S, **kwargs: Any) -> Replica:
        client = redis_server.client()
        engine = Engine(client, OPTS, LIVE, endpoint="test")
        leader = Leader(client, lease_ms=LEASE_MS, replica=name)
        shards = Shards({"default": leader}, lease_ms=LEASE_MS, replica=name)
        box: list[Replica] = []
        sched = Scheduler(
            engine,
            leader,
            scan,
            OFF,
            lambda res, case: box[0].scans.append((time.monotonic(), res, case)),
            lambda: box[0].digests.append(time.monotonic()),
            lambda trig, exc: box[0].errors.append((trig, exc)),
            on_resumed=lambda rep: box[0].resumed.append(rep),
            aps=shared_scheduler(4),
            name="default",
            **kwargs,
        )
        box.append(Replica(name, sched, shards))
        made.append(box[0])
        return box[0]

    yield make
    for rep in made:
        rep.stop(release=False)
        rep.scheduler.engine.client.close()


def wait_for(condition: Callable[[], object], timeout: float) -> float:
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout, "condition not met in time"
        time.sleep(0.01)
    return time.monotonic() - start


def resume_passes(rep: Replica, monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """How many resume passes `rep`'s scheduler has finished from now on (each pass looks up
    `resumer.run` anew)."""
    resumer = rep.scheduler.resumer
    run = resumer.run
    finished: list[None] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        try:
            return run(*args, **kwargs)
        finally:
            finished.append(None)

    monkeypatch.setattr(resumer, "run", counted)
    return lambda: len(finished)


def scan_entries(r: redis.Redis) -> int:
    return sum(1 for _, fields in r.xrange(b"{lockguard}:audit") if fields[b"event"] == b"scan")


# -- one active replica -------------------------------------------------------------------------


@pytest.mark.real
def test_two_replicas_run_each_tick_once_not_twice(
    replicas: Callable[..., Replica], real_redis: redis.Redis
) -> None:
    a, b = replicas("a", resume_every_s=60), replicas("b", resume_every_s=60)
    started = time.monotonic()
    a.start()
    b.start()
    # Three ticks ran (waited for, not counted over a fixed sleep: a busy machine runs fewer).
    wait_for(lambda: len(a.scans) + len(b.scans) >= 3, 15)
    a.stop()
    b.stop()
    took = time.monotonic() - started
    total = len(a.scans) + len(b.scans)
    assert total <= took + 1, (len(a.scans), len(b.scans), took)  # one a second, not two
    assert min(len(a.scans), len(b.scans)) == 0  # all on one replica
    assert scan_entries(real_redis) == total  # and recorded once each
    assert not a.errors
    assert not b.errors
    assert all(res.server_time_ms for _, res, _ in a.scans + b.scans)


@pytest.mark.real
def test_when_the_leader_dies_the_other_runs_the_next_ticks_within_one_lease(
    replicas: Callable[..., Replica], real_redis: redis.Redis
) -> None:
    a, b = replicas("a", resume_every_s=60), replicas("b", resume_every_s=60)
    a.start()
    b.start()
    wait_for(lambda: a.scans or b.scans, 2.5)
    dead, other = (a, b) if a.scans else (b, a)
    assert dead.scheduler.is_leader
    assert not other.scheduler.is_leader
    killed = time.monotonic()
    dead.shards.stop(release=False)  # as SIGKILL would: no release, the heartbeat just stops
    took_over = wait_for(lambda: other.scheduler.is_leader, LEASE_MS / 1000 + 1.0)
    assert took_over <= LEASE_MS / 1000 + 0.25  # one lease; the slack is the machine's, as above
    wait_for(lambda: len(other.scans) >= 2, 2.5)
    first_other = other.scans[0][0]
    assert first_other - killed <= LEASE_MS / 1000 + 1.0 + 0.3  # the lease, then the next tick
    # The dead one stopped before its lease could lapse: no tick ran on both.
    last_dead = dead.scans[-1][0]
    assert last_dead < first_other
    assert last_dead - killed <= (LEASE_MS - dead.leader.margin_ms) / 1000
    assert not dead.scheduler.is_leader
    assert scan_entries(real_redis) == len(dead.scans) + len(other.scans)


# -- resume after a SIGKILL mid-release --------------------------------------------------------


@pytest.mark.real
def test_a_release_cut_short_by_sigkill_is_finished_by_the_leader_once(
    replicas: Callable[..., Replica],
    real_redis: redis.Redis,
    redis_server: RedisServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    n = 3_000
    old = uuid1_hex(int(real_redis.time()[0]) * 1000 - 7_200_000)  # past 900 s on first sight
    with real_redis.pipeline(transaction=False) as pipe:
        for i in range(n):
            pipe.set(f"lock:job:{i}".encode(), old[:-6] + f"{i:06x}".encode())
        pipe.execute()
    _, case = Engine(real_redis, OPTS, LIVE).scan("cli", keep=10)
    assert case is not None
    assert case.lock_count == n
    listener = Listener(real_redis)
    env = {
        **os.environ,
        "REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0",
        "LOCKGUARD_DRY_RUN": "false",
    }
    kill_mid_release(real_redis, case.id, env, lock_count=n)
    # Two replicas start; the killed approver's release lease lapses within 5 s of the kill, and
    # the next pass of either replica finishes the case.
    a = replicas("a", scan=OFF, resume_every_s=1, resume_stall_s=0.3)
    b = replicas("b", scan=OFF, resume_every_s=1, resume_stall_s=0.3)
    a.start()
    b.start()
    wait_for(lambda: a.resumed or b.resumed, 8.0)
    events = listener.rest()
    assert len(a.resumed) + len(b.resumed) == 1
    report = (a.resumed or b.resumed)[0]
    assert report.counts == {"released": n}  # those done before kept as they were
    assert report.case.state is State.RELEASED
    assert report.case.decided_by == "ann"
    assert len(events) == n  # the killed approver's and the resume's, together...
    assert len({e["key_hex"] for e in events}) == n  # ...exactly one for each lock
    assert not any(real_redis.exists(f"lock:job:{i}") for i in range(0, n, 97))
    # Nothing is resumed again, by either replica: two more passes finished on each (the
    # first may have been under way already; one of the leader's is called here).
    passes = [resume_passes(rep, monkeypatch) for rep in (a, b)]
    (a if a.resumed else b).scheduler.resume_unfinished()
    wait_for(lambda: all(n() >= 2 for n in passes), 10.0)
    assert listener.rest() == []
    assert len(a.resumed) + len(b.resumed) == 1
    assert not a.errors
    assert not b.errors
    decisions = [
        (f[b"actor"], json.loads(f[b"data"])["decision"])
        for _, f in real_redis.xrange(b"{lockguard}:audit")
        if f[b"event"] == b"decision" and f[b"case_id"] == case.id.encode()
    ]
    assert decisions == [(b"ann", "approved"), (b"ann", "resumed")]  # as its approver, once


@pytest.mark.real
def test_survivors_finish_a_release_whose_approver_was_sigkilled_within_seconds(
    replicas: Callable[..., Replica], real_redis: redis.Redis, redis_server: RedisServer
) -> None:
    """Two replicas with the default resume timings are running when the approver is killed:
    its release lease lapses within 5 s and one of them finishes the case at once, with no
    stall window and no leader lease to wait out. Target: all locks released within 15 s."""
    n = 3_000
    plant_jobs(real_redis, n)
    _, case = Engine(real_redis, OPTS, LIVE).scan("cli", keep=10)
    assert case is not None
    listener = Listener(real_redis)
    a, b = replicas("a", scan=OFF), replicas("b", scan=OFF)
    a.start()
    b.start()
    env = {
        **os.environ,
        "REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0",
        "LOCKGUARD_DRY_RUN": "false",
    }
    kill_mid_release(real_redis, case.id, env, lock_count=n)
    killed = time.monotonic()
    took = wait_for(lambda: not any(real_redis.exists(f"lock:job:{i}") for i in range(n)), 20.0)
    print(f"all {n} locks released {took:.1f} s after the approver was killed")
    assert took < 20.0  # the target is 15 s: a lapsed 5 s lease, then a 2 s pass
    wait_for(lambda: a.resumed or b.resumed, 5.0)
    events = listener.rest()
    assert len(a.resumed) + len(b.resumed) == 1
    report = (a.resumed or b.resumed)[0]
    assert report.case.state is State.RELEASED
    assert report.counts == {"released": n}
    assert len(events) == n
    assert len({e["key_hex"] for e in events}) == n  # exactly one event for each lock
    assert time.monotonic() - killed < 25
    assert not a.errors
    assert not b.errors


# -- the resumer's rules, on a stand-in engine ------------------------------------------------


def a_case(
    case_id: str, state: State, *, lock_count: int = 10, dry_run: bool = False, **counts: int
) -> Case:
    return Case(
        id=case_id,
        state=state,
        created_ms=1,
        expires_ms=2,
        locks=(),
        lock_count=lock_count,
        decided_by="ann",
        decided_ms=5,
        outcome_counts=dict(counts),
        dry_run=dry_run,
    )


class StandIn:
    """The part of Engine the scheduler uses: scan, cases, approve, config."""

    def __init__(self, cases: list[Case] | None = None, dry_run: bool = False) -> None:
        self.config = ReclaimConfig(dry_run=dry_run)
        self.listed = list(cases or [])
        self.approved: list[tuple[str, str, bool]] = []
        self.fail_approve: BaseException | None = None
        self.scan_error: BaseException | None = None
        self.scanned = 0
        self.leases: dict[str, str] = {}  # case id -> HELD or LAPSED (else NEVER)

    def cases(self, limit: int = 20) -> list[Case]:
        return self.listed[:limit]

    def release_leases(self, case_ids: list[str]) -> dict[str, str]:
        return {i: self.leases.get(i, NEVER) for i in case_ids}

    def case(self, case_id: str) -> Case:
        return next(c for c in self.listed if c.id == case_id)

    def approve(self, case_id: str, actor: str, *, resume: bool = False) -> ApprovalReport:
        self.approved.append((case_id, actor, resume))
        if self.fail_approve is not None:
            raise self.fail_approve
        done = a_case(case_id, State.RELEASED, released=10)
        self.listed = [done if c.id == case_id else c for c in self.listed]
        return ApprovalReport(done, (), False, {"released": 10})

    def scan(self, trigger: str = "cli", keep: int = 50) -> tuple[ScanResult, Case | None]:
        assert trigger == "schedule"
        self.scanned += 1
        if self.scan_error is not None:
            raise self.scan_error
        return ScanResult(scanned=3), None


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_what_counts_as_unfinished() -> None:
    assert unfinished(a_case("A", State.APPROVED, released=3))
    assert unfinished(a_case("B", State.APPROVED))
    assert not unfinished(a_case("C", State.APPROVED, dry_run=True, dry_run_=10))
    assert unfinished(a_case("D", State.INCOMPLETE, released=7, error=1))  # 2 never recorded
    assert not unfinished(a_case("E", State.INCOMPLETE, released=9, error=1))  # a person's call
    for state in (State.PENDING, State.OPENING, State.RELEASED, State.REJECTED, State.EXPIRED):
        assert not unfinished(a_case("F", state))


def test_a_release_still_making_progress_is_left_alone() -> None:
    clock = Clock()
    engine = StandIn([a_case("LIVE", State.APPROVED, released=1)])
    resumer = Resumer(engine, stall_s=60, clock=clock)  # type: ignore[arg-type]
    for step in range(2, 10):  # a live approver records outcomes as it goes
        assert resumer.due() == []
        clock.now += 30
        engine.listed = [a_case("LIVE", State.APPROVED, released=step)]
    assert resumer.due() == []  # just changed
    clock.now += 59
    assert resumer.due() == []
    clock.now += 1  # no progress for the whole stall window: cut short
    assert [c.id for c in resumer.due()] == ["LIVE"]


def test_a_leased_release_is_left_alone_and_resumed_as_soon_as_its_lease_lapses() -> None:
    clock = Clock()
    engine = StandIn([a_case("A", State.APPROVED, released=1)])
    engine.leases["A"] = HELD  # its approver renews the lease: alive, however slow
    resumer = Resumer(engine, stall_s=60, clock=clock)  # type: ignore[arg-type]
    for _ in range(5):
        assert resumer.due() == []
        clock.now += 120
    engine.leases["A"] = LAPSED  # killed: the lease lapsed, the case still approved
    assert [c.id for c in resumer.due()] == ["A"]  # at once: no stall window to wait out


def test_a_resume_another_replica_took_up_is_skipped_quietly_and_a_failed_one_waits() -> None:
    clock = Clock()
    engine = StandIn([a_case("A", State.APPROVED, released=4)])
    engine.leases["A"] = LAPSED
    resumer = Resumer(engine, stall_s=5, attempts=3, clock=clock)  # type: ignore[arg-type]
    errors: list[tuple[str, BaseException]] = []
    engine.fail_approve = ReleaseBusyError("case A is being released by b:2 right now")
    for _ in range(5):
        assert resumer.run(lambda: True, None, lambda t, e: errors.append((t, e))) == []
    assert errors == []  # not an error, and not counted as an attempt
    engine.fail_approve = RedisUnavailableError("Redis at test is unreachable")
    resumer.run(lambda: True, None, lambda t, e: errors.append((t, e)))
    assert len(errors) == 1
    clock.now += 4.9
    resumer.run(lambda: True, None, lambda t, e: errors.append((t, e)))
    assert len(errors) == 1  # not again before the stall window
    clock.now += 0.2
    engine.fail_approve = None
    assert [r.case.id for r in resumer.run(lambda: True, None, errors.append)] == ["A"]


def test_resume_pass_finishes_each_stalled_case_once_as_its_approver() -> None:
    clock = Clock()
    engine = StandIn(
        [
            a_case("A", State.APPROVED, released=4),
            a_case("B", State.INCOMPLETE, released=5),
            a_case("C", State.INCOMPLETE, released=9, error=1),
            a_case("D", State.APPROVED, dry_run=True),
            a_case("E", State.PENDING),
        ]
    )
    resumer = Resumer(engine, stall_s=1, clock=clock)  # type: ignore[arg-type]
    reports: list[ApprovalReport] = []
    errors: list[tuple[str, BaseException]] = []
    assert resumer.run(lambda: True, reports.append, lambda t, e: errors.append((t, e))) == []
    clock.now += 1
    done = resumer.run(lambda: True, reports.append, lambda t, e: errors.append((t, e)))
    assert [r.case.id for r in done] == ["A", "B"]
    assert reports == done
    assert engine.approved == [("A", "ann", True), ("B", "ann", True)]
    clock.now += 10
    assert resumer.run(lambda: True, reports.append, lambda t, e: errors.append((t, e))) == []
    assert len(engine.approved) == 2
    assert errors == []


def test_a_resume_that_keeps_failing_is_left_to_a_person() -> None:
    clock = Clock()
    engine = StandIn([a_case("A", State.APPROVED, released=4)])
    engine.fail_approve = RedisUnavailableError("Redis at test is unreachable")
    resumer = Resumer(engine, stall_s=1, attempts=3, clock=clock)  # type: ignore[arg-type]
    errors: list[tuple[str, BaseException]] = []
    for _ in range(10):
        resumer.run(lambda: True, None, lambda t, e: errors.append((t, e)))
        clock.now += 2
    assert len(engine.approved) == 3
    assert [t for t, _ in errors] == ["resume"] * 3


def test_nothing_is_resumed_in_dry_run_or_after_leadership_is_lost() -> None:
    clock = Clock()
    engine = StandIn([a_case("A", State.APPROVED)], dry_run=True)
    resumer = Resumer(engine, stall_s=0, clock=clock)  # type: ignore[arg-type]
    for _ in range(3):
        assert resumer.run(lambda: True, None, lambda t, e: None) == []
    engine = StandIn([a_case("A", State.APPROVED)])
    resumer = Resumer(engine, stall_s=0, clock=clock)  # type: ignore[arg-type]
    resumer.due()
    assert resumer.run(lambda: False, None, lambda t, e: None) == []
    assert engine.approved == []


# -- the jobs, on a stand-in leader -----------------------------------------------------------


class FixedLeader:
    replica = "here:1"
    margin_ms = 400

    def __init__(self, leading: bool) -> None:
        self.leading = leading
        self.listeners: list[Callable[[bool], None]] = []

    def is_leader(self) -> bool:
        return self.leading

    def on_change(self, listener: Callable[[bool], None]) -> None:
        self.listeners.append(listener)


def stand_in_scheduler(
    leading: bool, engine: StandIn | None = None, **kwargs: Any
) -> tuple[Scheduler, dict[str, list[Any]]]:
    seen: dict[str, list[Any]] = {"scans": [], "errors": [], "digests": []}
    sched = Scheduler(
        engine or StandIn(),
        FixedLeader(leading),  # type: ignore[arg-type]
        parse_schedule("*/15 * * * *"),
        parse_schedule("0 9 * * *"),
        lambda res, case: seen["scans"].append((res, case)),
        lambda: seen["digests"].append(1),
        lambda trig, exc: seen["errors"].append((trig, exc)),
        aps=shared_scheduler(2),
        name="default",
        **kwargs,
    )
    return sched, seen


@contextmanager
def running(sched: Scheduler) -> Iterator[None]:
    """`sched`'s jobs on their running APScheduler, as `serve` runs them, then stopped."""
    sched.start()
    sched.aps.start()
    try:
        yield
    finally:
        sched.stop()
        sched.stop()  # twice is fine
        sched.aps.shutdown(wait=True)


def test_a_replica_that_does_not_lead_skips_every_job() -> None:
    engine = StandIn([a_case("A", State.APPROVED)])
    sched, seen = stand_in_scheduler(False, engine)
    assert not sched.is_leader
    assert not sched.run_scan()
    assert not sched.run_digest()
    assert sched.resume_unfinished() == []  # resumes run everywhere; a first sight is no stall
    assert engine.scanned == 0
    assert seen == {"scans": [], "errors": [], "digests": []}


def test_the_leader_scans_digests_and_reports_failures_by_trigger() -> None:
    engine = StandIn()
    sched, seen = stand_in_scheduler(True, engine)
    assert sched.run_scan()
    assert [(r.scanned, c) for r, c in seen["scans"]] == [(3, None)]
    assert sched.run_digest()
    assert seen["digests"] == [1]
    engine.scan_error = RedisUnavailableError("Redis at test is unreachable")
    assert not sched.run_scan()
    engine.scan_error = ScanBusyError("another lockguard scan is running")
    assert not sched.run_scan()  # another scan holds the lease: it records itself
    assert [(t, type(e)) for t, e in seen["errors"]] == [("schedule", RedisUnavailableError)]

    def broken_digest() -> None:
        raise RuntimeError("Slack is down")

    sched.on_digest = broken_digest
    assert not sched.run_digest()
    assert [t for t, _ in seen["errors"]] == ["schedule", "digest"]


def test_a_failing_callback_is_logged_not_taken_for_a_failed_scan(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine = StandIn()
    sched, seen = stand_in_scheduler(True, engine)

    def broken(res: ScanResult, case: Case | None) -> None:
        raise RuntimeError("chat.postMessage failed")

    sched.on_scan_result = broken
    assert sched.run_scan()
    assert seen["errors"] == []
    assert "scheduler_callback_failed" in caplog.text


def test_next_run_times_before_and_after_start_and_off() -> None:
    sched, _ = stand_in_scheduler(True)
    before = sched.next_run_times()
    now_ms = time.time() * 1000
    assert before["scan"] is not None
    assert 0 < before["scan"] - now_ms <= 15 * 60_000
    assert before["scan"] % (15 * 60_000) == 0
    assert before["digest"] is not None
    assert before["digest"] % 86_400_000 == 9 * 3_600_000
    with running(sched):
        assert sched.next_run_times() == before
        assert {j.id for j in sched.aps.get_jobs()} >= {"default:scan", "default:digest"}
    assert sched.aps.get_jobs() == []
    off, _ = stand_in_scheduler(True)
    off.scan_schedule = off.digest_schedule = OFF
    assert off.next_run_times() == {"scan": None, "digest": None}


def test_starting_runs_a_resume_pass_at_once_and_after_the_stall_leader_or_not() -> None:
    clock = Clock()
    engine = StandIn([a_case("A", State.APPROVED, released=4)])
    resumed: list[ApprovalReport] = []
    sched, seen = stand_in_scheduler(
        False,
        engine,
        on_resumed=resumed.append,
        resume_every_s=600,
        resume_stall_s=0.2,
        clock=clock,
    )
    passes = threading.Event()
    real_run = sched.resumer.run

    def counted(*args: Any) -> list[ApprovalReport]:
        out = real_run(*args)
        clock.now += 0.2  # the stand-in clock moves one stall window per pass
        passes.set()
        return out

    sched.resumer.run = counted  # type: ignore[method-assign]
    with running(sched):  # not the leader: the release lease, not the leader's, decides
        wait_for(lambda: resumed, 2.0)
    assert [r.case.id for r in resumed] == ["A"]
    assert engine.approved == [("A", "ann", True)]
    assert seen["errors"] == []


def test_a_one_shot_job_finishing_during_shutdown_does_not_kill_the_scheduler_thread() -> None:
    """APScheduler's shutdown marks itself stopped before it takes the job-store lock; the
    thread then removing a finished one-shot job must not die of JobLookupError."""
    from apscheduler.jobstores.base import JobLookupError  # type: ignore[import-untyped]

    from bot.ops.scheduler import _background_scheduler

    aps = _background_scheduler(timezone="UTC")
    aps.start()
    with pytest.raises(JobLookupError):
        aps.remove_job("no-such-job")  # running: a wrong id is still an error
    aps.shutdown(wait=True)
    aps.remove_job("resume-now")  # stopped: nothing to remove, and no error


def test_apschedulers_own_info_lines_are_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO")
    sched, _ = stand_in_scheduler(True)
    with running(sched):
        pass
    assert "Adding job tentatively" not in caplog.text
    assert "Scheduler started" not in caplog.text
