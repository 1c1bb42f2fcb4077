"""Plant BullMQ's real key set for one queue on a Redis client, and say which keys are locks.

Test support only. Every key is written with the Redis command, type, TTL and value shape that
BullMQ's own Lua scripts / TypeScript use; the code here is an independent Python re-statement of
what those scripts do (nothing is copied). Source read: github.com/taskforcesh/bullmq at commit
352d3c72bf2b (2026-08-21, package version 6.2.0, `src/version.ts`). Paths below are in that repo;
bare ``*.lua`` names are in `src/commands/`, ``includes/*`` in `src/commands/includes/`.

Key names: Q = ``<prefix>:<queue>`` (default prefix ``bull``), queue keys ``Q:<type>``
(`src/classes/queue-keys.ts`, ``getKeys``/``toKey``); a job hash is ``Q:<jobId>``.

Key set -- pattern: type, TTL; where the shape comes from

* ``Q:<jobId>:lock`` -- **LOCK**: string ``<worker uuid v4>:<n>``, PX lockDuration (30000).
  includes/prepareJobForProcessing.lua (``SET lockKey token PX lockDuration``); renewal
  extendLocks-1.lua / extendLock-2.lua (``SET ... PX``, SREM stalled) driven by
  `src/classes/lock-manager.ts`; token ``${this.id}:${tokenPostfix++}``, ``this.id =
  randomUUID()``, defaults lockDuration 30000, lockRenewTime lockDuration/2 (`worker.ts`);
  deleted by includes/removeLock.lua when the job finishes.
* ``Q:<jobId>`` -- hash, no TTL. includes/storeJob.lua (HMSET name, data, opts, timestamp, delay,
  priority [, parentKey, parent, rjk, deid]); includes/prepareJobForProcessing.lua (processedOn,
  HINCRBY ats); moveToFinished-14.lua (HINCRBY atm, returnvalue | failedReason, finishedOn);
  stacktrace via fieldsToUpdate (`job.ts`) / saveStacktrace-1.lua.
* ``Q:<jobId>:logs`` -- list, no TTL. addLog-2.lua (RPUSH, LTRIM with keepLogs); key name in
  `src/classes/redis-queue-backend.ts` ``addLog``.
* ``Q:wait`` -- list. includes/addJobInTargetList.lua (LPUSH; RPUSH when lifo).
* ``Q:active`` -- list. moveToActive-11.lua (RPOPLPUSH wait active),
  includes/moveJobFromPrioritizedToActive.lua (ZPOPMIN prioritized, LPUSH active).
* ``Q:delayed`` -- zset. includes/addDelayedJob.lua, includes/getDelayedScore.lua
  (score (timestamp + delay) * 0x1000 [+ n]).
* ``Q:prioritized`` -- zset; ``Q:pc`` -- string counter, no TTL. includes/addJobWithPriority.lua,
  includes/getPriorityScore.lua (score priority * 2^32 + INCR pc).
* ``Q:id`` -- string counter, no TTL. addStandardJob-9.lua, addDelayedJob-6.lua,
  addPrioritizedJob-9.lua, addParentJob-6.lua (INCR for every added job, custom ids too),
  addJobScheduler-11.lua / updateJobScheduler-12.lua.
* ``Q:completed``, ``Q:failed`` -- zsets (score finishedOn). moveToFinished-14.lua.
* ``Q:waiting-children`` -- zset (score timestamp). addParentJob-6.lua.
* ``Q:meta`` -- hash, no TTL. `src/classes/queue.ts` ``metaValues`` -> HSET
  ``opts.maxLenEvents`` (10000) and ``version`` (``bullmq:<version>``);
  includes/getOrSetMaxEvents.lua.
* ``Q:events`` -- stream, no TTL. XADD ``MAXLEN ~ maxEvents`` for waiting / delayed /
  waiting-children (addStandardJob-9.lua, includes/addDelayedJob.lua, addParentJob-6.lua), plain
  XADD for added / active / completed / failed / retries-exhausted / drained
  (includes/storeJob.lua, includes/prepareJobForProcessing.lua, moveToFinished-14.lua); XTRIM in
  includes/trimEvents.lua.
* ``Q:marker`` -- zset. includes/addBaseMarkerIfNeeded.lua (ZADD 0 "0"),
  includes/addDelayMarkerIfNeeded.lua (ZADD <next delayed ms> "1").
* ``Q:stalled`` -- set. moveStalledJobsToWait-9.lua (SADD every active id, the mark phase);
  SREM on each lock renewal (extendLocks-1.lua) and in includes/removeLock.lua.
* ``Q:stalled-check`` -- string (a ms timestamp), PX stalledInterval (30000).
  moveStalledJobsToWait-9.lua ``SET stalled-check ts PX ARGV[4]``, where ARGV[4] is
  opts.stalledInterval (`redis-queue-backend.ts` ``moveStalledJobsToWaitArgs``).
* ``Q:limiter`` -- string counter, PEXPIRE limiter.duration. includes/prepareJobForProcessing.lua
  (INCR; PEXPIRE when the counter is 1); only with a rate limit (WorkerOptions.limiter or meta
  max/duration). Queue.rateLimit(ms) instead does ``SET limiter 9007199254740991 PX ms``
  (``setRateLimit`` in `redis-queue-backend.ts`); that variant is not planted.
* ``Q:de:<deduplicationId>`` -- string (the job id), PX ttl when opts.de.ttl > 0, else no TTL
  (removed when that job completes/fails). includes/setDeduplicationKey.lua,
  includes/deduplicateJobWithoutReplace.lua (``SET key jobId [PX ttl] NX``); key
  ``${keys.de}:${deduplicationId}`` (`redis-queue-backend.ts`); the job hash gets ``deid``.
* ``Q:repeat`` -- zset (scheduler id scored by next millis); ``Q:repeat:<schedulerId>`` -- hash
  (name, startDate, every, offset, data, ic). includes/storeJobScheduler.lua.
* ``Q:repeat:<schedulerId>:<millis>`` -- hash: the scheduler's next (delayed) job, job id
  ``repeat:<schedulerId>:<millis>``, field ``rjk``. addJobScheduler-11.lua,
  includes/addJobFromScheduler.lua, includes/storeAndEnqueueJob.lua.
* ``Q:<parentId>:dependencies`` -- set of pending child job KEYS. SADD in addStandardJob-9.lua
  etc.; key built in `src/classes/flow-producer.ts`.
* ``Q:<parentId>:processed`` -- hash child key -> returnvalue.
  includes/updateParentDepsIfNeeded.lua.
* ``Q:<parentId>:failed`` -- hash child key -> failedReason (ignoreDependencyOnFailure /
  continueParentOnFailure); ``Q:<parentId>:unsuccessful`` -- zset of child keys
  (failParentOnFailure). includes/moveChildFromDependenciesIfNeeded.lua.
* ``Q:metrics:completed`` / ``Q:metrics:failed`` -- hash (count, prevTS, prevCount) and
  ``...:data`` -- list of per-minute deltas (LPUSH, LTRIM maxDataPoints).
  includes/collectMetrics.lua; key names in `redis-queue-backend.ts` ``moveToFinishedArgs``; only
  with WorkerOptions.metrics.maxDataPoints.

Flow job ids are ``randomUUID()`` (`flow-producer.ts` addNode), so some job hashes, one active job
and its lock use a UUID job id; the job scheduler's job id contains colons
(``repeat:<sid>:<millis>``). Only ``Q:<jobId>:lock`` strings are locks. Lookalikes that are NOT
locks but carry a PX TTL: ``Q:stalled-check``, ``Q:limiter``, ``Q:de:<id>`` (ttl mode).

What I could not confirm / simplified:

* The exact JSON inside the ``opts`` field: BullMQ msgpacks the JS options (short names from
  ``optsEncodeMap`` in `src/utils/index.ts`: de, fpof, cpof, idof, kl, rdof) and Lua re-encodes
  them with cjson, whose key order is not defined. Here: compact ``json.dumps``, a plausible order.
  The scheduler job's opts (repeat/jobId/delay/timestamp/prevMillis, from `job-scheduler.ts`
  getNextJobOpts) are approximate.
* The simulated history (ids, timestamps, which job went where) is one state BullMQ can reach,
  derived by replaying the scripts' effects in order; it is not captured from a running BullMQ.
  Metrics values come from replaying `collectMetrics.lua` over that history.
* TTLs are set relative to the server's clock as if each key had been written at its simulated
  time (e.g. a dedup key written 8 s ago with ttl 600000 gets PX 592000; a live lock gets the PX
  left since its last renewal, always in (lockDuration - lockRenewTime, lockDuration]).
* `lock-layouts.md` §7 says the stalled-check PX is "maxCheckTime"; the script's ARGV[4] is named
  so, but the caller passes ``opts.stalledInterval`` (30000 by default), which is what is used here.
* Not planted: legacy (pre job-scheduler) repeatable jobs, ``Q:paused`` (only while paused), the
  ``pb`` job field (processedBy, only with a named worker), the ``stc`` field and ``stalled``
  event (only after a stalled job was recovered), ``Q:<parentId>:dependencies`` of a parent whose
  children all finished (SREM leaves an empty set, i.e. no key).
* The ~15 s renewal floor comes from reading `lock-manager.ts` (timer every lockRenewTime/2,
  extends locks older than lockRenewTime/2); event-loop stalls can push a live lock lower.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

import redis

LOCK = "lock"
NOT_A_LOCK = "not_a_lock"

BULLMQ_VERSION = "6.2.0"  # src/version.ts
LOCK_DURATION_MS = 30_000  # worker.ts default lockDuration
LOCK_RENEW_TIME_MS = LOCK_DURATION_MS // 2  # worker.ts: lockRenewTime = lockDuration / 2
STALLED_INTERVAL_MS = 30_000  # worker.ts default stalledInterval
MAX_STALLED_COUNT = 1  # worker.ts default maxStalledCount
MAX_LEN_EVENTS = 10_000  # queue.ts metaValues / getOrSetMaxEvents.lua default
LIMITER = {"max": 100, "duration": 60_000}  # a worker rate limit (WorkerOptions.limiter)
METRICS_MAX_DATA_POINTS = 10_080  # MetricsTime.ONE_WEEK, a common maxDataPoints
_MINUTE = 60_000


def new_worker_id() -> str:
    """A BullMQ worker id: ``randomUUID()`` (worker.ts). Lock values are ``<id>:<n>``."""
    return str(uuid.uuid4())


def _b(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def _js(value: Any) -> str:
    """JSON.stringify-like compact JSON."""
    return json.dumps(value, separators=(",", ":"))


class _Queue:
    """Replays the effects of BullMQ's scripts for one queue, with redis-py commands."""

    def __init__(
        self,
        client: redis.Redis,
        prefix: bytes | str,
        queue: bytes | str,
        worker_id: str,
        *,
        limiter: bool = True,
    ) -> None:
        self.r = client
        self.base = _b(prefix) + b":" + _b(queue)  # queue.qualifiedName, e.g. b"bull:emails"
        self.worker_id = worker_id
        self.token_postfix = 0
        self.touched: dict[bytes, str] = {}
        sec, usec = client.time()
        self.now = sec * 1000 + usec // 1000  # server clock, ms
        self.limiter = limiter  # does the worker have opts.limiter?
        self.limiter_window: tuple[int, int] | None = None  # (started_at, count)

    # ---- key names -----------------------------------------------------------------------
    def key(self, kind: str) -> bytes:
        k = self.base + b":" + kind.encode()
        self.touched.setdefault(k, NOT_A_LOCK)
        return k

    def job_key(self, job_id: str, suffix: str = "") -> bytes:
        return self.key(job_id + suffix)

    def job_key_str(self, job_id: str) -> str:
        return (self.base + b":" + job_id.encode()).decode()

    def lock_key(self, job_id: str) -> bytes:
        k = self.base + b":" + job_id.encode() + b":lock"
        self.touched[k] = LOCK
        return k

    def result(self) -> dict[bytes, str]:
        """Touched keys that exist now (sets emptied by SREM, etc. are gone in Redis too)."""
        pipe = self.r.pipeline(transaction=False)
        keys = list(self.touched)
        for k in keys:
            pipe.exists(k)
        return {k: self.touched[k] for k, n in zip(keys, pipe.execute(), strict=True) if n}

    # ---- queue-level ---------------------------------------------------------------------
    def init_meta(self) -> None:
        """Queue constructor: HSET meta metaValues (queue.ts, redis-queue-backend setQueueMeta)."""
        self.r.hset(
            self.key("meta"),
            mapping={"opts.maxLenEvents": MAX_LEN_EVENTS, "version": f"bullmq:{BULLMQ_VERSION}"},
        )

    def max_events(self) -> int:
        """getOrSetMaxEvents.lua."""
        meta = self.key("meta")
        value = self.r.hget(meta, "opts.maxLenEvents")
        if value is None:
            self.r.hset(meta, "opts.maxLenEvents", MAX_LEN_EVENTS)
            return MAX_LEN_EVENTS
        return int(value)

    def event(self, fields: Mapping[str, Any], *, trimmed: bool = False) -> None:
        events = self.key("events")
        if trimmed:  # XADD events MAXLEN ~ maxEvents * ...
            self.r.xadd(events, dict(fields), maxlen=self.max_events(), approximate=True)
        else:  # XADD events * ...
            self.r.xadd(events, dict(fields))

    def trim_events(self) -> None:
        """trimEvents.lua: XTRIM events MAXLEN ~ maxEvents."""
        self.r.xtrim(self.key("events"), maxlen=self.max_events(), approximate=True)

    def base_marker(self) -> None:
        """addBaseMarkerIfNeeded.lua (queue neither paused nor maxed)."""
        self.r.zadd(self.key("marker"), {"0": 0})

    def delay_marker(self) -> None:
        """addDelayMarkerIfNeeded.lua: marker member "1" scored with the next delayed ms."""
        first = self.r.zrange(self.key("delayed"), 0, 0, withscores=True)
        if first:
            self.r.zadd(self.key("marker"), {"1": first[0][1] / 0x1000})

    def next_token(self) -> str:
        token = f"{self.worker_id}:{self.token_postfix}"
        self.token_postfix += 1
        return token

    # ---- adding jobs ---------------------------------------------------------------------
    def _new_id(self, custom_id: str | None) -> str:
        counter = self.r.incr(self.key("id"))  # INCR id happens even for custom ids
        return custom_id if custom_id is not None else str(counter)

    def store_job(
        self,
        job_id: str,
        name: str,
        data: Any,
        opts: dict[str, Any],
        ts: int,
        *,
        parent_key: str | None = None,
        parent: dict[str, Any] | None = None,
        rjk: str | None = None,
    ) -> None:
        """storeJob.lua: HMSET the job hash, XADD "added"."""
        fields: dict[str, Any] = {
            "name": name,
            "data": _js(data),
            "opts": _js(opts),
            "timestamp": ts,
            "delay": opts.get("delay", 0),
            "priority": opts.get("priority", 0),
        }
        if parent_key is not None:
            fields["parentKey"] = parent_key
            fields["parent"] = _js(parent)
        if rjk is not None:
            fields["rjk"] = rjk
        if "de" in opts:
            fields["deid"] = opts["de"]["id"]
        self.r.hset(self.job_key(job_id), mapping=fields)
        self.event({"event": "added", "jobId": job_id, "name": name})

    def dedup(self, opts: dict[str, Any], job_id: str, ts: int) -> None:
        """deduplicateJobWithoutReplace.lua / setDeduplicationKey.lua: SET de:<id> jobId [PX] NX."""
        de = opts["de"]
        key = self.key("de:" + de["id"])
        ttl = de.get("ttl")
        if ttl and ttl > 0:
            remaining = ttl - (self.now - ts)
            assert remaining > 0, "dedup key would already have expired"
            self.r.set(key, job_id, px=remaining, nx=True)
        else:
            self.r.set(key, job_id, nx=True)

    def _parent_args(self, parent_id: str | None, flags: dict[str, bool]) -> dict[str, Any]:
        if parent_id is None:
            return {}
        parent = {"id": parent_id, "queueKey": self.base.decode(), **flags}
        return {"parent_key": self.job_key_str(parent_id), "parent": parent}

    def _link_to_parent(self, job_id: str, parent_id: str | None) -> None:
        if parent_id is not None:  # SADD <parentKey>:dependencies <child job key>
            self.r.sadd(self.job_key(parent_id, ":dependencies"), self.job_key_str(job_id))

    def add_standard(
        self,
        name: str,
        data: Any,
        ts: int,
        *,
        opts: dict[str, Any] | None = None,
        custom_id: str | None = None,
        parent_id: str | None = None,
        parent_flags: dict[str, bool] | None = None,
    ) -> str:
        """addStandardJob-9.lua (FIFO: LPUSH wait; lifo: RPUSH)."""
        opts = {"attempts": 0, **(opts or {})}
        job_id = self._new_id(custom_id)
        self.max_events()
        if "de" in opts:
            self.dedup(opts, job_id, ts)
        self.store_job(
            job_id, name, data, opts, ts, **self._parent_args(parent_id, parent_flags or {})
        )
        wait = self.key("wait")
        if opts.get("lifo"):
            self.r.rpush(wait, job_id)
        else:
            self.r.lpush(wait, job_id)
        self.base_marker()
        self.event({"event": "waiting", "jobId": job_id}, trimmed=True)
        self._link_to_parent(job_id, parent_id)
        return job_id

    def add_delayed(
        self,
        name: str,
        data: Any,
        ts: int,
        delay: int,
        *,
        opts: dict[str, Any] | None = None,
        custom_id: str | None = None,
        rjk: str | None = None,
        job_key: bytes | None = None,
    ) -> str:
        """addDelayedJob-6.lua + includes/addDelayedJob.lua + getDelayedScore.lua."""
        opts = {"delay": delay, "attempts": 0, **(opts or {})}
        job_id = self._new_id(custom_id)
        self.max_events()
        if "de" in opts:
            self.dedup(opts, job_id, ts)
        self.store_job(job_id, name, data, opts, ts, rjk=rjk)
        delayed = self.key("delayed")
        delayed_ts = ts + delay
        lo, hi = delayed_ts * 0x1000, (delayed_ts + 1) * 0x1000 - 1
        top = self.r.zrevrangebyscore(delayed, hi, lo, start=0, num=1, withscores=True)
        score = lo if not top else min(int(top[0][1]) + 1, hi)
        self.r.zadd(delayed, {job_id: score})
        self.event({"event": "delayed", "jobId": job_id, "delay": delayed_ts}, trimmed=True)
        self.delay_marker()
        return job_id

    def add_prioritized(self, name: str, data: Any, ts: int, priority: int) -> str:
        """addPrioritizedJob-9.lua + addJobWithPriority.lua + getPriorityScore.lua."""
        opts = {"priority": priority, "attempts": 0}
        job_id = self._new_id(None)
        self.max_events()
        self.store_job(job_id, name, data, opts, ts)
        counter = self.r.incr(self.key("pc"))
        score = priority * 0x100000000 + counter % 0x100000000
        self.r.zadd(self.key("prioritized"), {job_id: score})
        self.base_marker()
        self.event({"event": "waiting", "jobId": job_id}, trimmed=True)
        return job_id

    def add_parent(self, name: str, data: Any, ts: int) -> str:
        """addParentJob-6.lua: job hash + ZADD waiting-children; flow ids are randomUUID()."""
        opts = {"attempts": 0}
        job_id = self._new_id(str(uuid.uuid4()))
        self.max_events()
        self.store_job(job_id, name, data, opts, ts)
        self.r.zadd(self.key("waiting-children"), {job_id: ts})
        self.event({"event": "waiting-children", "jobId": job_id}, trimmed=True)
        return job_id

    def add_child(
        self, name: str, data: Any, ts: int, parent_id: str, flags: dict[str, bool] | None = None
    ) -> str:
        """A flow child: a standard job with parentKey/parent and SADD parent:dependencies."""
        flags = flags or {}
        opts: dict[str, Any] = {"parent": {"id": parent_id, "queue": self.base.decode()}}
        opts.update(flags)  # optsEncodeMap short names (fpof, idof, ...)
        return self.add_standard(
            name,
            data,
            ts,
            opts=opts,
            custom_id=str(uuid.uuid4()),
            parent_id=parent_id,
            parent_flags=flags,
        )

    def add_scheduler(
        self, scheduler_id: str, name: str, data: Any, ts: int, every: int, start_date: int
    ) -> str:
        """addJobScheduler-11.lua with `every` + `startDate` (first job is delayed)."""
        self.max_events()
        next_millis = max(start_date, ts)  # getJobSchedulerEveryNextMillis.lua, no prevMillis
        offset = next_millis - (next_millis // every) * every
        repeat = self.key("repeat")
        scheduler_key = self.key("repeat:" + scheduler_id)
        # storeJobScheduler.lua
        self.r.zadd(repeat, {scheduler_id: next_millis})
        fields: dict[str, Any] = {
            "name": name,
            "startDate": start_date,
            "every": every,
            "offset": offset,
        }
        if data != {}:
            fields["data"] = _js(data)
        fields["ic"] = 1
        self.r.delete(scheduler_key)
        self.r.hset(scheduler_key, mapping=fields)
        job_id = f"repeat:{scheduler_id}:{next_millis}"
        delay = max(next_millis - ts, 0)
        opts = {
            "repeat": {"every": every, "startDate": start_date, "offset": offset, "count": 1},
            "jobId": job_id,
            "delay": delay,
            "timestamp": ts,
            "prevMillis": next_millis,
            "attempts": 0,
        }
        # INCR id, then addJobFromScheduler -> storeAndEnqueueJob -> addDelayedJob
        return self.add_delayed(
            name, data, ts, delay, opts=opts, custom_id=job_id, rjk=scheduler_id
        )

    # ---- processing ----------------------------------------------------------------------
    def _limiter_incr(self, ts: int) -> None:
        """prepareJobForProcessing.lua with a limiter: INCR limiter; PEXPIRE on the first."""
        duration = LIMITER["duration"]
        if self.limiter_window is None or ts >= self.limiter_window[0] + duration:
            self.limiter_window = (ts, 0)  # the previous window's key expired on its own
        started, count = self.limiter_window
        self.limiter_window = (started, count + 1)
        remaining = started + duration - self.now
        if remaining <= 0:
            return  # this window is over by now: the key is gone
        key = self.key("limiter")
        if self.r.incr(key) == 1:
            self.r.pexpire(key, remaining)

    def activate(
        self,
        job_id: str,
        ts: int,
        *,
        from_prioritized: bool = False,
        token: str | None = None,
        lock_px: int | None = None,
    ) -> str:
        """moveToActive-11.lua + prepareJobForProcessing.lua; returns the lock token."""
        active = self.key("active")
        if from_prioritized:
            popped = self.r.zpopmin(self.key("prioritized"))
            got = popped[0][0].decode() if popped else None
            if got is not None:
                self.r.lpush(active, got)
        else:
            raw = self.r.rpoplpush(self.key("wait"), active)
            got = raw.decode() if raw is not None else None
        if got != job_id:
            raise AssertionError(f"replay out of order: expected {job_id}, BullMQ takes {got}")
        if self.limiter:
            self._limiter_incr(ts)
        token = token or self.next_token()
        if lock_px is None:
            lock_px = live_lock_remaining_ms(self.now - ts)
        if lock_px > 0:
            self.r.set(self.lock_key(job_id), token, px=lock_px)
        self.event({"event": "active", "jobId": job_id, "prev": "waiting"})
        job = self.job_key(job_id)
        self.r.hset(job, "processedOn", ts)
        self.r.hincrby(job, "ats", 1)
        self.base_marker()
        return token

    def finish(
        self, job_id: str, ts: int, target: str, value: str, *, stacktrace: list[str] | None = None
    ) -> None:
        """moveToFinished-14.lua (keepJobs default: keep), incl. removeLock and collectMetrics."""
        job = self.job_key(job_id)
        lock = self.lock_key(job_id)
        self.r.delete(lock)  # removeLock.lua (token matches)
        self.r.srem(self.key("stalled"), job_id)
        if stacktrace is not None:  # fieldsToUpdate from job.moveToFailed
            self.r.hset(job, "stacktrace", _js(stacktrace))
        parent_key, parent_raw = (
            v.decode() if v is not None else None for v in self.r.hmget(job, "parentKey", "parent")
        )
        self.r.lrem(self.key("active"), -1, job_id)
        self.trim_events()
        if parent_key is not None:
            self._update_parent(
                job_id, parent_key, json.loads(parent_raw or "{}"), target, value, ts
            )
        attempts_made = self.r.hincrby(job, "atm", 1)
        self.r.zadd(self.key(target), {job_id: ts})
        prop = "returnvalue" if target == "completed" else "failedReason"
        self.r.hset(job, mapping={prop: value, "finishedOn": ts})
        if target == "failed":
            self.r.hdel(job, "defa")
        self.event({"event": target, "jobId": job_id, prop: value, "prev": "active"})
        attempts = json.loads(self.r.hget(job, "opts") or b"{}").get("attempts", 0)
        if target == "failed" and attempts_made >= attempts:
            self.event(
                {"event": "retries-exhausted", "jobId": job_id, "attemptsMade": attempts_made}
            )
        self._collect_metrics(target, ts)
        if (
            self.r.llen(self.key("wait")) == 0
            and self.r.llen(self.key("active")) == 0
            and self.r.zcard(self.key("prioritized")) == 0
        ):
            self.event({"event": "drained"})

    def _update_parent(
        self, job_id: str, parent_key: str, parent: dict[str, Any], target: str, value: str, ts: int
    ) -> None:
        """updateParentDepsIfNeeded.lua / moveChildFromDependenciesIfNeeded.lua (same queue)."""
        pk = _b(parent_key)
        parent_id = parent["id"]
        child_key = self.job_key_str(job_id)
        deps = self.job_key(parent_id, ":dependencies")
        flags = ("fpof", "cpof", "idof", "rdof")
        if target != "completed" and not any(parent.get(f) for f in flags):
            return  # a plain failed child stays in the parent's dependencies
        if not self.r.srem(deps, child_key):
            return
        if target == "completed":
            self.r.hset(self.job_key(parent_id, ":processed"), child_key, value)
        elif parent.get("fpof"):
            self.r.zadd(self.job_key(parent_id, ":unsuccessful"), {child_key: ts})
            if self.r.zrem(self.key("waiting-children"), parent_id):
                self.r.hset(pk, "defa", f"child {child_key} failed")
                self._move_parent_to_wait(parent_id)
            return
        elif parent.get("idof") or parent.get("cpof"):
            self.r.hset(self.job_key(parent_id, ":failed"), child_key, value)
        if self.r.scard(deps) == 0 and self.r.zrem(self.key("waiting-children"), parent_id):
            self._move_parent_to_wait(parent_id)

    def _move_parent_to_wait(self, parent_id: str) -> None:
        """moveParentToWait.lua (no delay, no priority): RPUSH wait, XADD waiting."""
        self.r.rpush(self.key("wait"), parent_id)
        self.base_marker()
        self.event({"event": "waiting", "jobId": parent_id, "prev": "waiting-children"})

    def _collect_metrics(self, target: str, ts: int) -> None:
        """collectMetrics.lua on Q:metrics:<target> and Q:metrics:<target>:data."""
        meta = self.key(f"metrics:{target}")
        data = self.key(f"metrics:{target}:data")
        count = self.r.hincrby(meta, "count", 1) - 1
        prev_ts = self.r.hget(meta, "prevTS")
        if prev_ts is None:
            self.r.hset(meta, mapping={"prevTS": ts, "prevCount": 0})
            return
        n = min(ts // _MINUTE - int(prev_ts) // _MINUTE, METRICS_MAX_DATA_POINTS)
        if n > 0:
            delta = count - int(self.r.hget(meta, "prevCount") or 0)
            self.r.lpush(data, delta, *([0] * (n - 1)))
            self.r.ltrim(data, 0, METRICS_MAX_DATA_POINTS - 1)
            self.r.hset(meta, mapping={"prevCount": count, "prevTS": ts})

    def stalled_check(self, ts: int) -> None:
        """moveStalledJobsToWait-9.lua as run by a worker at `ts` with nothing to recover:
        SET stalled-check ts PX stalledInterval, then SADD stalled <every active id>."""
        remaining = STALLED_INTERVAL_MS - (self.now - ts)
        assert remaining > 0
        self.r.set(self.key("stalled-check"), ts, px=remaining)
        self.trim_events()
        active = self.r.lrange(self.key("active"), 0, -1)
        if active:
            self.r.sadd(self.key("stalled"), *active)

    def log(self, job_id: str, *lines: str) -> None:
        """addLog-2.lua: RPUSH <job>:logs."""
        self.r.rpush(self.job_key(job_id, ":logs"), *lines)


def live_lock_remaining_ms(age_ms: int) -> int:
    """PTTL of a live worker's lock `age_ms` after it was taken: the LockManager renews it about
    every lockRenewTime (15 s), so the PX left stays in
    (lockDuration - lockRenewTime, lockDuration]."""
    return LOCK_DURATION_MS - (age_ms % LOCK_RENEW_TIME_MS)


def plant_bullmq(
    client: redis.Redis,
    *,
    prefix: bytes = b"bull",
    queue: bytes = b"emails",
    worker_token: str | bytes | None = None,
) -> dict[bytes, str]:
    """Plant a realistic BullMQ queue state and return ``{key: "lock" | "not_a_lock"}``.

    `worker_token` is the live worker's id (BullMQ's ``Worker.id``, a UUID v4); the lock values
    are ``<worker_token>:<n>`` with BullMQ's per-fetch postfix n. Default: a fresh UUID v4.

    State (ids are what BullMQ's INCR id gives; flow jobs use UUID ids but still INCR):
      * 1 completed, 2 failed (both "welcome");
      * flow A: parent P2 (UUID) whose child C4 (failParentOnFailure) failed -> P2 failed too,
        ``P2:unsuccessful`` zset remains;
      * flow B: parent P (UUID) in waiting-children; child C1 completed (``P:processed``), C3
        (ignoreDependencyOnFailure) failed (``P:failed``), C2 still pending (``P:dependencies``)
        and ACTIVE, holding a lock;
      * 9 active with a lock and a ``:logs`` list; 10, 11 (dedup, no TTL), 12 (dedup, TTL) waiting;
      * 13 delayed (1 h), 14 prioritized, scheduler ``hourly-digest`` with its delayed job;
      * limiter window, stalled-check, stalled set (both active ids, marked by the last check),
        marker, pc, id, meta, events, metrics.
    Exactly two keys are locks: ``Q:9:lock`` and ``Q:<C2 uuid>:lock``, each PX <= 30000.
    """
    worker_id = _b(worker_token).decode() if worker_token is not None else new_worker_id()
    q = _Queue(client, prefix, queue, worker_id)
    now = q.now
    t0 = now - 10 * _MINUTE

    q.init_meta()
    # two jobs processed long ago
    j1 = q.add_standard("welcome", {"to": "ana@example.com"}, t0 + 1_000)
    j2 = q.add_standard("welcome", {"to": "bo@example.invalid"}, t0 + 1_100)
    q.activate(j1, t0 + 1_200, lock_px=0)  # those locks were deleted on finish
    q.activate(j2, t0 + 1_300, lock_px=0)
    q.finish(j1, t0 + 2_000, "completed", _js({"messageId": "<a1@mx>"}))
    q.finish(
        j2,
        t0 + 2_500,
        "failed",
        "550 5.1.1 mailbox unavailable",
        stacktrace=["Error: 550 5.1.1 mailbox unavailable\n    at send (mailer.js:42:11)"],
    )

    # flow A: the child fails with failParentOnFailure -> the parent fails
    p2 = q.add_parent("newsletter-batch", {"batch": 7}, t0 + 60_000)
    c4 = q.add_child("newsletter", {"to": "cy@example.invalid"}, t0 + 60_000, p2, {"fpof": True})
    q.activate(c4, t0 + 61_000, lock_px=0)
    q.finish(
        c4,
        t0 + 65_000,
        "failed",
        "421 try again later",
        stacktrace=["Error: 421 try again later\n    at send (mailer.js:42:11)"],
    )
    q.activate(p2, t0 + 66_000, lock_px=0)
    q.finish(p2, t0 + 67_000, "failed", f"child {q.job_key_str(c4)} failed", stacktrace=[])

    # flow B: parent waits for C2, which is being processed right now
    p = q.add_parent("receipt-batch", {"batch": 8}, t0 + 120_000)
    c1 = q.add_child("receipt", {"to": "di@example.com"}, t0 + 120_000, p)
    c3 = q.add_child("receipt", {"to": "ed@example.invalid"}, t0 + 120_000, p, {"idof": True})
    c2 = q.add_child("receipt", {"to": "fa@example.com"}, t0 + 120_000, p)
    q.activate(c1, t0 + 121_000, lock_px=0)
    q.finish(c1, t0 + 125_000, "completed", _js({"messageId": "<c1@mx>"}))
    q.activate(c3, t0 + 126_000, lock_px=0)
    q.finish(
        c3,
        t0 + 127_000,
        "failed",
        "553 sender rejected",
        stacktrace=["Error: 553 sender rejected\n    at send (mailer.js:42:11)"],
    )
    q.activate(c2, now - 20_000)  # live lock

    j9 = q.add_standard("welcome", {"to": "gu@example.com"}, now - 12_000)
    q.activate(j9, now - 10_000)  # live lock
    q.log(j9, "connecting to smtp.example.com:587", "RCPT TO accepted")

    q.add_standard("welcome", {"to": "ha@example.com"}, now - 8_000)
    q.add_standard(
        "welcome",
        {"to": "io@example.com"},
        now - 8_000,
        opts={"de": {"id": "welcome:io@example.com"}},
    )  # dedup, no TTL
    q.add_standard(
        "digest", {"user": 42}, now - 8_000, opts={"de": {"id": "digest:42", "ttl": 600_000}}
    )  # dedup, PX ttl
    q.add_delayed("reminder", {"user": 42}, now - 7_000, 3_600_000)
    q.add_prioritized("password-reset", {"user": 7}, now - 6_000, 1)
    next_hour = (now // 3_600_000 + 1) * 3_600_000
    q.add_scheduler(
        "hourly-digest",
        "digest",
        {"kind": "hourly"},
        now - 5_000,
        every=3_600_000,
        start_date=next_hour,
    )

    # the latest stalled check (by this or another worker) marked both active jobs; their next
    # renewals (C2 at +10 s, 9 at +5 s) have not happened yet, so both are still in `stalled`
    q.stalled_check(now - 3_000)
    return q.result()


def plant_bullmq_abandoned_lock(
    client: redis.Redis,
    *,
    prefix: bytes = b"bull",
    queue: bytes = b"emails",
    worker_token: str | bytes | None = None,
    remaining_ms: int = 10_000,
    marked_stalled: bool = True,
) -> dict[bytes, str]:
    """Plant one active job whose worker died, and return ``{key: "lock" | "not_a_lock"}``.

    What an abandoned BullMQ lock really looks like (per the source):

    * BullMQ never writes a lock without a TTL: the lock is taken with ``SET <job>:lock <token>
      PX lockDuration`` (prepareJobForProcessing.lua) and every renewal is again ``SET ... PX``
      (extendLocks-1.lua / extendLock-2.lua). A lock with no TTL is not a BullMQ state.
    * When the worker dies nobody deletes the lock; its PX simply keeps counting down and Redis
      drops it after at most lockDuration (30 s) from the last renewal. The only visible sign
      before that is a PTTL below what renewals keep it at: a live LockManager renews about
      every lockRenewTime (lockDuration/2 = 15 s), so a live lock's PTTL stays above ~15000 ms
      (event-loop stalls aside). Hence the default ``remaining_ms=10_000``.
    * Recovery is BullMQ's own: moveStalledJobsToWait-9.lua, run by any live worker every
      stalledInterval (30 s), first copies every id in ``active`` into ``stalled``; the dead
      worker no longer SREMs it on renewal, so on a later run, once ``EXISTS <job>:lock`` is 0,
      the job is LREM'd from active, HINCRBY stc, RPUSHed back to wait (with ``defa`` set when
      stc > maxStalledCount = 1) and a "stalled" event is added. No one needs to delete the lock.

    The job is added with ``lifo: true`` (RPUSH) so that BullMQ's RPOPLPUSH takes it next even
    when other jobs are waiting (e.g. after `plant_bullmq` on the same queue). Its processedOn is
    set to when the lock was last written (lockDuration - remaining_ms ago), as if the worker died
    right after taking it. `worker_token` is the dead worker's id (default: a fresh UUID v4); the
    lock value is ``<worker_token>:0``. With `marked_stalled` the job id is in ``Q:stalled``
    (another worker's check ran after the death).
    """
    if not 0 < remaining_ms <= LOCK_DURATION_MS:
        raise ValueError("a BullMQ lock always has 0 < PTTL <= lockDuration")
    worker_id = _b(worker_token).decode() if worker_token is not None else new_worker_id()
    q = _Queue(client, prefix, queue, worker_id, limiter=False)
    taken_at = q.now - (LOCK_DURATION_MS - remaining_ms)
    if not client.exists(q.key("meta")):
        q.init_meta()
    job_id = q.add_standard(
        "welcome", {"to": "ju@example.com"}, taken_at - 500, opts={"lifo": True}
    )
    q.activate(job_id, taken_at, lock_px=remaining_ms)
    if marked_stalled:
        q.r.sadd(q.key("stalled"), job_id)
    return q.result()
