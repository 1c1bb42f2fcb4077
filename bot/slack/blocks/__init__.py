"""The Slack layer's pure part: Block Kit builders and the text that goes in them (no I/O, no
Slack client, no Redis; import-linter keeps it so). A module per concept:

- `kit`: Block Kit's pieces, Slack's limits and the filling of a message up to them (`pack`,
  `Listing`, `fit`); `text`: anything from Redis made inert in mrkdwn, and lockguard's codes in
  words; `ids`: every action, callback and block id;
- `findings`: a scan's findings with the case's buttons; `case_message`: a case's message, its
  line in every list of cases, its two modals and the replies to its buttons;
- `status`: `/lockguard status`, `cases` and `help`; `guard`: the always-on side's health and
  schedules as the app shows them; `inventory`: the last scan's locks in words; `digest` and
  `home`: the digest and the Home tab, built from those (one Redis and a fleet alike);
- `outage_message`: an alert, an outage and its recovery; `render_text`: a message as plain
  text for a terminal (the demo).
"""
