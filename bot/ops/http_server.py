"""lockguard's one HTTP server: uvicorn (asyncio, h11) running a small ASGI app over exact-match
routes. A handler is a plain function, `Request` in, Starlette `Response` out, so the Slack
adapter, the webhook, health and metrics are testable without a server.

uvicorn holds every connection on one event loop, so an idle or slow connection costs a socket,
never a thread; the blocking handlers run on Starlette's bounded thread pool. No concurrency cap:
uvicorn's answers 503 to every request once reached, which a flood of idle sockets would turn
into a failing liveness probe. The server's own answers and limits: docs/always-on.md.
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
#: The request line and headers at most (h11 answers 400 beyond).
MAX_HEAD_BYTES = 16 * 1024
KEEP_ALIVE_S = 5
BACKLOG = 2048
#: Seconds `stop()` waits for requests in flight.
GRACEFUL_S = 2
JSON_TYPE = "application/json; charset=utf-8"


@dataclass(frozen=True)
class Request:
    """`path` without the query string, `query` with blank values kept, the raw `body`."""

    method: str
    path: str
    query: Mapping[str, list[str]] = field(default_factory=dict)
    headers: Headers = field(default_factory=Headers)
    body: bytes = b""
    remote_addr: str = ""


Handler = Callable[[Request], Response]


@dataclass(frozen=True)
class Route:
    """`path` matched exactly; a GET route also answers HEAD."""

    method: str
    path: str
    handler: Handler


def json_response(status: int, value: Any, headers: Mapping[str, str] | None = None) -> Response:
    body = json.dumps(value, separators=(",", ":"), sort_keys=True).encode("utf-8")
    return Response(body, status, {"Content-Type": JSON_TYPE, **(headers or {})})


def error_response(status: int, error: str, headers: Mapping[str, str] | None = None) -> Response:
    """The server's own error bodies, `{"error": "<code word>"}`: nothing from an exception."""
    return json_response(status, {"error": error}, headers)


def raise_open_files() -> int:
    """Raise the soft limit on open files to the hard one; the limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return int(hard)
    return int(soft)


class RoutesApp:
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
    """`start()` serves on a daemon thread with its own event loop and returns the bound port
    (0 picks a free one); `stop()` ends it."""

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
        """OSError when the address is taken or not ours."""
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
        """Requests in flight get GRACEFUL_S to finish. Safe to call twice, or before start()."""
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
