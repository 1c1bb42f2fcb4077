"""The always-on parts, with no Slack in them (`bot.serve` wires them to the Slack app): the
leader lease and a fleet's shards, schedules and the scheduler, the resumer, health and silence
watches, digests, metrics, the webhook, and the one HTTP server with Slack's route through Bolt.
"""
