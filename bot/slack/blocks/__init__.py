"""The Slack layer's pure part: Block Kit builders and the text in them (no I/O, no Slack
client, no Redis; import-linter keeps it so). A module per message family over `kit` (pieces,
limits, filling a message), `text` (Redis content made inert) and `ids`.
"""
