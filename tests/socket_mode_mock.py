"""Slack's Socket Mode, locally: a WebSocket server (stdlib only) and a FakeSlack that points
`apps.connections.open` at it.

    links = FakeSocketMode().start()                  # ws://127.0.0.1:<free port>
    fake = SocketModeSlack(links).start()             # the Web API (tests/slack_mock.py)
    ...                                               # the app calls apps.connections.open
    link = links.wait_for_link()                      # ... and opens the WebSocket it was given
    envelope_id = link.send_envelope("slash_commands", {...}, accepts_response_payload=True)
    ack = link.wait_for_ack(envelope_id)              # {"envelope_id": ..., "payload"?: ...}
    link.wait_until_ended()                           # "eof" or "close 1000 <reason>"

What Slack does, and so what this does:
- `apps.connections.open`, called with the app-level token (xapp-), answers a single-use URL
  `wss://wss-primary.slack.com/link/?ticket=<uuid>&app_id=<app>`; here `ws://127.0.0.1:<port>/`
  with the same path and query. The ticket is checked on the handshake: a URL used twice or
  never issued is refused with HTTP 401, as Slack does. Other Web API methods refuse an app
  token (`not_allowed_token_type`), and apps.connections.open refuses any other token.
- The handshake is RFC 6455's: `GET` with `Upgrade: websocket`, `Connection: Upgrade`,
  `Sec-WebSocket-Version: 13` and a `Sec-WebSocket-Key`, answered `101 Switching Protocols` with
  `Sec-WebSocket-Accept` = base64(SHA-1(key + the RFC's GUID)).
- Then Slack sends `{"type": "hello", "num_connections": 1, ...}`, and envelopes
  (`{"envelope_id", "type", "payload", "accepts_response_payload"}`) that the app acknowledges
  with a text frame `{"envelope_id": ...}` (plus `"payload"` when it answers something).
- Frames from the client must be masked (RFC 6455 5.1); an unmasked or fragmented one, or an
  unknown opcode, is kept in `Link.errors`. A ping is answered by a pong with its payload;
  `Link.ping()` pings the client, whose pong lands in `Link.pongs`. A close frame is answered
  with a close frame and ends the link; so does the client going away (`ended == "eof"`).

Everything runs on daemon threads; `stop()` ends the connections and joins the threads.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import itertools
import json
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.slack_mock import FakeSlack

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
APP_ID = "A0LOCKGUARD"

OP_CONTINUATION, OP_TEXT, OP_BINARY = 0x0, 0x1, 0x2
OP_CLOSE, OP_PING, OP_PONG = 0x8, 0x9, 0xA
_OPCODES = {OP_CONTINUATION, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG}


def accept_key(key: str) -> str:
    """Sec-WebSocket-Accept for a Sec-WebSocket-Key (RFC 6455 section 4.2.2)."""
    return base64.b64encode(hashlib.sha1((key + WS_GUID).encode("ascii")).digest()).decode()


def frame(opcode: int, payload: bytes = b"", *, mask: bytes | None = None) -> bytes:
    """One final frame; unmasked (the server's) unless a 4-byte `mask` is given."""
    head = bytes([0x80 | opcode])
    bit = 0x80 if mask is not None else 0
    n = len(payload)
    if n < 126:
        head += bytes([bit | n])
    elif n < 1 << 16:
        head += bytes([bit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", n)
    if mask is None:
        return head + payload
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def hello(app_id: str = APP_ID) -> dict[str, Any]:
    """The first message Slack sends on a new Socket Mode connection."""
    return {
        "type": "hello",
        "num_connections": 1,
        "debug_info": {
            "host": "applink-lockguard-test",
            "build_number": 1,
            "approximate_connection_time": 18060,
        },
        "connection_info": {"app_id": app_id},
    }


class _Closed(Exception):
    pass


@dataclass
class Link:
    """One accepted WebSocket connection and everything that went over it."""

    sock: socket.socket
    path: str
    headers: dict[str, str]  # the handshake request's, lower-case names
    changed: threading.Condition
    messages: list[dict[str, Any]] = field(default_factory=list)  # text frames, parsed
    pings: list[bytes] = field(default_factory=list)  # the client's pings (each answered)
    pongs: list[bytes] = field(default_factory=list)  # the client's pongs to our pings
    errors: list[str] = field(default_factory=list)  # protocol violations by the client
    ended: str | None = None  # "eof", "close <code> <reason>", or "stopped"
    sent: list[dict[str, Any]] = field(default_factory=list)
    _send_lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    # -- sending ------------------------------------------------------------------------------

    def _send_frame(self, opcode: int, payload: bytes) -> None:
        with self._send_lock:
            self.sock.sendall(frame(opcode, payload))

    def send_json(self, message: dict[str, Any]) -> None:
        self._send_frame(OP_TEXT, json.dumps(message, separators=(",", ":")).encode("utf-8"))
        with self.changed:
            self.sent.append(message)

    def send_envelope(
        self,
        kind: str,
        payload: dict[str, Any],
        *,
        accepts_response_payload: bool = False,
        retry_attempt: int | None = None,
        retry_reason: str | None = None,
    ) -> str:
        """An envelope as Slack sends it ("slash_commands", "interactive", "events_api");
        returns its envelope_id."""
        envelope_id = f"{uuid.uuid4()}"
        message: dict[str, Any] = {
            "envelope_id": envelope_id,
            "payload": payload,
            "type": kind,
            "accepts_response_payload": accepts_response_payload,
        }
        if retry_attempt is not None:
            message["retry_attempt"] = retry_attempt
            message["retry_reason"] = retry_reason or ""
        self.send_json(message)
        return envelope_id

    def ping(self, payload: bytes | None = None) -> bytes:
        data = payload if payload is not None else f"lg-ping-{next(self._ids)}".encode()
        self._send_frame(OP_PING, data)
        return data

    def close(self, code: int = 1000, reason: str = "") -> None:
        """A server-initiated close frame (Slack's, before it drops a connection)."""
        self._send_frame(OP_CLOSE, struct.pack("!H", code) + reason.encode("utf-8"))

    # -- waiting ------------------------------------------------------------------------------

    def wait_until(self, condition: Callable[[], object], what: str, timeout: float = 3.0) -> None:
        deadline = time.monotonic() + timeout
        with self.changed:
            while not condition():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"FakeSocketMode: waited {timeout:g}s for {what}; received "
                        f"{self.messages!r}, ended={self.ended!r}, errors={self.errors!r}"
                    )
                self.changed.wait(left)

    def acks(self, envelope_id: str) -> list[dict[str, Any]]:
        with self.changed:
            return [m for m in self.messages if m.get("envelope_id") == envelope_id]

    def wait_for_ack(self, envelope_id: str, timeout: float = 3.0) -> dict[str, Any]:
        """The client's acknowledgement of one envelope (Slack waits 3 seconds for it)."""
        self.wait_until(lambda: self.acks(envelope_id), f"the ack of {envelope_id}", timeout)
        return self.acks(envelope_id)[0]

    def wait_for_pong(self, payload: bytes, timeout: float = 3.0) -> None:
        self.wait_until(lambda: payload in self.pongs, f"a pong of {payload!r}", timeout)

    def wait_until_ended(self, timeout: float = 10.0) -> str:
        self.wait_until(lambda: self.ended is not None, "the connection to end", timeout)
        assert self.ended is not None
        return self.ended

    # -- the reader (one thread per link) ------------------------------------------------------

    def _recv_exact(self, n: int, buffer: bytearray) -> bytes:
        while len(buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise _Closed("eof")
            buffer += chunk
        out = bytes(buffer[:n])
        del buffer[:n]
        return out

    def _read_frame(self, buffer: bytearray) -> tuple[int, bool, bytes]:
        b1, b2 = self._recv_exact(2, buffer)
        fin, opcode, masked, n = bool(b1 & 0x80), b1 & 0x0F, bool(b2 & 0x80), b2 & 0x7F
        if n == 126:
            (n,) = struct.unpack("!H", self._recv_exact(2, buffer))
        elif n == 127:
            (n,) = struct.unpack("!Q", self._recv_exact(8, buffer))
        mask = self._recv_exact(4, buffer) if masked else b""
        data = self._recv_exact(n, buffer)
        if masked:
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        else:
            self._error(f"unmasked frame from the client (opcode {opcode:#x})")
        if not fin:
            self._error(f"fragmented frame from the client (opcode {opcode:#x})")
        if b1 & 0x70:
            self._error(f"reserved bits set by the client ({b1:#04x})")
        return opcode, fin, data

    def _error(self, text: str) -> None:
        with self.changed:
            self.errors.append(text)
            self.changed.notify_all()

    def _end(self, how: str) -> None:
        with self.changed:
            if self.ended is None:
                self.ended = how
            self.changed.notify_all()

    def run(self, buffer: bytearray) -> None:
        try:
            while True:
                opcode, _, data = self._read_frame(buffer)
                if opcode == OP_PING:
                    with self.changed:
                        self.pings.append(data)
                    self._send_frame(OP_PONG, data)
                elif opcode == OP_PONG:
                    with self.changed:
                        self.pongs.append(data)
                        self.changed.notify_all()
                elif opcode == OP_TEXT:
                    try:
                        parsed = json.loads(data.decode("utf-8"))
                    except ValueError as exc:
                        self._error(f"a text frame that is not JSON ({exc}): {data[:200]!r}")
                        continue
                    with self.changed:
                        self.messages.append(
                            parsed if isinstance(parsed, dict) else {"_json": parsed}
                        )
                        self.changed.notify_all()
                elif opcode == OP_CLOSE:
                    code = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else 1005
                    reason = data[2:].decode("utf-8", "replace")
                    with contextlib.suppress(OSError):
                        self._send_frame(OP_CLOSE, data[:2])
                    self._end(f"close {code} {reason}".rstrip())
                    return
                else:
                    self._error(f"unexpected opcode {opcode:#x} from the client")
        except (_Closed, OSError):  # the client went away (or stop() cut it: "stopped")
            self._end("eof")
        finally:
            with contextlib.suppress(OSError):
                self.sock.close()


class FakeSocketMode:
    """The Socket Mode WebSocket endpoint on 127.0.0.1:<free port>."""

    def __init__(self, *, app_id: str = APP_ID, send_hello: bool = True) -> None:
        self.app_id = app_id
        self.send_hello = send_hello
        self.links: list[Link] = []
        self.refused: list[str] = []  # handshakes refused (path and why)
        self.changed = threading.Condition()
        self._tickets: set[str] = set()  # issued and not used yet
        self._server: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()

    def start(self) -> FakeSocketMode:
        server = socket.create_server(("127.0.0.1", 0))
        server.settimeout(0.05)
        self._server = server
        self._spawn(self._accept_loop, "fake-socket-mode-accept")
        return self

    def __enter__(self) -> FakeSocketMode:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeSocketMode is not started")
        return int(self._server.getsockname()[1])

    def issue_url(self) -> str:
        """A new single-use URL, as apps.connections.open answers."""
        ticket = str(uuid.uuid4())
        with self.changed:
            self._tickets.add(ticket)
        return f"ws://127.0.0.1:{self.port}/link/?ticket={ticket}&app_id={self.app_id}"

    def wait_for_link(self, count: int = 1, timeout: float = 5.0) -> Link:
        """The `count`-th connection (1: the first), once its handshake is done."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while len(self.links) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"FakeSocketMode: waited {timeout:g}s for connection "
                        f"{count}; got {len(self.links)}, refused "
                        f"{self.refused!r}"
                    )
                self.changed.wait(left)
            return self.links[count - 1]

    def stop(self) -> None:
        self._stopping.set()
        if self._threads:
            self._threads[0].join(timeout=5)  # the accept loop: no connection after this
        with self.changed:
            links = list(self.links)
        for link in links:
            link._end("stopped")  # unless it ended already
            with contextlib.suppress(OSError):
                link.sock.shutdown(socket.SHUT_RDWR)
        for thread in self._threads[1:]:
            thread.join(timeout=5)
        self._threads.clear()
        if self._server is not None:
            self._server.close()
            self._server = None

    # -- internals ------------------------------------------------------------------------------

    def _spawn(self, target: Callable[..., None], name: str, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        assert self._server is not None
        server = self._server
        while not self._stopping.is_set():
            try:
                sock, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            sock.settimeout(None)
            self._spawn(self._serve, "fake-socket-mode-link", sock)

    def _refuse(self, sock: socket.socket, status: str, why: str) -> None:
        with self.changed:
            self.refused.append(why)
            self.changed.notify_all()
        try:
            sock.sendall(
                f"HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode(
                    "ascii"
                )
            )
        finally:
            sock.close()

    def _serve(self, sock: socket.socket) -> None:
        buffer = bytearray()
        try:
            while b"\r\n\r\n" not in buffer:
                chunk = sock.recv(4096)
                if not chunk or len(buffer) > 65536:
                    sock.close()
                    return
                buffer += chunk
        except OSError:
            sock.close()
            return
        head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, _, target = lines[0].partition(" ")
        target = target.rsplit(" ", 1)[0]
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        key = headers.get("sec-websocket-key", "")
        if (
            method != "GET"
            or headers.get("upgrade", "").lower() != "websocket"
            or "upgrade" not in headers.get("connection", "").lower()
            or headers.get("sec-websocket-version") != "13"
            or not key
        ):
            self._refuse(sock, "400 Bad Request", f"{target}: not a WebSocket handshake")
            return
        split = urlsplit(target)
        ticket = (parse_qs(split.query).get("ticket") or [""])[0]
        with self.changed:
            known = ticket in self._tickets
            self._tickets.discard(ticket)
        if split.path != "/link/" or not known:
            self._refuse(sock, "401 Unauthorized", f"{target}: unknown or used ticket")
            return
        sock.sendall(
            (
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                "Connection: Upgrade\r\n"
                f"Sec-WebSocket-Accept: {accept_key(key)}\r\n\r\n"
            ).encode("ascii")
        )
        link = Link(sock, target, headers, self.changed)
        if self.send_hello:
            link.send_json(hello(self.app_id))
        with self.changed:
            self.links.append(link)
            self.changed.notify_all()
        link.run(bytearray(rest))


class SocketModeSlack(FakeSlack):
    """FakeSlack whose `apps.connections.open` answers a URL of `links` (the app token only),
    and whose other methods refuse an app token, as Slack's do."""

    def __init__(self, links: FakeSocketMode, **kw: Any) -> None:
        super().__init__(**kw)
        self.links = links

    def answer(
        self, method: str, body: dict[str, Any], token: str | None
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        is_app_token = bool(token and token.startswith("xapp-"))
        if token and (method == "apps.connections.open") != is_app_token:
            return 200, {"ok": False, "error": "not_allowed_token_type"}, {}
        status, reply, headers = super().answer(method, body, token)
        if method == "apps.connections.open" and status == 200 and reply == {"ok": True}:
            reply = {"ok": True, "url": self.links.issue_url()}
        return status, reply, headers
