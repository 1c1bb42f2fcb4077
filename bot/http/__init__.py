"""lockguard's one HTTP server (uvicorn and Starlette, `bot.http.server`) and its routes.

`lockguard serve` runs one `HttpServer` on `LOCKGUARD_HTTP_HOST`:`PORT` with five routes:

| method | path           | handler                                                         |
| ------ | -------------- | --------------------------------------------------------------- |
| POST   | /slack/events  | `bot.http.bolt_route.bolt_route(app)`: Bolt verifies and routes |
| POST   | /hooks/scan    | the webhook (`LOCKGUARD_WEBHOOK_KEY`)                           |
| GET    | /healthz       | 200 healthy / 503 not, JSON saying why                          |
| GET    | /livez         | 200 while the server answers (liveness; reads nothing)          |
| GET    | /metrics       | Prometheus text                                                 |

A handler is `Callable[[Request], Response]`; `Route(method, path, handler)` binds one.
`bot.http.bolt_route` is the only module here that imports `slack_bolt`, and it is not imported by
this package, so serving health and metrics never loads Bolt.
"""

from __future__ import annotations

from bot.http.routes import Handler, Headers, Request, Response, Route, error_response
from bot.http.server import MAX_BODY_BYTES, HttpServer

__all__ = [
    "MAX_BODY_BYTES",
    "Handler",
    "Headers",
    "HttpServer",
    "Request",
    "Response",
    "Route",
    "error_response",
]
