"""What a client can hold of the HTTP server, through real sockets: connections beyond the cap
are answered 503 at once and cost no thread, and a connection that sends nothing, or trickles a
request in, is closed at its deadline."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from bot.http import HttpServer, Request, Response, Route
from bot.http.server import MAX_CONNECTIONS, REQUEST_TIMEOUT_S

CAP = 4


def ok(request: Request) -> Response:
    return Response.json(200, {"ok": True})


def get(server: HttpServer) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        conn.request("GET", "/ok")
        return conn.getresponse().status
    finally:
        conn.close()


def connect(server: HttpServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=5)


def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    out = b""
    try:
        while chunk := sock.recv(4096):
            out += chunk
    except ConnectionResetError:
        pass
    return out


def wait_until(condition: object, timeout: float = 5.0) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


@pytest.fixture
def server() -> Iterator[HttpServer]:
    srv = HttpServer(
        "127.0.0.1", 0, [Route("GET", "/ok", ok)], max_connections=CAP, request_timeout=1.5
    )
    srv.start()
    yield srv
    srv.stop()


def test_the_defaults() -> None:
    assert (MAX_CONNECTIONS, REQUEST_TIMEOUT_S) == (64, 10.0)
    with pytest.raises(ValueError, match="must be positive"):
        HttpServer("127.0.0.1", 0, [], max_connections=0)


def test_connections_beyond_the_cap_get_503_at_once_and_no_thread(server: HttpServer) -> None:
    before = threading.active_count()
    idle = [connect(server) for _ in range(CAP)]  # half-open: they never send a request
    wait_until(lambda: threading.active_count() >= before + CAP)  # one thread each
    extras = [connect(server) for _ in range(20)]
    answers = [read_all(sock) for sock in extras]
    for answer in answers:
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.0 503 "), answer
        assert b"Retry-After: 1" in head
        assert json.loads(body) == {"error": "too_many_connections"}
    assert threading.active_count() <= before + CAP
    assert get(server) == 503  # a real request too, while the idle ones hold every slot
    # The idle ones reach their deadline and are closed without an answer; slots come back.
    assert [read_all(sock) for sock in idle] == [b""] * CAP
    for sock in idle + extras:
        sock.close()
    wait_until(lambda: threading.active_count() <= before)
    assert get(server) == 200


def test_a_connection_that_sends_nothing_is_closed_at_the_deadline() -> None:
    with HttpServer("127.0.0.1", 0, [Route("GET", "/ok", ok)], request_timeout=0.3) as srv:
        sock = connect(srv)
        began = time.monotonic()
        assert read_all(sock) == b""
        assert time.monotonic() - began < 4  # the client's own timeout (5 s) did not fire
        sock.close()
        assert get(srv) == 200


def test_a_trickled_request_is_closed_at_the_deadline_however_slow_each_byte() -> None:
    with HttpServer("127.0.0.1", 0, [Route("GET", "/ok", ok)], request_timeout=0.3) as srv:
        sock = connect(srv)
        sock.sendall(b"GET /ok HTTP/1.0\r\n")
        sent, closed = 0, False
        for _ in range(100):  # one byte every 20 ms: each read is quick, the whole is not
            try:
                sock.sendall(b"X")
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            sent += 1
            time.sleep(0.02)
        assert closed, "the trickle went on to its end"
        assert sent < 100
        sock.close()
        assert get(srv) == 200


def test_a_request_that_arrives_in_pieces_in_time_is_served() -> None:
    with HttpServer("127.0.0.1", 0, [Route("GET", "/ok", ok)], request_timeout=2) as srv:
        sock = connect(srv)
        for piece in (b"GET /ok HTTP/1.0\r\n", b"Host: x\r\n", b"\r\n"):
            sock.sendall(piece)
            time.sleep(0.05)
        assert read_all(sock).startswith(b"HTTP/1.0 200 ")
        sock.close()
