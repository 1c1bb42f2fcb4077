"""The Slack app: listeners and their work (`commands`, `actions`, `decisions`, `home_tab`),
posting and its state (`chat`, `case_posts`, `announcer`, `alerts` with the outage's one
message in `outage`, `reposter`), who may act
(`approvers`, `scan_gate`, `replays`), its settings and the Bolt wiring (`app`). The pure
builders are `bot.slack.blocks`.
"""
