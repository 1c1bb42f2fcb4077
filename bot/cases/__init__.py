"""Approval cases: what a human was shown, what they decided, and what happened to each lock.
`case` is the record (pure), `case_store` and `case_scripts` its atomic store, `opening` and
`proposal` open one per scan, `decision` and `approval` decide it, `recheck` and `release_lease`
guard its release, `receipts` and `audit` record it."""
