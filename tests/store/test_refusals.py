"""Every way a real Redis refuses lockguard is one clear stderr line, never a traceback: the
endpoint, what is wrong or missing, no password or lock value; a refused scan records nothing
(`{lockguard}:scan:last` stays). Real redis-servers: ACL users, maxmemory, replicas, a busy script,
a dataset still loading, and a listener that never answers."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import nullcontext, suppress
from io import StringIO
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from bot.cli import main
from bot.demo.embedded import free_port
from bot.store import keyspace
from bot.store.connection import describe
from tests.conftest import RedisServer, start_or_skip

LAST = keyspace.LAST_SCAN
MARKER = b'{"scanned":-1,"marker":"before"}'
LOCK_VALUE = b"Lock-Value-Sekrit-77"  # a holder's token: never in an error line
USERS = {  # name: (password, ACL rules)
    "noscript": ("pw-Noscript-1a", "~* +@all -@scripting"),
    "noeval": ("pw-Noeval-2b", "~* +@all -evalsha -eval"),
    "nohgetall": ("pw-Nohgetall-3c", "~* +@all -hgetall"),
    "noscan": ("pw-Noscan-4d", "~* +@all -scan"),
    "reader": ("pw-Reader-5e", "~* +@read"),
    "noset": ("pw-Noset-6f", "~* +@all -set"),
    "nohset": ("pw-Nohset-7a", "~* +@all -hset"),
    "lockkeys": ("pw-Lockkeys-8b", "~lock:* +@all"),  # none of lockguard's own keys
}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    monkeypatch.chdir(tmp_path)  # no stray .env
    monkeypatch.setenv("LOCKGUARD_AUTO_REMEDIATE", "false")  # opening a case: not tested here
    return monkeypatch


@pytest.fixture(scope="module")
def acl_server() -> Iterator[RedisServer]:
    server = start_or_skip()
    admin = server.client()
    for name, (password, rules) in USERS.items():
        admin.execute_command("ACL", "SETUSER", name, "on", f">{password}", "&*", *rules.split())
    admin.close()
    yield server
    server.stop()


@pytest.fixture
def admin(acl_server: RedisServer) -> Iterator[redis.Redis]:
    client = acl_server.client()
    client.flushall()
    seed(client)
    yield client
    client.flushall()
    client.close()


def seed(client: redis.Redis) -> None:
    client.set(b"lock:forever", LOCK_VALUE)
    client.hset(b"lock:hash", b"6f1c2c1e-6f3a-4a5b-9c1d-2b3c4d5e6f70:1", b"1")
    client.pexpire(b"lock:hash", 600_000)
    client.set(LAST, MARKER)
    client.set(keyspace.KEYSPACE, keyspace.FORMAT)  # migrated: these tests are about the scan


def as_user(env: pytest.MonkeyPatch, port: int, user: str, password: str, db: int = 0) -> None:
    env.setenv("REDIS_URL", f"redis://{user}:{password}@127.0.0.1:{port}/{db}")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    out = StringIO()
    code = main(list(argv), out=out)
    captured = capsys.readouterr()
    return code, out.getvalue() + captured.out, captured.err


def one_clear_line(err: str, port: int, *needles: str, secrets: tuple[str, ...] = ()) -> str:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith("lockguard: error: ")
    assert f"127.0.0.1:{port}" in line
    for needle in needles:
        assert needle in line, line
    for secret in (*secrets, LOCK_VALUE.decode()):
        assert secret not in line
    return line


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback listener that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    listener.close()
    for s in held:
        s.close()


@pytest.mark.parametrize("command", ["check", "scan"])
def test_a_silent_server_times_out_once(
    env: pytest.MonkeyPatch, silent_port: int, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    env.setenv("REDIS_URL", f"redis://:pw-Silent-9c@127.0.0.1:{silent_port}/0")
    env.setenv("LOCKGUARD_REDIS_TIMEOUT_SECONDS", "1")
    started = time.monotonic()
    code, out, err = run(capsys, command)
    elapsed = time.monotonic() - started
    assert code == 3
    assert out == ""
    line = one_clear_line(err, silent_port, secrets=("pw-Silent-9c",))
    assert "timed out (no answer within LOCKGUARD_REDIS_TIMEOUT_SECONDS" in line
    assert elapsed < 1.8  # one timeout, not a retry after it


@pytest.fixture
def http_port() -> Iterator[int]:
    """A loopback listener that answers every connection as a web server would."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)

    def serve() -> None:
        while True:
            try:
                conn = listener.accept()[0]
            except OSError:
                return
            with conn:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()


