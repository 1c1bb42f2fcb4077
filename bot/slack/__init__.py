"""The Slack app: each feature's listeners with their work after the ack (`commands`,
`approval`, `rejection`, `home_tab`; `decider` is what the decision clicks share), posting and
its state (`chat`, `case_posts`, `announcer`, `alerts` with the outage's one message in
`outage`, `reposter`), who may act (`approvers`, `scan_gate`, `replays`), its settings and the
Bolt wiring (`app`). The pure builders are `bot.slack.blocks`.
"""
