"""The Slack layer's pure part: Block Kit builders and the text that goes in them (no I/O, no
Slack client, no Redis; import-linter keeps it so).

- `kit`: the block primitives and `Message`; `limits`: Slack's limits, checked; `ids`: every
  action, callback and block id; `text`: anything from Redis made inert in mrkdwn; `wording`:
  verdicts and outcomes in words; `render_text`: a message as plain text (the demo);
- `findings`: a scan's findings with the case's buttons; `case_message`: a case's message;
  `case_line`: one case in a line, for every list of cases; `messages`: status, cases, help and
  the replies; `modal` and `approve_modal`: the reject and typed-count dialogs;
- `digest`, `home` and `guard`: the digest, the Home tab and what the always-on side shows,
  built from `inventory` (the last scan's locks), `guard_health` (lockguard's own health and its
  alarm) and `listing` (titled lists sharing one message fairly).
"""
