"""lockguard's one HTTP server: uvicorn (asyncio and h11) running a small ASGI app over exact-match
routes, and what a route handler sees. A handler is a plain function, `Request` in, Starlette
`Response` out (`json_response`, `error_response`), so Slack's adapter (`bot.ops.bolt_route`),
the webhook, health and metrics are testable without a server.

Why these (rather than our own server on `http.server`, which Python's docs say is not for
production, and which served one thread per connection, 64 at most, so that 64 idle sockets
stopped it): uvicorn holds every connection on one event loop, so an idle or slow connection
costs a socket, never a thread; the handlers, which block (Bolt waits for a listener's ack,
Redis calls), run on Starlette's bounded thread pool; h11 parses and frames HTTP/1.1.

What the server answers by itself, as a small JSON body `{"error": "<code word>"}`:
- unknown path: 404; known path, other method: 405 with `Allow` (HEAD is served by a GET route);
- a body over `max_body_bytes` (1 MiB by default): 413, judged from `Content-Length` before a byte
  of the body is read, and the connection is closed; a chunked body (no length): 411;
- a handler that raises (or returns something that is not a valid `Response`): 500 with nothing
  from the exception in the body; the traceback goes to the `lockguard.http` logger.
h11 itself refuses what it cannot frame (a malformed request line, a bad or repeated
`Content-Length`, a request line and headers still unfinished past `MAX_HEAD_BYTES`) with 400,
before the app.

uvicorn's limits, as set here (`config`): keep-alive connections idle for `KEEP_ALIVE_S` are
closed; the listening backlog is `BACKLOG`; no concurrency cap (uvicorn's answers 503 to every
request once that many connections are open, so a flood of idle sockets would turn `/healthz`
into 503 and the liveness probe into a restart); the process may open as many sockets as its
hard limit allows (`raise_open_files`). uvicorn has no deadline for a request's headers: a
connection that trickles them costs a socket and nothing else (`tests/ops/test_http_flood.py`:
1,000 of them leave `/healthz` and signed Slack requests answering within a second).
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs

import uvicorn
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.requests import Request as StarletteRequest
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

__all__ = ["Headers", "HttpServer", "Request", "Response", "Route", "error_response"]

logger = logging.getLogger("lockguard.http")

MAX_BODY_BYTES = 1024 * 1024
#: The request line and headers may take this many bytes (h11 answers 400 beyond).
MAX_HEAD_BYTES = 16 * 1024
#: Seconds a keep-alive connection may stay idle between requests.
KEEP_ALIVE_S = 5
#: Connections the kernel queues for accepting.
BACKLOG = 2048
#: Seconds `stop()` waits for requests in flight before closing their connections.
GRACEFUL_S = 2
JSON_TYPE = "application/json; charset=utf-8"


@dataclass(frozen=True)
class Request:
    """One HTTP request as a handler sees it: `path` without the query string, `query` each
    name's values (blank ones kept), Starlette's case-insensitive `headers` (`getlist` for every
    value of a name), and the raw `body` exactly as received."""

    method: str
    path: str
    query: Mapping[str, list[str]] = field(default_factory=dict)
    headers: Headers = field(default_factory=Headers)
    body: bytes = b""
    remote_addr: str = ""


Handler = Callable[[Request], Response]


@dataclass(frozen=True)
class Route:
    """`method` (GET also answers HEAD) and `path`, matched exactly, to `handler`."""

    method: str
    path: str
    handler: Handler


def json_response(status: int, value: Any, headers: Mapping[str, str] | None = None) -> Response:
    """`value` as compact JSON with sorted keys."""
    body = json.dumps(value, separators=(",", ":"), sort_keys=True).encode("utf-8")
    return Response(body, status, {"Content-Type": JSON_TYPE, **(headers or {})})


def error_response(status: int, error: str, headers: Mapping[str, str] | None = None) -> Response:
    """The server's own error bodies, `{"error": "<code word>"}`: nothing from an exception."""
    return json_response(status, {"error": error}, headers)


