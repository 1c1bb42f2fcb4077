"""The always-on side, with no Slack in it: what `lockguard serve` runs besides the Slack app.

- `leader`: the one-active-replica lease; `schedules` and `scheduler`: when and what runs;
- `resumer`: cut-short releases finished, on every replica (the release lease decides who);
- `health`: `/healthz` and the silence alarm; `watches`: the user's own jobs' heartbeats;
- `digests`: the data of a digest; `metrics`: `/metrics`; `webhook`: `POST /hooks/scan`.
"""
