"""Redis access: the one door to Redis.

- `redis_target`: where Redis is (one server, Cluster, Sentinel, TLS) from the settings;
  `connection`: the client built from it; `redis_errors`: Redis's failures turned into one
  line, `refusals` the error replies among them;
- `keyspace`: the one table of lockguard's own keys; `migration`: the old key format moved;
- `slots`: Redis Cluster slots; `tenure_plan`: where a Cluster scan keeps its tenure tables;
- `scans`: the scan lease, the tenure tables, the last scan and the heartbeat; `lease_keys`:
  how any lease of lockguard's is taken, renewed and given back (only while it is ours);
- `door`: a client with what its failures are named by, for the layers above the engine;
  `messages`, `unposted` and `slack_marks`: the Slack app's own state (where each case's
  message is, the cases still to be posted, the alerts out, the findings last posted, the
  signed requests seen).
"""
