"""Every key lockguard owns, in one place. Pure: names only, no I/O.

All live under `{lockguard}:`, which the scanner never treats as a lock and no lock pattern may
match. `{lockguard}` is a Redis Cluster hash tag: every key below is in one slot, so each script
and MULTI over several of them is slot-safe. Keys, and lock keys in values, are exact bytes.
Format 1's `lockguard:*` keys are renamed once (`bot.store.migration`), and never locks either.

| key                                | type   | TTL                   | written by | holds |
|------------------------------------|--------|-----------------------|------------|-------|
| `{lockguard}:keyspace`             | string | none                  | migration | the keyspace format, `2`: set once the old `lockguard:*` keys were renamed |
| `{lockguard}:migrating`            | string | 60 s                  | migration | random token: one migration at a time |
| `{lockguard}:leases:gen`             | string | none                  | scan commit | the current tenure-table generation N |
| `{lockguard}:leases:<N>`             | hash   | none                  | scan, per batch | lock key -> 82-byte tenure record, format version first (`bot.core.tenures`) |
| `{lockguard}:leases:<N>:plan`        | hash   | none                  | scan start (cluster) | `tables`, `owners`, `nodes`: on a Redis Cluster, which per-primary table holds each slot's tenure records (`bot.store.tenure_plan`) |
| `{lockguard}:scan:lease`             | string | 60 s, refreshed       | scan start | random token: one scan at a time per Redis |
| `{lockguard}:scan:last`              | string | none                  | scan commit, then its ranking | JSON summary of the last completed scan; `worst`: its 10 worst findings by impact, keys escaped and cut (`bot.store.scans.record_worst`) |
| `{lockguard}:heartbeat`              | string | 15 min                | scan commit | server time (ms) of the last completed scan |
| `{lockguard}:leader`                 | string | lease (30 s), renewed | leader heartbeat | JSON `{token, replica, since_ms}`: the one replica that runs the schedules (`bot.ops.leader`); renewed and deleted only while it holds the exact bytes (`bot.store.lease_keys`) |
| `{lockguard}:replicas`               | zset   | 2 x lease, renewed    | fleet heartbeat | replica id -> server ms until which it counts as alive: how many `serve` replicas share the fleet, for each one's share of the targets' leader leases (`bot.ops.shards`) |
| `{lockguard}:case:<id>`              | hash   | retention once closed | case scripts | state, times, actor, reason, `lock_count`, `n_<outcome>` counts, `summary` JSON, `v` (format 2) |
| `{lockguard}:case:<id>:locks`        | list   | as the case           | scan, per batch | one JSON object per lock, in the order shown; its index names the lock |
| `{lockguard}:case:<id>:outcomes`     | hash   | as the case           | release script | lock index -> `<outcome>\\n<JSON>`, recorded in the script that deletes the lock |
| `{lockguard}:case:<id>:releasing`    | string | 5 s, renewed          | approve, resume | `<replica>|<token>`: the process releasing the case's locks now (`bot.cases.release_lease`), renewed every 1.5 s while it works and deleted when it stops; absent while the case is approved and unfinished = its release was cut short, and any replica resumes it |
| `{lockguard}:cases`                  | zset   | none (trimmed)        | case opened | case id -> created ms: the listing |
| `{lockguard}:open-locks`             | hash   | none                  | case scripts | lock key -> `<case id>|<expires ms>` while a case is opening, pending or approved |
| `{lockguard}:rejections`             | hash   | none (lazily pruned)  | reject | lock key -> `<identity digest hex>|<until ms>|<case id>`: not proposed again before then with the same identity |
| `{lockguard}:manifest:<id>`          | string | retention             | case opened | the quarantine manifest: counts of what was found, JSON |
| `{lockguard}:slack:case:<id>`     | hash   | as the case           | Slack layer | `channel`, `ts` of the message that shows the case: what `chat.update` rewrites; `listed` = 1 once it and its thread show every lock of the case (0: not approvable from Slack) |
| `{lockguard}:alerts`               | hash   | none                  | Slack layer | alert kind -> `<fingerprint>|<posted ms>`: an alert still true is not posted again; `outage` -> `<channel>|<ts>` of the outage's one message, `line:<kind>` -> `<ms>\\n<title>\\n<detail>` for each of its problems (`bot.slack.alerts`) |
| `{lockguard}:slack:unposted`       | hash   | none                  | Slack layer | case id -> `<channel>|<queued ms>|<attempts>|<claimed until ms>|<claim>`: a pending case whose message Slack did not take; dropped once posted (`bot.slack.reposter`) or no longer pending |
| `{lockguard}:slack:seen:<sha256 hex>` | string | 6 min          | Slack layer (`bot.slack.replays`) | `1`: a signed Slack request (the hex SHA-256 of its `X-Slack-Signature`, a newline, its `X-Slack-Request-Timestamp`) was taken; the same request again within Slack's 5-minute window is acked and dropped, on any replica |
| `{lockguard}:silence`              | hash   | none                  | silence alarm (`bot.ops.health`) | `scans` or `watch:<key bytes>` -> server ms since it has been alerting; absent = fine. HSETNX raises it, HDEL recovers it: one replica wins each transition |
| `{lockguard}:digest`              | hash   | none                  | serve (`bot.ops.digests`) | `last_posted_ms` (server ms of the last digest posted), `scans_ok`, `scans_failed` (scans `serve` ran since then, any replica): what a digest reports as the guard's own health |
| `{lockguard}:posted:findings`      | string | 24 h                  | serve (`bot.slack.announcer`) | fingerprint of the flagged findings a scheduled or webhook scan last posted in `LOCKGUARD_SLACK_CHANNEL`: the same findings are not posted again within a day unless the scan opened a case |
| `{lockguard}:audit`                  | stream | trimmed to retention  | every step | the audit log (`bot.cases.audit`) |

On a Redis Cluster, the tenure tables (one per primary, in a slot it serves: `bot.store.tenure_plan`) and
the release receipts (in the lock's own slot) live under `{lockguard:<tag>}:` instead: see
`bot.store.slots`.

The scan batch and the release script mix lockguard's keys with lock keys, fine on one server.
On a Redis Cluster they are split: the scan batch runs per node with that node's tenure tables,
and the release script touches only the lock and its receipt in the lock's slot
(`bot.cases.receipts`), python-redis-lock's signal list pushed after it.
"""

