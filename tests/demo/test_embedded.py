"""The embedded redis-server the demo and the tests start: a port taken between looking and
binding (another process, another test) is tried again on a new port, a port that was asked
for is not, and a server that could not start is never left running."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from bot.demo import embedded
from bot.demo.embedded import RedisProcess, free_port


@pytest.fixture
def taken() -> Iterator[int]:
    """A loopback port held by another listener (it answers nothing)."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(8)
        yield int(holder.getsockname()[1])


def test_a_port_taken_meanwhile_is_tried_again_on_another(
    taken: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    ports = iter([taken])
    monkeypatch.setattr(embedded, "free_port", lambda: next(ports, None) or free_port())
    server = RedisProcess()
    try:
        assert server.port != taken
        assert server.client().ping()
    finally:
        server.stop()


def test_a_port_asked_for_and_taken_is_an_error_and_leaves_nothing_running(taken: int) -> None:
    started: list[RedisProcess] = []
    real_spawn = RedisProcess._spawn

    def spawn(self: RedisProcess, *args: object, **kw: object) -> None:
        started.append(self)
        real_spawn(self, *args, **kw)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as m:
        m.setattr(RedisProcess, "_spawn", spawn)
        with pytest.raises(RuntimeError, match=f"exited at start on port {taken}"):
            RedisProcess(port=taken)
    [tried] = started
    assert tried.proc.poll() is not None  # not left running