def raise_open_files() -> int:
    """Let this process open as many files and sockets as its hard limit allows; the limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return int(hard)
    return int(soft)


class RoutesApp:
    """The ASGI app: each request to its route's handler, run on the thread pool."""

    def __init__(self, routes: Iterable[Route], max_body_bytes: int) -> None:
        self.by_path: dict[str, dict[str, Handler]] = {}
        for route in routes:
            methods, method = self.by_path.setdefault(route.path, {}), route.method.upper()
            if method in methods:
                raise ValueError(f"duplicate route: {method} {route.path}")
            methods[method] = route.handler
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # no lifespan, no websockets
        request = StarletteRequest(scope, receive)
        response = await self._answer(request)
        if request.method == "HEAD":
            response.body = b""  # its Content-Length stays the GET's
        await response(scope, receive, send)

    async def _answer(self, request: StarletteRequest) -> Response:
        path = request.url.path or "/"
        refused = self._framing(request)
        if refused is not None:
            return refused
        methods = self.by_path.get(path, {})
        handler = methods.get(request.method) or (
            methods.get("GET") if request.method == "HEAD" else None
        )
        if handler is None:
            if methods:
                return error_response(
                    405, "method_not_allowed", {"Allow": ", ".join(sorted(methods))}
                )
            return error_response(404, "not_found")
        ours = Request(
            method=request.method,
            path=path,
            query=parse_qs(request.url.query, keep_blank_values=True),
            headers=request.headers,
            body=await request.body(),
            remote_addr=request.client.host if request.client else "",
        )
        try:
            return _checked(await run_in_threadpool(handler, ours))
        except Exception:
            logger.exception("handler for %s %s failed", request.method, path)
            return error_response(500, "internal_error")

    def _framing(self, request: StarletteRequest) -> Response | None:
        """The answer to a body this server does not take (before a byte of it is read)."""
        if "chunked" in request.headers.get("transfer-encoding", "").lower():
            return error_response(411, "length_required", {"Connection": "close"})
        length = request.headers.get("content-length")
        if length is not None and int(length) > self.max_body_bytes:  # h11 checked the digits
            return error_response(413, "body_too_large", {"Connection": "close"})
        return None


def _checked(response: object) -> Response:
    """A handler's return value, validated before any of it is sent."""
    if not isinstance(response, Response):
        raise TypeError(f"handler returned {type(response).__name__}, not Response")
    if not 100 <= response.status_code <= 599:
        raise ValueError(f"invalid status {response.status_code}")
    for name, value in response.raw_headers:
        if any(c in name or c in value for c in b"\r\n\0") or not name or b":" in name:
            raise ValueError(f"invalid response header {name!r}")
    return response


class HttpServer:
    """`HttpServer(host, port, routes)`: `start()` serves on a daemon thread (its own event loop)
    and returns the bound port (port 0 picks a free one); `stop()` ends it. Also a context
    manager (`with` = start/stop)."""

    def __init__(
        self,
        host: str,
        port: int,
        routes: Iterable[Route],
        *,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self.host = host
        self._requested_port = port
        self.app = RoutesApp(routes, max_body_bytes)
        self._socket: socket.socket | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def config(self) -> uvicorn.Config:
        return uvicorn.Config(
            self.app,
            lifespan="off",
            interface="asgi3",
            http="h11",
            loop="asyncio",
            timeout_keep_alive=KEEP_ALIVE_S,
            timeout_graceful_shutdown=GRACEFUL_S,
            h11_max_incomplete_event_size=MAX_HEAD_BYTES,
            backlog=BACKLOG,
            limit_concurrency=None,
            access_log=False,
            log_config=None,
            server_header=False,
            proxy_headers=False,
        )

    @property
    def port(self) -> int:
        if self._socket is None:
            raise RuntimeError("HttpServer is not serving; call start() first")
        return int(self._socket.getsockname()[1])

    @property
    def url(self) -> str:
        """`http://host:port` for clients; a wildcard host becomes loopback."""
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(self.host, self.host)
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    def start(self) -> int:
        """Bind (OSError when the address is taken or not ours) and serve; the bound port."""
        with self._lock:
            if self._thread is not None:
                raise RuntimeError("HttpServer is already serving")
            raise_open_files()
            sock = _listen(self.host, self._requested_port)
            server = uvicorn.Server(self.config())
            ready = threading.Event()
            thread = threading.Thread(
                target=_run, args=(server, sock, ready), name="lockguard-http", daemon=True
            )
            self._socket, self._server, self._thread = sock, server, thread
            thread.start()
        if not ready.wait(10) or not server.started:
            self.stop()
            raise OSError("the HTTP server did not start")
        logger.info("serving HTTP on %s:%d", self.host, self.port)
        return self.port

    def stop(self) -> None:
        """Stop accepting, let requests in flight finish (GRACEFUL_S at most), close every
        connection and the socket. Safe to call twice, or before start()."""
        with self._lock:
            server, thread, sock = self._server, self._thread, self._socket
            self._server, self._thread = None, None
        if server is not None:
            server.should_exit = True
        if thread is not None:
            thread.join(timeout=GRACEFUL_S + 5)
        if sock is not None:
            sock.close()

    def __enter__(self) -> HttpServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _run(server: uvicorn.Server, sock: socket.socket, ready: threading.Event) -> None:
    """The server's thread: its own event loop until `should_exit`."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    async def serve() -> None:
        task = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started and not task.done():
            await asyncio.sleep(0.01)
        ready.set()
        await task

    try:
        loop.run_until_complete(serve())
    except Exception:
        logger.exception("the HTTP server stopped")
    finally:
        ready.set()
        loop.close()
