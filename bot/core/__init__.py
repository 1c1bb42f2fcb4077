"""The pure core: values and rules in, values out; no Redis, no Slack, no HTTP."""
