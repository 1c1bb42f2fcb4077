"""Where Redis is more than one server (DESIGN §6): the settings of each mode checked at load
(exit 2, the variable named, never a secret), the endpoint text that says the mode, the client
each mode builds, the errors that say what to change, and a real 3-node Redis Cluster discovered
from one of its nodes."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster
from redis.connection import SSLConnection
from redis.sentinel import MasterNotFoundError, SentinelConnectionPool

from bot.compose import build_engine, secrets_of
from bot.config import load_settings
from bot.core.errors import ConfigError, RedisUnavailableError
from bot.demo.embedded import free_port
from bot.store.connection import describe, is_cluster, make_client
from tests.conftest import missing
from tests.redis_topologies import ClusterSet, start

PASSWORD = "modes-Passw0rd-1b7e"
SYSTEM_CA = "/etc/ssl/certs/ca-certificates.crt"


@pytest.fixture
def pem(tmp_path: Path) -> Path:
    """A file that exists (its content is checked only where a CA is loaded)."""
    path = tmp_path / "some.pem"
    path.write_text("not a certificate\n")
    return path


def ca_file() -> str:
    """A CA bundle that loads: the system's, or Python's default one."""
    paths = ssl.get_default_verify_paths()
    for candidate in (SYSTEM_CA, paths.cafile, paths.openssl_cafile):
        if candidate and Path(candidate).is_file():
            return candidate
    missing("no CA bundle on this machine (Debian: ca-certificates)")


# -- settings ---------------------------------------------------------------------------------

# (id, env, the variable named first, words of the message)
BAD = [
    (
        "cluster and sentinel",
        {"REDIS_CLUSTER": "true", "REDIS_SENTINELS": "a:26379", "REDIS_SENTINEL_MASTER": "m"},
        "REDIS_SENTINELS",
        "cannot be combined with REDIS_CLUSTER=true",
    ),
    (
        "sentinels without a master name",
        {"REDIS_SENTINELS": "a:26379"},
        "REDIS_SENTINEL_MASTER",
        "required with REDIS_SENTINELS",
    ),
    (
        "a master name without sentinels",
        {"REDIS_SENTINEL_MASTER": "mymaster"},
        "REDIS_SENTINELS",
        "required with REDIS_SENTINEL_MASTER",
    ),
    (
        "a sentinel without a port",
        {"REDIS_SENTINELS": "a:26379,b", "REDIS_SENTINEL_MASTER": "m"},
        "REDIS_SENTINELS",
        "entry 2 'b' is not host:port",
    ),
    (
        "an empty sentinel entry",
        {"REDIS_SENTINELS": "a:1,,b:2", "REDIS_SENTINEL_MASTER": "m"},
        "REDIS_SENTINELS",
        "entry 2 '' is empty",
    ),
    (
        "a sentinel port out of range",
        {"REDIS_SENTINELS": "a:70000", "REDIS_SENTINEL_MASTER": "m"},
        "REDIS_SENTINELS",
        "entry 1 'a:70000' has a port outside 1-65535",
    ),
    (
        "a master name with a space",
        {"REDIS_SENTINELS": "a:1", "REDIS_SENTINEL_MASTER": "my m"},
        "REDIS_SENTINEL_MASTER",
        "without spaces",
    ),
    (
        "a URL with sentinels",
        {
            "REDIS_SENTINELS": "a:1",
            "REDIS_SENTINEL_MASTER": "m",
            "REDIS_URL": "redis://cache:6379/0",
        },
        "REDIS_URL",
        "not used with REDIS_SENTINELS",
    ),
    (
        "a host with sentinels",
        {"REDIS_SENTINELS": "a:1", "REDIS_SENTINEL_MASTER": "m", "REDIS_HOST": "cache"},
        "REDIS_HOST",
        "not used with REDIS_SENTINELS",
    ),
    (
        "cluster over a unix socket",
        {"REDIS_CLUSTER": "true", "REDIS_URL": "unix:///run/r.sock"},
        "REDIS_URL",
        "unix:// socket cannot be used with REDIS_CLUSTER=true",
    ),
    (
        "cluster with a database",
        {"REDIS_CLUSTER": "true", "REDIS_URL": "redis://node:7000/2"},
        "REDIS_URL",
        "selects database 2, but a Redis Cluster has database 0 only",
    ),
    ("cluster not a boolean", {"REDIS_CLUSTER": "sometimes"}, "REDIS_CLUSTER", "valid boolean"),
    (
        "a CA file that does not exist",
        {"REDIS_TLS_CA_FILE": "/nonexistent/ca.pem"},
        "REDIS_TLS_CA_FILE",
        "no such file: /nonexistent/ca.pem",
    ),
    (
        "a CA file that is a directory",
        {"REDIS_TLS_CA_FILE": "/"},
        "REDIS_TLS_CA_FILE",
        "not a readable file",
    ),
    (
        "a key file that does not exist",
        {"REDIS_TLS_KEY_FILE": "/nonexistent/k.pem"},
        "REDIS_TLS_KEY_FILE",
        "no such file",
    ),
]


@pytest.mark.parametrize(("env", "name", "expected"), [pytest.param(*c[1:], id=c[0]) for c in BAD])
def test_bad_connection_settings_are_named(env: dict[str, str], name: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(env)
    message = str(info.value)
    assert f"  {name}: " in message
    assert expected in message
    assert info.value.exit_code == 2


def test_a_certificate_needs_its_key_and_a_key_its_certificate(pem: Path) -> None:
    with pytest.raises(ConfigError, match="REDIS_TLS_KEY_FILE: required with REDIS_TLS_CERT_FILE"):
        load_settings({"REDIS_TLS_CERT_FILE": str(pem)})
    with pytest.raises(ConfigError, match="REDIS_TLS_CERT_FILE: required with REDIS_TLS_KEY_FILE"):
        load_settings({"REDIS_TLS_KEY_FILE": str(pem)})


def test_files_that_are_not_pem_are_named(pem: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({"REDIS_TLS_CA_FILE": str(pem)})
    assert f"REDIS_TLS_CA_FILE: {pem} does not load as PEM CA certificates" in str(info.value)
    with pytest.raises(ConfigError) as info:
        load_settings({"REDIS_TLS_CERT_FILE": str(pem), "REDIS_TLS_KEY_FILE": str(pem)})
    assert "REDIS_TLS_CERT_FILE:" in str(info.value)
    assert "unencrypted private key" in str(info.value)


@pytest.mark.parametrize(
    "url", [f"redis://:{PASSWORD}@cache:6379/0", f"unix://:{PASSWORD}@/run/redis.sock"]
)
def test_tls_files_with_a_plain_url_are_refused_never_a_silent_downgrade(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({"REDIS_URL": url, "REDIS_TLS_CA_FILE": ca_file()})
    message = str(info.value)
    assert "REDIS_URL: is " in message
    assert "REDIS_TLS_CA_FILE" in message
    assert PASSWORD not in message


def test_every_cross_setting_problem_in_one_message() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(
            {"REDIS_CLUSTER": "true", "REDIS_SENTINELS": "a:1", "REDIS_URL": "redis://x:1/0"}
        )
    lines = str(info.value).splitlines()
    assert lines[0] == "invalid configuration:"
    assert [line.split(":")[0].strip() for line in lines[1:]] == [
        "REDIS_SENTINELS",
        "REDIS_SENTINEL_MASTER",
        "REDIS_URL",
    ]


@pytest.mark.parametrize(
    "env",
    [
        pytest.param(
            {"REDIS_SENTINELS": f"a:1,:{PASSWORD}@b:2", "REDIS_SENTINEL_MASTER": "m"},
            id="credentials in a sentinel entry",
        ),
        pytest.param(
            {"REDIS_SENTINELS": f"{PASSWORD}@b:2", "REDIS_SENTINEL_MASTER": "m"},
            id="an entry that is all secret",
        ),
        pytest.param(
            {"REDIS_CLUSTER": "true", "REDIS_URL": f"redis://:{PASSWORD}@n:7000/3"},
            id="cluster database, password in the URL",
        ),
        pytest.param(
            {
                "REDIS_SENTINELS": "a:1",
                "REDIS_SENTINEL_MASTER": "m",
                "REDIS_URL": f"rediss://u:{PASSWORD}@n:7000/0",
                "REDIS_PASSWORD": PASSWORD,
            },
            id="URL with sentinels",
        ),
    ],
)
def test_no_secret_in_connection_setting_errors(env: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(env)
    assert PASSWORD not in str(info.value)
    assert "REDIS_" in str(info.value)


# (id, env, endpoint, mode, tls)
ENDPOINTS = [
    ("standalone", {"REDIS_HOST": "10.0.0.5"}, "redis://10.0.0.5:6379/0", "standalone", False),
    (
        "TLS by URL",
        {"REDIS_URL": f"rediss://bot:{PASSWORD}@cache:6390/1"},
        "rediss://cache:6390/1",
        "standalone",
        True,
    ),
    (
        "TLS by CA file",
        {"REDIS_HOST": "cache", "REDIS_TLS_CA_FILE": "<ca>"},
        "rediss://cache:6379/0",
        "standalone",
        True,
    ),
    (
        "IPv6",
        {"REDIS_URL": f"redis://:{PASSWORD}@[::1]:6390/0"},
        "redis://[::1]:6390/0",
        "standalone",
        False,
    ),
    (
        "cluster by URL",
        {"REDIS_CLUSTER": "true", "REDIS_URL": f"redis://:{PASSWORD}@n1:7000"},
        "redis-cluster://n1:7000",
        "cluster",
        False,
    ),
    (
        "cluster by host",
        {"REDIS_CLUSTER": "1", "REDIS_HOST": "n2", "REDIS_PORT": "7001"},
        "redis-cluster://n2:7001",
        "cluster",
        False,
    ),
    (
        "cluster with TLS",
        {"REDIS_CLUSTER": "true", "REDIS_URL": f"rediss://:{PASSWORD}@n1:7000/0"},
        "redis-cluster+tls://n1:7000",
        "cluster",
        True,
    ),
    (
        "sentinel",
        {"REDIS_SENTINELS": "s1:26379, s2:26379,s1:26379", "REDIS_SENTINEL_MASTER": "mymaster"},
        "sentinel://s1:26379,s2:26379/mymaster",
        "sentinel",
        False,
    ),
    (
        "sentinel with TLS",
        {
            "REDIS_SENTINELS": "[fd00::1]:26379",
            "REDIS_SENTINEL_MASTER": "m",
            "REDIS_TLS_CA_FILE": "<ca>",
        },
        "sentinel+tls://[fd00::1]:26379/m",
        "sentinel",
        True,
    ),
]


@pytest.mark.parametrize(
    ("env", "endpoint", "mode", "tls"), [pytest.param(*c[1:], id=c[0]) for c in ENDPOINTS]
)
def test_the_endpoint_says_the_mode_and_never_the_password(
    env: dict[str, str], endpoint: str, mode: str, tls: bool
) -> None:
    env = {k: ca_file() if v == "<ca>" else v for k, v in env.items()}
    s = load_settings({**env, "REDIS_PASSWORD": PASSWORD})
    assert (s.endpoint, s.mode, s.tls) == (endpoint, mode, tls)
    assert PASSWORD not in repr(s.redacted())
    assert PASSWORD not in repr(s)


def test_the_password_in_the_url_is_a_secret_to_scrub() -> None:
    s = load_settings({"REDIS_URL": f"redis://user:{PASSWORD}@cache:6379/0"})
    assert PASSWORD in secrets_of(s)
    s = load_settings({"REDIS_URL": f"redis://cache:6379/0?password={PASSWORD}"})
    assert PASSWORD in secrets_of(s)


# -- the client each mode builds (no I/O) -----------------------------------------------------


def test_standalone_with_tls_verifies_the_certificate_and_the_host_name() -> None:
    ca = ca_file()
    client = make_client(
        load_settings({"REDIS_HOST": "cache", "REDIS_TLS_CA_FILE": ca, "REDIS_PASSWORD": PASSWORD})
    )
    assert isinstance(client, redis.Redis)
    assert not is_cluster(client)
    pool = client.connection_pool
    assert pool.connection_class is SSLConnection
    kw = pool.connection_kwargs
    assert (kw["ssl_ca_certs"], kw["ssl_cert_reqs"], kw["ssl_check_hostname"]) == (
        ca,
        "required",
        True,
    )
    assert kw["password"] == PASSWORD
    client.close()


def test_a_plain_url_builds_a_plain_client() -> None:
    client = make_client(load_settings({"REDIS_URL": "redis://cache:6379/0"}))
    assert client.connection_pool.connection_class is redis.Connection  # type: ignore[union-attr]
    assert "ssl_ca_certs" not in client.connection_pool.connection_kwargs  # type: ignore[union-attr]


def test_sentinel_builds_a_client_of_the_primary_with_the_same_options() -> None:
    ca = ca_file()
    settings = load_settings(
        {
            "REDIS_SENTINELS": "127.0.0.1:1,127.0.0.1:2",
            "REDIS_SENTINEL_MASTER": "mymaster",
            "REDIS_PASSWORD": PASSWORD,
            "REDIS_TLS_CA_FILE": ca,
            "LOCKGUARD_REDIS_TIMEOUT_SECONDS": "2",
        }
    )
    client = make_client(settings)
    assert isinstance(client, redis.Redis)
    assert not is_cluster(client)
    pool = client.connection_pool
    assert isinstance(pool, SentinelConnectionPool)
    assert pool.service_name == "mymaster"
    assert pool.is_master
    assert issubclass(pool.connection_class, SSLConnection)
    kw = pool.connection_kwargs
    assert kw["password"] == PASSWORD
    assert kw["socket_timeout"] == 2
    assert kw["socket_connect_timeout"] == 2
    assert kw["decode_responses"] is False
    assert (kw["ssl_ca_certs"], kw["ssl_cert_reqs"], kw["ssl_check_hostname"]) == (
        ca,
        "required",
        True,
    )
    assert kw["retry"].get_retries() == 1
    sentinel_kw = pool.sentinel_manager.sentinel_kwargs
    assert sentinel_kw["ssl"] is True
    assert "password" not in sentinel_kw
    assert [
        s.connection_pool.connection_kwargs["port"] for s in pool.sentinel_manager.sentinels
    ] == [1, 2]
    client.close()


# -- errors that say what to change -----------------------------------------------------------


def test_a_cluster_reply_without_cluster_mode_says_to_set_redis_cluster() -> None:
    err = describe(redis.exceptions.MovedError("3999 127.0.0.1:7001"), "redis://n1:7000/0")
    assert "is a Redis Cluster node (MOVED)" in str(err)
    assert "set REDIS_CLUSTER=true" in str(err)
    assert err.exit_code == 3


@pytest.mark.parametrize(
    ("exc", "words"),
    [
        (
            redis.exceptions.MovedError("3999 127.0.0.1:7001"),
            "slots moved (resharding or failover)",
        ),
        (redis.exceptions.AskError("3999 127.0.0.1:7001"), "run it again"),
        (redis.exceptions.TryAgainError("TRYAGAIN"), "run it again"),
        (redis.exceptions.ClusterDownError("The cluster is down"), "cluster_state:ok"),
        (
            redis.exceptions.ClusterCrossSlotError("Keys in request don't hash to the same slot"),
            "a lockguard bug",
        ),
    ],
)
def test_cluster_replies_in_cluster_mode(exc: redis.RedisError, words: str) -> None:
    err = describe(exc, "redis-cluster://n1:7000")
    assert words in str(err)
    assert "set REDIS_CLUSTER" not in str(err)
    assert err.exit_code == 3


def test_no_primary_from_the_sentinels() -> None:
    at = "sentinel://s1:26379,s2:26379/mymaster"
    err = describe(MasterNotFoundError("No master found for 'mymaster'"), at)
    assert f"the sentinels at {at} name no healthy primary for REDIS_SENTINEL_MASTER" in str(err)
    assert isinstance(err, RedisUnavailableError)
    some = describe(
        MasterNotFoundError(
            "No master found for 'mymaster' : <Redis s1> - ConnectionError('refused')"
        ),
        at,
    )
    assert "1 of the 2 sentinels did not answer" in str(some)
    down = describe(
        MasterNotFoundError(
            "No master found for 'mymaster' : <Redis s1> - network:ConnectionError, "
            "<Redis s2> - TimeoutError('x')"
        ),
        at,
    )
    assert str(down) == f"cannot reach any of the sentinels at {at} (REDIS_SENTINELS)"


# -- a real Redis Cluster ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[ClusterSet]:
    with ClusterSet() as c:
        yield c


def first_moved(client: redis.Redis) -> redis.exceptions.MovedError:
    for i in range(200):
        try:
            client.get(f"lock:{i}".encode())
        except redis.exceptions.MovedError as exc:
            return exc
    raise AssertionError("every key on one node")


@pytest.mark.parametrize("by", ["url", "host"])
def test_cluster_mode_builds_a_redis_cluster_from_one_node(cluster: ClusterSet, by: str) -> None:
    port = cluster.ports[1]
    env = (
        {"REDIS_URL": f"redis://127.0.0.1:{port}"}
        if by == "url"
        else {"REDIS_HOST": "127.0.0.1", "REDIS_PORT": str(port)}
    )
    settings = load_settings({"REDIS_CLUSTER": "true", **env})
    client = make_client(settings)
    try:
        assert isinstance(client, RedisCluster)
        assert is_cluster(client)
        assert sorted(n.port for n in client.get_primaries()) == sorted(cluster.ports)
        for i in range(30):  # keys on every node, routed by slot
            client.set(f"lock:{i}".encode(), b"x", px=60_000)
        assert client.get(b"lock:7") == b"x"
        assert settings.endpoint == f"redis-cluster://127.0.0.1:{port}"
        engine = build_engine(settings)
        assert is_cluster(engine.client)
        assert engine.endpoint == settings.endpoint
    finally:
        client.close()


def test_a_cluster_node_without_cluster_mode_says_to_set_redis_cluster(cluster: ClusterSet) -> None:
    settings = load_settings({"REDIS_URL": f"redis://127.0.0.1:{cluster.ports[0]}/0"})
    engine = build_engine(settings)
    assert not is_cluster(engine.client)
    err = describe(first_moved(engine.client), settings.endpoint)  # a key on another node
    assert "set REDIS_CLUSTER=true" in str(err)


def test_cluster_mode_against_a_standalone_redis_is_exit_2() -> None:
    with start() as plain:
        settings = load_settings(
            {"REDIS_CLUSTER": "true", "REDIS_URL": f"redis://127.0.0.1:{plain.port}"}
        )
        with pytest.raises(ConfigError) as info:
            make_client(settings)
    assert "REDIS_CLUSTER=true, but Redis at redis-cluster://127.0.0.1:" in str(info.value)
    assert "is not a Redis Cluster node" in str(info.value)


def test_an_unreachable_cluster_is_exit_3_without_the_password() -> None:
    settings = load_settings(
        {
            "REDIS_CLUSTER": "true",
            "LOCKGUARD_REDIS_TIMEOUT_SECONDS": "1",
            "REDIS_URL": f"redis://:{PASSWORD}@127.0.0.1:{free_port()}",
        }
    )
    with pytest.raises(RedisUnavailableError) as info:
        make_client(settings)
    assert "cannot reach the Redis Cluster at redis-cluster://127.0.0.1:" in str(info.value)
    assert PASSWORD not in str(info.value)
    assert info.value.exit_code == 3
