"""What a client can hold of `lockguard serve`'s HTTP server, through real sockets on loopback:
1,000 connections from one address, idle or trickling half a request, leave `/healthz` and a
signed Slack command answering within a second (uvicorn holds them on its event loop, so none
costs a thread); a request that arrives in pieces is served."""

from __future__ import annotations

import http.client
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

from bot.ops.http_server import KEEP_ALIVE_S, HttpServer, Request, Response, Route, json_response
from tests.conftest import missing
from tests.slack_app_harness import Factory
from tests.slack_app_harness import slack_app as slack_app  # the fixture

FLOOD = 1_000
TCP_ESTABLISHED, TCP_LISTEN = 0x01, 0x0A  # states in /proc/net/tcp


def ok(request: Request) -> Response:
    return json_response(200, {"ok": True})


def timed_get(url_port: int, path: str) -> tuple[int, float]:
    started = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", url_port, timeout=5)
    try:
        conn.request("GET", path)
        status = conn.getresponse().status
    finally:
        conn.close()
    return status, time.monotonic() - started


def flood(port: int, stack: ExitStack) -> Iterator[socket.socket]:
    """FLOOD connections: a third idle, a third with half a request line and headers, a third
    with whole headers announcing a body that never comes (`POST /slack/events`)."""
    for i in range(FLOOD):
        sock = stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=5))
        if i % 3 == 1:
            sock.sendall(b"POST /slack/events HTTP/1.1\r\nHost: x\r\nContent-Type: appli")
        elif i % 3 == 2:
            sock.sendall(b"POST /slack/events HTTP/1.1\r\nHost: x\r\nContent-Length: 900\r\n\r\n{")
        yield sock


def server_sockets(port: int) -> list[tuple[int, int]]:
    """(state, receive queue) of each TCP socket on this machine whose local port is `port`,
    from /proc/net/tcp and tcp6. A listening socket's receive queue is its accept queue: the
    connections the kernel completed that the server has not accepted yet."""
    out = []
    for table in (Path("/proc/net/tcp"), Path("/proc/net/tcp6")):
        if not table.exists():
            continue
        for line in table.read_text().splitlines()[1:]:
            fields = line.split()
            local, state, queues = fields[1], fields[3], fields[4]
            if int(local.rsplit(":", 1)[1], 16) == port:
                out.append((int(state, 16), int(queues.split(":")[1], 16)))
    return out


def wait_parked(port: int, timeout: float = 30.0) -> None:
    """A positive signal that the server holds every connection of the flood: its accept queue
    is empty, FLOOD connections (at least) are established to it, and it has read all that
    any of them sent (none has bytes waiting in its receive queue)."""
    if not Path("/proc/net/tcp").exists():
        missing("needs Linux's /proc/net/tcp to see the server's sockets")
    deadline = time.monotonic() + timeout
    while True:
        socks = server_sockets(port)
        listening = [rx for state, rx in socks if state == TCP_LISTEN]
        established = [rx for state, rx in socks if state == TCP_ESTABLISHED]
        if listening == [0] and len(established) >= FLOOD and not any(established):
            return
        assert time.monotonic() < deadline, (listening, len(established), sum(established))
        time.sleep(0.05)


def test_a_thousand_idle_or_slow_connections_leave_health_and_slack_answering(
    slack_app: Factory,
) -> None:
    app = slack_app(LOCKGUARD_APPROVERS="U0ALICE")
    port = app.served.port
    with ExitStack() as stack:
        held = list(flood(port, stack))
        assert len(held) == FLOOD
        wait_parked(port)
        for _ in range(5):
            status, took = timed_get(port, "/healthz")
            assert status in (200, 503)  # answered by the app, whatever its health
            assert took < 1.0
            started = time.monotonic()
            reply = app.slash("help", user_id="U0ALICE")
            assert reply.status == 200
            assert "/lockguard" in reply.text
            assert time.monotonic() - started < 1.0
        # the flood is still there, held open: nothing was answered or closed for it
        idle = held[0]
        idle.setblocking(False)
        try:
            assert idle.recv(1) == b""  # closed by the server: would be b""
            still_open = False
        except BlockingIOError:
            still_open = True
        assert still_open


def test_a_request_that_arrives_in_pieces_is_served() -> None:
    with HttpServer("127.0.0.1", 0, [Route("GET", "/ok", ok)]) as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
            for piece in (b"GET /ok HTTP/1.1\r\n", b"Host: x\r\n", b"Connection: close\r\n\r\n"):
                sock.sendall(piece)
                time.sleep(0.05)
            reply = b""
            while chunk := sock.recv(4096):
                reply += chunk
        assert reply.startswith(b"HTTP/1.1 200 ")


def test_the_limits() -> None:
    config = HttpServer("127.0.0.1", 0, []).config()
    assert config.limit_concurrency is None  # a flood must not turn /healthz into 503
    assert config.timeout_keep_alive == KEEP_ALIVE_S == 5
    assert config.h11_max_incomplete_event_size == 16 * 1024
