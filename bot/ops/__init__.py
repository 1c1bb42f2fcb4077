"""The always-on parts, with no Slack in them: what `lockguard serve` runs besides the Slack app
(`bot.serve` composes them and wires them to it).

- `leader`: the one-active-replica lease; `shards`: a fleet's leases spread over the replicas;
- `schedules` and `scheduler`: when and what runs;
- `resumer`: cut-short releases finished, on every replica (the release lease decides who);
- `health`: `/healthz` and the silence alarm (`fleet_health`: a fleet's); `watches`: the user's
  own jobs' heartbeats;
- `digests`: the data of a digest; `metrics`: `/metrics`; `webhook`: `POST /hooks/scan`;
- `http_server`, `bolt_route`: the one HTTP server (uvicorn and Starlette) serving
  them, and Slack's `POST /slack/events` through Bolt.
"""
