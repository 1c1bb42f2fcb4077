"""lockguard's one HTTP server: stdlib `ThreadingHTTPServer`, one daemon thread per request.

`HttpServer(host, port, routes)` serves exact-match routes (see `bot.http.routes`). What the server
answers by itself, always as a small JSON body `{"error": "<code word>"}`:

- unknown path: 404; known path, other method: 405 with `Allow` (HEAD is served by a GET route);
- a body over `max_body_bytes` (1 MiB by default): 413, judged from `Content-Length` before a byte
  of the body is read, and the connection is closed; a chunked body (no length): 411; a bad
  `Content-Length`: 400;
- a handler that raises (or returns something that is not a valid `Response`): 500 with nothing
  from the exception in the body; the traceback goes to the `lockguard.http` logger.

One request per connection (HTTP/1.0 semantics), so `stop()` leaves no idle keep-alive connection
still being served. What a client can hold is bounded:

- at most `max_connections` (`MAX_CONNECTIONS`, 64) connections are served at once, one thread
  each; a connection beyond them is answered 503 `{"error": "too_many_connections"}` with
  `Retry-After: 1` from the accepting thread, without reading it, and closed at once;
- the request line, headers and body must all arrive within `request_timeout`
  (`REQUEST_TIMEOUT_S`, 10 s) of the connection being accepted, however slowly they trickle in
  (a deadline, not a timeout per read); a connection that sends nothing or a partial request is
  then closed without an answer, and its thread ends. Writing the answer has its own
  `request_timeout` per send.
"""

from __future__ import annotations

import io
import logging
import socket
import socketserver
import threading
import time
from collections.abc import Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import cast
from urllib.parse import parse_qs, urlsplit

from bot.http.routes import Headers, Request, Response, Route, RouteTable, error_response

logger = logging.getLogger("lockguard.http")

MAX_BODY_BYTES = 1024 * 1024
#: Connections served at once (one thread each); beyond them, 503 at once.
MAX_CONNECTIONS = 64
#: Seconds a connection has to deliver its whole request (line, headers, body).
REQUEST_TIMEOUT_S = 10.0
_BUSY_BODY = b'{"error":"too_many_connections"}'
_BUSY = (
    b"HTTP/1.0 503 Service Unavailable\r\nServer: lockguard\r\n"
    b"Content-Type: application/json; charset=utf-8\r\nRetry-After: 1\r\n"
    b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY)
)
# Set by the server itself, never copied from a handler's response.
_HOP_HEADERS = frozenset({"content-length", "connection", "transfer-encoding", "keep-alive"})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # The listen backlog (socketserver's is 5): a burst of connections waits to be accepted, and
    # answered or refused, instead of having its SYNs dropped and retried seconds later.
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        table: RouteTable,
        max_body_bytes: int,
        request_timeout: float,
        max_connections: int,
    ) -> None:
        self.table = table
        self.max_body_bytes = max_body_bytes
        self.request_timeout = request_timeout
        self._slots = threading.BoundedSemaphore(max_connections)
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, _RequestHandler)

    def process_request(
        self, request: socket.socket | tuple[bytes, socket.socket], client_address: tuple[str, int]
    ) -> None:
        """On the accepting thread: a free slot starts the request's thread, else 503."""
        if not self._slots.acquire(blocking=False):
            self._refuse(cast(socket.socket, request))
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(
        self, request: socket.socket | tuple[bytes, socket.socket], client_address: tuple[str, int]
    ) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def _refuse(self, sock: socket.socket) -> None:
        try:
            sock.setblocking(False)  # never wait on a client here: the answer fits any buffer
            sock.send(_BUSY)
        except OSError:
            pass
        self.shutdown_request(sock)

    def server_bind(self) -> None:
        # HTTPServer.server_bind also calls socket.getfqdn(host): a reverse DNS lookup that can
        # stall start-up for seconds where DNS is slow or absent. The name is never used here.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)