@pytest.mark.parametrize("command", ["check", "scan"])
def test_a_server_that_is_not_redis_is_named_as_such(
    env: pytest.MonkeyPatch, http_port: int, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    env.setenv("REDIS_URL", f"redis://127.0.0.1:{http_port}/0")
    code, out, err = run(capsys, command)
    assert code == 3
    assert out == ""
    line = one_clear_line(err, http_port, "did not answer as Redis does", "REDIS_PORT")
    assert "InvalidResponse" not in line


@pytest.mark.parametrize("db", [16, 99])
@pytest.mark.parametrize("command", ["check", "scan"])
def test_a_database_the_server_lacks_is_bad_configuration(
    env: pytest.MonkeyPatch,
    acl_server: RedisServer,
    admin: redis.Redis,
    capsys: pytest.CaptureFixture[str],
    db: int,
    command: str,
) -> None:
    as_user(env, acl_server.port, "noset", USERS["noset"][0], db=db)
    code, out, err = run(capsys, command)
    assert code == 2
    assert out == ""
    one_clear_line(
        err,
        acl_server.port,
        "REDIS_URL",
        f"database {db}",
        "fewer databases",
        secrets=(USERS["noset"][0],),
    )


@pytest.mark.parametrize(
    ("user", "argv", "needles"),
    [
        ("noscan", ["scan"], ["'scan'", "NOPERM", "lockguard needs SCAN"]),
        ("reader", ["scan"], ["'set'", "NOPERM", "write its own {lockguard}:* keys"]),
        ("noset", ["scan"], ["'set'", "NOPERM", "write its own {lockguard}:* keys"]),
        ("nohset", ["scan"], ["'hset'", "NOPERM", "write its own {lockguard}:* keys"]),
        ("nohset", ["scan", "--read-mode", "pipeline"], ["'hset'", "write its own {lockguard}:*"]),
        ("lockkeys", ["scan"], ["access to a key", "NOPERM", "{lockguard}:*"]),
        ("noeval", ["scan", "--read-mode", "lua"], ["'evalsha'", "NOPERM", "lua read mode"]),
        ("noscript", ["scan", "--read-mode", "lua"], ["NOPERM", "lua read mode"]),
        ("noscan", ["scan", "--read-mode", "lua"], ["Lua script", "lua read mode", "SCAN"]),
        ("nohgetall", ["scan", "--read-mode", "lua"], ["Lua script", "HGETALL"]),
        ("noscan", ["scan", "--json"], ["'scan'"]),
        ("reader", ["check"], ["'ping'", "NOPERM"]),
    ],
)
def test_an_acl_refusal_is_one_line_naming_the_command(
    env: pytest.MonkeyPatch,
    acl_server: RedisServer,
    admin: redis.Redis,
    capsys: pytest.CaptureFixture[str],
    user: str,
    argv: list[str],
    needles: list[str],
) -> None:
    password = USERS[user][0]
    as_user(env, acl_server.port, user, password)
    code, out, err = run(capsys, *argv)
    assert code == 3
    assert out == ""
    one_clear_line(err, acl_server.port, *needles, secrets=(password,))
    assert admin.get(LAST) == MARKER  # 4. a refused scan is not recorded as done
    assert admin.get(keyspace.SCAN_LEASE) is None  # and gives its lease back


@pytest.mark.parametrize(
    ("user", "mode"), [("noscript", "pipeline"), ("noeval", "pipeline"), ("nohgetall", None)]
)
def test_a_user_without_scripting_still_scans_pipelined(
    env: pytest.MonkeyPatch,
    acl_server: RedisServer,
    admin: redis.Redis,
    capsys: pytest.CaptureFixture[str],
    user: str,
    mode: str | None,
) -> None:
    """AUTO mode: the probe is refused (no EVALSHA, or no scripting at all), or the first Lua
    batch is (HGETALL on the hash lock, which the pipelined read does not need)."""
    password = USERS[user][0]
    as_user(env, acl_server.port, user, password)
    code, out, err = run(capsys, "scan")
    assert code in (0, 1), err
    assert "Traceback" not in err
    assert f"lockguard scan of redis://127.0.0.1:{acl_server.port}/0: 2 lock(s)" in out
    assert "lock:forever" in out
    assert "lock:hash" in out
    assert password not in out + err
    last = json.loads(admin.get(LAST))
    assert last["scanned"] == 2
    if mode is not None:
        assert last["read_mode"] == mode


def test_a_redis_error_outside_the_commands_mapping_is_still_one_line(
    env: pytest.MonkeyPatch,
    acl_server: RedisServer,
    admin: redis.Redis,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The last resort in `main`: a command that let a Redis error through."""
    import bot.engine

    env.setattr(bot.engine, "redis_errors", lambda *a, **k: nullcontext())
    as_user(env, acl_server.port, "reader", USERS["reader"][0])
    code, _, err = run(capsys, "check")
    assert code == 3
    one_clear_line(err, acl_server.port, "'ping'", secrets=(USERS["reader"][0],))


@pytest.fixture
def server() -> Iterator[RedisServer]:
    srv = start_or_skip("--busy-reply-threshold", "100")
    client = srv.client()
    seed(client)
    client.close()
    yield srv
    srv.stop()


def point(env: pytest.MonkeyPatch, port: int) -> None:
    env.setenv("REDIS_HOST", "127.0.0.1")
    env.setenv("REDIS_PORT", str(port))


def test_out_of_memory(
    env: pytest.MonkeyPatch, server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = server.client()
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", "1")
    point(env, server.port)
    try:
        code, out, err = run(capsys, "scan")
    finally:
        admin.config_set("maxmemory", "0")
    assert code == 3
    assert out == ""
    one_clear_line(err, server.port, "Redis is out of memory (maxmemory)", "OOM")
    assert admin.get(LAST) == MARKER
    admin.close()


def test_read_only_replica_and_a_replica_without_its_primary(
    env: pytest.MonkeyPatch, server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = server.client()
    admin.replicaof("127.0.0.1", str(free_port()))  # a primary that is not there
    point(env, server.port)
    code, out, err = run(capsys, "scan")
    assert code == 3
    assert out == ""
    one_clear_line(err, server.port, "is a read-only replica; point REDIS_URL at the primary")
    assert admin.get(LAST) == MARKER
    admin.config_set("replica-serve-stale-data", "no")
    code, _, err = run(capsys, "check")
    assert code == 3
    one_clear_line(err, server.port, "MASTERDOWN", "point REDIS_URL at the primary")
    admin.close()


def busy_reply(client: redis.Redis) -> str:
    try:
        client.ping()
    except redis.ResponseError as exc:
        return str(exc)
    return ""


def test_busy_running_a_script(
    env: pytest.MonkeyPatch, server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    runner = server.client()

    def spin() -> None:
        with suppress(redis.ResponseError):  # killed by SCRIPT KILL below
            runner.eval("while true do end", 0)

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    probe = server.client()
    deadline = time.monotonic() + 5
    while "BUSY" not in busy_reply(probe):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    point(env, server.port)
    try:
        results = [run(capsys, command) for command in ("check", "scan")]
    finally:
        probe.script_kill()
        thread.join(5)
    for code, out, err in results:
        assert code == 3
        assert out == ""
        one_clear_line(err, server.port, "busy running a script", "BUSY")
    assert probe.get(LAST) == MARKER
    probe.close()
    runner.close()


def test_loading_its_dataset(
    env: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = start_or_skip(
        "--dir", str(tmp_path), "--dbfilename", "dump.rdb", "--rdbcompression", "no"
    )
    client = first.client()
    seed(client)
    with client.pipeline(transaction=False) as pipe:
        for i in range(3000):  # ~6 MB, loaded at 1 ms a key: LOADING for about 3 s
            pipe.set(b"cache:%d" % i, b"x" * 2000)
        pipe.execute()
    client.save()
    client.close()
    first.stop()
    port = free_port()
    proc = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
            "--dbfilename",
            "dump.rdb",
            "--key-load-delay",
            "1000",
            "--loading-process-events-interval-bytes",
            "1024",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    probe = redis.Redis(host="127.0.0.1", port=port, retry=Retry(NoBackoff(), 0))
    try:
        deadline = time.monotonic() + 10
        while True:  # until it answers LOADING
            try:
                probe.ping()
                pytest.fail("the 3 s load ended before the server first answered: never LOADING")
            except redis.BusyLoadingError:
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline
                time.sleep(0.01)
        point(env, port)
        results = [run(capsys, command) for command in ("check", "scan")]
        for code, out, err in results:
            assert code == 3
            assert out == ""
            one_clear_line(err, port, "loading its dataset", "LOADING")
        while True:
            try:
                assert probe.get(LAST) == MARKER
                break
            except redis.BusyLoadingError:
                assert time.monotonic() < deadline + 20
                time.sleep(0.05)
    finally:
        probe.close()
        proc.terminate()
        proc.wait(10)


def test_refusals_inside_scripts_are_mapped_without_quoting_them(
    acl_server: RedisServer, admin: redis.Redis
) -> None:
    """Redis words an error raised inside a script differently (`ERR The user executing the
    script can't ...`, `OOM ... script: <sha>, on @user_script:1.`): the real replies, mapped."""
    ep = f"redis://127.0.0.1:{acl_server.port}/0"
    value = "Arg-Value-Sekrit-55"

    def refusal(client: redis.Redis, script: str, *keys: str) -> redis.RedisError:
        with pytest.raises(redis.RedisError) as info:
            client.eval(script, len(keys), *keys, value)
        return info.value

    noset = acl_server.client(username="noset", password=USERS["noset"][0])
    lockkeys = acl_server.client(username="lockkeys", password=USERS["lockkeys"][0])
    cases = [
        (
            refusal(noset, "return redis.call('SET', KEYS[1], ARGV[1])", "{lockguard}:x"),
            ["NOPERM in script", "Lua script calls"],
        ),
        (
            refusal(lockkeys, "return redis.call('SET', '{lockguard}:x', ARGV[1])"),
            ["access to a key", "NOPERM in script"],
        ),
        (refusal(admin, "return redis.call('NOSUCH', ARGV[1])"), ["does not know", "script"]),
        (
            refusal(admin, "return redis.call('GET', ARGV[1], ARGV[1])"),
            ["failed one of lockguard's Lua scripts", "ERR in script"],
        ),
    ]
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", "1")
    try:
        cases.append(
            (
                refusal(admin, "return redis.call('SET', KEYS[1], ARGV[1])", "lock:x"),
                ["Redis is out of memory (maxmemory)", "OOM in script"],
            )
        )
    finally:
        admin.config_set("maxmemory", "0")
    for exc, needles in cases:
        assert value in str(exc) or "script" in str(exc)
        line = str(describe(exc, ep))
        assert ep in line
        assert value not in line
        for needle in needles:
            assert needle in line, (line, str(exc))
    noset.close()
    lockkeys.close()
