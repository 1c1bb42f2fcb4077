"""The Slack app: the listeners and their work after the ack, posting and its state, who may
act, its settings and the Bolt wiring (`app`). The pure builders are `bot.slack.blocks`.
"""
