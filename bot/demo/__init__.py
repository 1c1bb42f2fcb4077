"""`lockguard demo` (`walkthrough`, `planted`, `slack_walkthrough`) and the rigs it shares with
the tests: `standin`, the local Slack Web API stand-in (over `slack_wire` and `slack_workspace`),
and `embedded`, a throwaway redis-server."""