from __future__ import annotations

import hashlib

PREFIX = b"{lockguard}:"
#: The prefix of format 1 (before the hash tag): renamed by `bot.store.migration`, never a lock.
LEGACY_PREFIX = b"lockguard:"
#: The prefix of the keys lockguard keeps in a lock's own slot on a Redis Cluster (`bot.store.slots`).
SLOT_PREFIX = b"{lockguard:"
#: Every prefix whose keys are lockguard's own: the scanner skips them, patterns may not match them.
OWN_PREFIXES = (PREFIX, LEGACY_PREFIX, SLOT_PREFIX)
#: The keyspace format this code writes (`KEYSPACE`); 1 was the `lockguard:` prefix.
FORMAT = b"2"

KEYSPACE = PREFIX + b"keyspace"
MIGRATING = PREFIX + b"migrating"

TENURE_GEN = PREFIX + b"leases:gen"
SCAN_LEASE = PREFIX + b"scan:lease"
LAST_SCAN = PREFIX + b"scan:last"
HEARTBEAT = PREFIX + b"heartbeat"
LEADER = PREFIX + b"leader"
REPLICAS = PREFIX + b"replicas"
CASES = PREFIX + b"cases"
OPEN_LOCKS = PREFIX + b"open-locks"
REJECTIONS = PREFIX + b"rejections"
AUDIT_STREAM = PREFIX + b"audit"
#: The case scripts build a case's key from its id inside Lua: `CASE_PREFIX .. id`.
CASE_PREFIX = PREFIX + b"case:"


def tenure_table(gen: int) -> bytes:
    return PREFIX + b"leases:" + str(gen).encode()


def tenure_plan_key(gen: int) -> bytes:
    return tenure_table(gen) + b":plan"


def case_key(case_id: str) -> bytes:
    return CASE_PREFIX + case_id.encode()


def locks_key(case_id: str) -> bytes:
    return case_key(case_id) + b":locks"


def outcomes_key(case_id: str) -> bytes:
    return case_key(case_id) + b":outcomes"


def releasing_key(case_id: str) -> bytes:
    return case_key(case_id) + b":releasing"


def manifest_key(case_id: str) -> bytes:
    return PREFIX + b"manifest:" + case_id.encode()


def slack_message_key(case_id: str) -> bytes:
    return PREFIX + b"slack:case:" + case_id.encode()


ALERTS = PREFIX + b"alerts"
SLACK_UNPOSTED = PREFIX + b"slack:unposted"
#: How long a signed Slack request is remembered (`slack_seen_key`): Slack's 5-minute window for
#: its timestamp, and a minute more for clocks that disagree.
SLACK_SEEN_MS = 360_000
SILENCE = PREFIX + b"silence"
DIGEST = PREFIX + b"digest"
POSTED_FINDINGS = PREFIX + b"posted:findings"


def slack_seen_key(signature: str, timestamp: str) -> bytes:
    digest = hashlib.sha256(f"{signature}\n{timestamp}".encode()).hexdigest()
    return PREFIX + b"slack:seen:" + digest.encode()


def is_own(key: bytes) -> bool:
    return key.startswith(OWN_PREFIXES)
