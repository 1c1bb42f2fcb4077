"""Approval cases: what a human was shown, what they decided, and what happened to each lock.

- `case`: the case record and its store (`CaseStore`, atomic state changes); `scripts`: its Lua;
- `proposal`: the releasable findings of a scan put into one new case;
- `reclaim`: the engine's steps after a scan (open, approve, reject, resume);
- `recheck`: each lock judged again before release; `releasing`: a batch of a case released,
  verified and recorded; `receipts`: per-lock release receipts; `audit`: the audit stream.
"""
