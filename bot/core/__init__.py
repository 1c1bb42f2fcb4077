"""The pure core: values in, values out; no Redis, no Slack, no HTTP.

- `model`: snapshots, findings, layouts and verdicts; `layouts`: which library a key belongs to
  and its identity; `tenures`: a lock's holders across scans; `renewal`: each library's own
  renewal schedule and when a renewal is overdue; `rules`: the verdict and whether it may be
  offered; `worst`: the bounded "worst first" list;
- `display`: keys and values as escaped, cut text; `clock`: server time as text; `pacing`: how
  long to wait after a call so that lockguard keeps to its share of Redis (the scan budget);
- `globs`: Redis glob patterns (matching, and one narrowing another); `patterns`: the lock
  patterns setting parsed; `errors`: the errors every entry point turns into an exit code;
  `logs`: lockguard's structured log lines.
"""
