"""The demo (`lockguard demo`) and the rigs it shares with the tests.

- `walkthrough`: the whole job on an embedded Redis; `slack_walkthrough`: the Slack side of it,
  played for real against `standin`, a local Slack Web API stand-in;
- `embedded`: a throwaway redis-server (or fakeredis); `embedded_cluster`: a throwaway Cluster.
"""
