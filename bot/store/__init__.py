"""Redis access: connections (`connection`, `redis_target`), failures in words (`redis_errors`),
and lockguard's own keys (`keyspace`, the one table of them) and state (`scans`, `lease_keys`,
and for the Slack app `message_refs`, `unposted`, `slack_marks`)."""