class _RequestHandler(BaseHTTPRequestHandler):
    server_version = "lockguard"
    protocol_version = "HTTP/1.0"

    # Every method goes through one dispatcher: the route table answers 404/405 itself.
    def do_GET(self) -> None:
        self._handle()

    do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_GET

    def setup(self) -> None:
        super().setup()
        timeout = cast(_Server, self.server).request_timeout
        self.connection.settimeout(timeout)
        # Every read of the request shares one deadline (a trickle of bytes cannot extend it).
        self.rfile.close()  # the plain makefile() reader: it would keep the socket open
        self.rfile = io.BufferedReader(_DeadlineReader(self.connection, time.monotonic() + timeout))

    def _handle(self) -> None:
        server = cast(_Server, self.server)
        self.close_connection = True
        split = urlsplit(self.path)
        path = split.path or "/"
        body = self._read_body(server.max_body_bytes)
        if isinstance(body, Response):
            self._send(body)
            return
        handler, allowed = server.table.resolve(self.command, path)
        if handler is None:
            if allowed:
                self._send(error_response(405, "method_not_allowed", {"Allow": ", ".join(allowed)}))
            else:
                self._send(error_response(404, "not_found"))
            return
        request = Request(
            method=self.command,
            path=path,
            query=parse_qs(split.query, keep_blank_values=True),
            headers=Headers(self.headers.items()),
            body=body,
            query_string=split.query,
            remote_addr=str(self.client_address[0]),
        )
        try:
            response = _checked(handler(request))
        except Exception:
            logger.exception("handler for %s %s failed", self.command, path)
            response = error_response(500, "internal_error")
        self._send(response)

    def _read_body(self, limit: int) -> bytes | Response:
        """The body, or the error response to send instead (the body is then left unread)."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return error_response(411, "length_required")
        lengths = {value.strip() for value in self.headers.get_all("Content-Length") or []}
        if not lengths:
            return b""
        if len(lengths) > 1 or not (
            next(iter(lengths)).isascii() and next(iter(lengths)).isdigit()
        ):
            return error_response(400, "bad_content_length")
        length = int(next(iter(lengths)))
        if length > limit:
            return error_response(413, "body_too_large")
        body = self.rfile.read(length)
        if len(body) != length:
            return error_response(400, "incomplete_body")
        return body

    def _send(self, response: Response) -> None:
        try:
            self.connection.settimeout(cast(_Server, self.server).request_timeout)
            self.send_response(response.status)
            content_type_set = False
            for name, value in response.headers.pairs():
                if name.lower() in _HOP_HEADERS:
                    continue
                content_type_set = content_type_set or name.lower() == "content-type"
                self.send_header(name, value)
            if response.body and not content_type_set:
                self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(response.body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(response.body)
        except OSError as exc:  # the client went away; nothing left to tell it
            logger.debug("could not send the response to %s: %s", self.client_address[0], exc)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Errors http.server raises itself (bad request line, unknown verb, ...), as JSON."""
        self.close_connection = True
        # A request line it could not parse leaves the version at HTTP/0.9, which would send the
        # body with no status line at all; nobody speaks 0.9, so answer as 1.0.
        self.request_version = "HTTP/1.0"
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = "error"
        self._send(error_response(code, phrase.lower().replace(" ", "_").replace("-", "_")))

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: object) -> None:
        logger.debug("%s %s", self.address_string(), format % args)


class _DeadlineReader(io.RawIOBase):
    """Reads from `sock` until `deadline` (time.monotonic()); after it, TimeoutError."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request did not arrive in time")
        self._sock.settimeout(left)
        return self._sock.recv_into(buffer)


def _checked(response: object) -> Response:
    """A handler's return value, validated before any of it is written to the socket."""
    if not isinstance(response, Response):
        raise TypeError(f"handler returned {type(response).__name__}, not Response")
    if not 100 <= response.status <= 599:
        raise ValueError(f"invalid HTTP status {response.status}")
    if not isinstance(response.body, bytes):
        raise TypeError("Response.body must be bytes")
    for name, value in response.headers.pairs():
        if any(c in name or c in value for c in "\r\n\0") or not name or ":" in name:
            raise ValueError(f"invalid response header {name!r}")
    return response


class HttpServer:
    """`HttpServer(host, port, routes)`: `start()` serves on a daemon thread and returns the bound
    port (port 0 picks a free one); `serve_forever()` serves on the calling thread until `stop()`
    (from another thread) or KeyboardInterrupt. Also a context manager (`with` = start/stop)."""

    def __init__(
        self,
        host: str,
        port: int,
        routes: Iterable[Route],
        *,
        max_body_bytes: int = MAX_BODY_BYTES,
        request_timeout: float = REQUEST_TIMEOUT_S,
        max_connections: int = MAX_CONNECTIONS,
        poll_interval: float = 0.05,
    ) -> None:
        if max_connections < 1 or not request_timeout > 0:
            raise ValueError("max_connections and request_timeout must be positive")
        self.host = host
        self._requested_port = port
        self._table = RouteTable(routes)
        self._max_body_bytes = max_body_bytes
        self._request_timeout = request_timeout
        self._max_connections = max_connections
        self._poll_interval = poll_interval
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._serving = False
        self._lock = threading.Lock()

    def bind(self) -> int:
        """Bind the listening socket (idempotent) and return the bound port."""
        with self._lock:
            if self._server is None:
                self._server = _Server(
                    (self.host, self._requested_port),
                    self._table,
                    self._max_body_bytes,
                    self._request_timeout,
                    self._max_connections,
                )
            return int(self._server.server_address[1])

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("HttpServer is not bound; call start() or bind() first")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """`http://host:port` for clients; a wildcard host becomes loopback."""
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(self.host, self.host)
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    def start(self) -> int:
        port = self.bind()
        server = self._server
        assert server is not None
        with self._lock:
            if self._serving:
                raise RuntimeError("HttpServer is already serving")
            self._serving = True
            self._thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": self._poll_interval},
                name=f"lockguard-http-{port}",
                daemon=True,
            )
            self._thread.start()
        logger.info("serving HTTP on %s:%d", self.host, port)
        return port

    def serve_forever(self) -> None:
        port = self.bind()
        server = self._server
        assert server is not None
        with self._lock:
            if self._serving:
                raise RuntimeError("HttpServer is already serving")
            self._serving = True
        logger.info("serving HTTP on %s:%d", self.host, port)
        try:
            server.serve_forever(poll_interval=self._poll_interval)
        finally:
            with self._lock:
                self._serving = False

    def stop(self) -> None:
        """Stop accepting requests and close the socket. Requests already being handled finish
        on their own daemon threads. Safe to call twice, or before start()."""
        with self._lock:
            server, thread, serving = self._server, self._thread, self._serving
            self._server, self._thread = None, None
        if server is None:
            return
        if serving:
            server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)
        with self._lock:
            self._serving = False

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
