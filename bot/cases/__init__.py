"""Approval cases: what a human was shown, what they decided, and what happened to each lock.

- `record`: the case record (states, locks as shown, outcome records; pure); `case`: its store
  (`CaseStore`, atomic state changes); `scripts`: its Lua;
- `proposal`: the releasable findings of a scan put into one new case;
- `config`: how cases are decided and released (`ReclaimConfig`);
- `reclaim`: the engine's steps after a scan (open, approve and release, resume);
- `release_lease`: which process is releasing a case now (a cut-short release is found by it);
- `decision`: what every decision shares (the case looked up, who decides checked) and `reject`;
- `recheck`: each lock judged again before release; `releasing`: a batch of a case released,
  verified and recorded; `receipts`: per-lock release receipts; `audit`: the audit stream.
"""
