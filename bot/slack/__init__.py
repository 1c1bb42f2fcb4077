"""Slack presentation: pure Block Kit builders (no I/O, no Slack client, no Redis).

`ids` names every action, callback and block id the listeners match on; `text` makes anything
from Redis inert in mrkdwn; `limits` checks a message or view against Slack's limits; the
builders (`findings`, `case_message`, `messages`, `modal`) take engine values and return dicts
ready for `chat.postMessage` / `chat.update` / `views.open`.
"""
