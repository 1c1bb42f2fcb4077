"""The demo (`lockguard demo`) and the rigs it shares with the tests.

- `walkthrough`: the whole job on an embedded Redis, steps 1 to 8; `planted`: the locks it plants
  and the demo's other processes (contenders, a live owner, a subscriber);
- `slack_walkthrough`: the Slack side of it (and its people, by the name Slack shows), played for
  real against `standin`, the local Slack Web API stand-in (the tests' `FakeSlack` too):
  `slack_wire` (calls, bodies, the call log) and `slack_workspace` (messages, groups, each
  method's answer);
- `embedded`: a throwaway redis-server (the tests' throwaway Cluster is
  `tests/embedded_cluster.py`).
"""
