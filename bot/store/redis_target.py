"""Where Redis is and how to reach it: the REDIS_* settings, checked at load.

`RedisTarget` (which `Settings` extends) derives the mode, the address, the database and
`endpoint`, the form every message names Redis by (never the password). A contradictory or
incomplete combination is refused at load, one `VARIABLE: why` line each, before Redis is touched.
"""

from __future__ import annotations

import os
import re
import ssl
from typing import Literal
from urllib.parse import parse_qs, unquote, urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# `host:port` or `[v6 address]:port`: a REDIS_SENTINELS entry.
_HOST_PORT = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>[0-9]{1,5})")
_TLS_ENV = ("REDIS_TLS_CA_FILE", "REDIS_TLS_CERT_FILE", "REDIS_TLS_KEY_FILE")


class RedisTarget(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        populate_by_name=True,
        case_sensitive=False,
    )

    # repr=False: the URL may carry the password.
    redis_url: str | None = Field(default=None, alias="REDIS_URL", repr=False)
    redis_host: str = Field(default="localhost", alias="REDIS_HOST")
    redis_port: int = Field(default=6379, alias="REDIS_PORT", gt=0, lt=65536)
    redis_password: SecretStr | None = Field(default=None, alias="REDIS_PASSWORD")
    redis_timeout_seconds: float = Field(
        default=5.0, alias="LOCKGUARD_REDIS_TIMEOUT_SECONDS", gt=0, le=300, allow_inf_nan=False
    )
    # At most one of the two modes (docs/topologies.md); TLS goes with any of the three.
    redis_cluster: bool = Field(default=False, alias="REDIS_CLUSTER")
    redis_sentinels: str = Field(default="", alias="REDIS_SENTINELS")
    redis_sentinel_master: str | None = Field(default=None, alias="REDIS_SENTINEL_MASTER")
    redis_tls_ca_file: str | None = Field(default=None, alias="REDIS_TLS_CA_FILE")
    redis_tls_cert_file: str | None = Field(default=None, alias="REDIS_TLS_CERT_FILE")
    redis_tls_key_file: str | None = Field(default=None, alias="REDIS_TLS_KEY_FILE")

    @field_validator("redis_host")
    @classmethod
    def _host_not_empty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("expected a host name, got an empty value")
        return v.strip()

    @field_validator("redis_url")
    @classmethod
    def _url_shape(cls, v: str | None) -> str | None:
        """REDIS_URL stripped (None when blank); an error never quotes it (the password)."""
        if v is None or not v.strip():
            return None
        try:
            parts = urlsplit(v.strip())
        except ValueError:  # its message quotes the netloc, password included
            raise ValueError("expected redis://[:password@]host[:port][/db]") from None
        if parts.scheme not in ("redis", "rediss", "unix"):
            raise ValueError("expected redis://[:password@]host[:port][/db], rediss:// or unix://")
        if parts.scheme != "unix" and not parts.hostname:
            raise ValueError("expected a host in the URL, e.g. redis://localhost:6379/0")
        try:
            port = parts.port
        except ValueError:
            port = 0
        if port == 0:
            raise ValueError("expected a port number between 1 and 65535 in the URL")
        return v.strip()

    @field_validator("redis_sentinels")
    @classmethod
    def _sentinels_shape(cls, v: str) -> str:
        parse_sentinels(v)  # raises ValueError naming the bad entry
        return v.strip()

    @field_validator("redis_sentinel_master")
    @classmethod
    def _master_name(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            return None
        name = v.strip()
        if len(name) > 200 or any(c.isspace() or not c.isprintable() for c in name):
            raise ValueError(
                "expected the name the sentinels monitor the primary as (`sentinel "
                "monitor <name> ...`), without spaces"
            )
        return name

    @field_validator("redis_tls_ca_file", "redis_tls_cert_file", "redis_tls_key_file")
    @classmethod
    def _readable_file(cls, v: str | None) -> str | None:
        """The path, `~` expanded (None when blank); missing or unreadable: ValueError."""
        if v is None or not v.strip():
            return None
        path = os.path.expanduser(v.strip())
        if not os.path.exists(path):
            raise ValueError(f"no such file: {path}")
        if not os.path.isfile(path) or not os.access(path, os.R_OK):
            raise ValueError(f"not a readable file: {path}")
        return path

    @model_validator(mode="after")
    def _topology(self) -> RedisTarget:
        """Contradictory or incomplete connection settings, one `VARIABLE: why` line each."""
        problems = _sentinel_problems(self) + _cluster_problems(self) + _tls_problems(self)
        if problems:
            raise ValueError("\n".join(problems))
        return self

    @property
    def tls(self) -> bool:
        """REDIS_URL is rediss://, or (without one) a REDIS_TLS_* file is given. REDIS_TLS_* next
        to a redis:// URL is refused at load, never a silent downgrade."""
        if self.redis_url:
            return urlsplit(self.redis_url).scheme == "rediss"
        return any(getattr(self, env.lower()) for env in _TLS_ENV)

    @property
    def mode(self) -> Literal["standalone", "cluster", "sentinel"]:
        if self.redis_sentinels:
            return "sentinel"
        return "cluster" if self.redis_cluster else "standalone"

    @property
    def sentinel_addresses(self) -> list[tuple[str, int]]:
        return parse_sentinels(self.redis_sentinels)

    @property
    def host_port(self) -> tuple[str, int]:
        """The one server (standalone) or the node to discover the cluster from."""
        if self.redis_url:
            parts = urlsplit(self.redis_url)
            return parts.hostname or "", parts.port or 6379
        return self.redis_host, self.redis_port

    @property
    def db(self) -> int:
        """The database REDIS_URL selects (its path, or `?db=`), else 0."""
        if not self.redis_url:
            return 0
        parts = urlsplit(self.redis_url)
        text = (parse_qs(parts.query).get("db") or [""])[0] or (
            parts.path.lstrip("/") if parts.scheme != "unix" else ""
        )
        return int(text) if text.isdigit() else 0

    @property
    def url_password(self) -> str | None:
        """The password inside REDIS_URL (userinfo or `?password=`), for scrubbing only."""
        if not self.redis_url:
            return None
        parts = urlsplit(self.redis_url)
        found = parts.password or (parse_qs(parts.query).get("password") or [""])[0]
        return unquote(found) if found else None

    @property
    def endpoint(self) -> str:
        """Where Redis is, for messages, saying the mode (docs/topologies.md): `redis://host:port/db`,
        `unix:/path`, `redis-cluster://host:port`, `sentinel://h1:p1,h2:p2/name`, with `rediss`
        or `+tls` for TLS. Never the password."""
        tls = "+tls" if self.tls else ""
        if self.mode == "sentinel":
            hosts = ",".join(_host_port_text(h, p) for h, p in self.sentinel_addresses)
            return f"sentinel{tls}://{hosts}/{self.redis_sentinel_master}"
        if self.redis_url and urlsplit(self.redis_url).scheme == "unix":
            return f"unix:{urlsplit(self.redis_url).path}"
        host, port = self.host_port
        if self.mode == "cluster":
            return f"redis-cluster{tls}://{_host_port_text(host, port)}"
        scheme = "rediss" if self.tls else "redis"
        db = urlsplit(self.redis_url).path.lstrip("/") if self.redis_url else ""
        return f"{scheme}://{_host_port_text(host, port)}/{db or '0'}"


def parse_sentinels(text: str) -> list[tuple[str, int]]:
    """`10.0.0.1:26379, [::1]:26380` -> [("10.0.0.1", 26379), ("::1", 26380)], duplicates dropped.
    A bad entry is named by its position, quoted unless it holds an `@` (credentials)."""
    out: list[tuple[str, int]] = []
    items = [s.strip() for s in text.split(",")] if text.strip() else []
    for i, item in enumerate(items, 1):
        m = _HOST_PORT.fullmatch(item)
        port = int(m["port"]) if m else 0
        if m is None or not 0 < port < 65536:
            shown = "" if "@" in item else f" {item[:60]!r}"
            what = (
                "is empty"
                if not item
                else ("has a port outside 1-65535" if m else "is not host:port")
            )
            raise ValueError(
                f"expected comma-separated host:port of the sentinels, e.g. "
                f"10.0.0.1:26379,10.0.0.2:26379; entry {i}{shown} {what}"
            )
        entry = (m["host"].strip("[]"), port)
        if entry not in out:
            out.append(entry)
    return out


def _host_port_text(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _no_key_password() -> bytes:
    """For `load_cert_chain`: an encrypted key fails at once instead of prompting on a TTY."""
    raise ValueError("the private key is encrypted")


def _ssl_reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    if isinstance(exc, ssl.SSLError) and reason:
        return str(reason)
    return (str(exc.args[-1]) if exc.args else type(exc).__name__)[:120]


def _sentinel_problems(t: RedisTarget) -> list[str]:
    out: list[str] = []
    sentinels = bool(t.redis_sentinels)
    if t.redis_cluster and sentinels:
        out.append(
            "REDIS_SENTINELS: cannot be combined with REDIS_CLUSTER=true (a Redis "
            "Cluster fails over by itself, without Sentinel); set one or the other"
        )
    if sentinels and not t.redis_sentinel_master:
        out.append(
            "REDIS_SENTINEL_MASTER: required with REDIS_SENTINELS: the name the "
            "sentinels monitor the primary as (`sentinel monitor <name> ...`)"
        )
    if t.redis_sentinel_master and not sentinels:
        out.append(
            "REDIS_SENTINELS: required with REDIS_SENTINEL_MASTER: the sentinels' "
            "comma-separated host:port, e.g. 10.0.0.1:26379,10.0.0.2:26379"
        )
    if sentinels:
        for field, env in (
            ("redis_url", "REDIS_URL"),
            ("redis_host", "REDIS_HOST"),
            ("redis_port", "REDIS_PORT"),
        ):
            if field in t.model_fields_set and getattr(t, field) is not None:
                hint = (
                    " (its password goes in REDIS_PASSWORD; REDIS_TLS_CA_FILE turns TLS on)"
                    if env == "REDIS_URL"
                    else ""
                )
                out.append(
                    f"{env}: not used with REDIS_SENTINELS: the sentinels say where "
                    f"the primary is; unset it{hint}"
                )
    return out


def _scheme(t: RedisTarget) -> str:
    return urlsplit(t.redis_url).scheme if t.redis_url else ""


def _cluster_problems(t: RedisTarget) -> list[str]:
    if t.redis_cluster and _scheme(t) == "unix":
        return [
            "REDIS_URL: a Redis Cluster is reached over TCP; a unix:// socket cannot "
            "be used with REDIS_CLUSTER=true"
        ]
    if t.redis_cluster and t.db != 0:
        return [f"REDIS_URL: selects database {t.db}, but a Redis Cluster has database 0 only"]
    return []


def _tls_problems(t: RedisTarget) -> list[str]:
    out: list[str] = []
    scheme = _scheme(t)
    tls_given = [env for env in _TLS_ENV if getattr(t, env.lower())]
    if tls_given and scheme == "redis":
        out.append(
            f"REDIS_URL: is redis:// (no TLS), but {' and '.join(tls_given)} "
            f"{'is' if len(tls_given) == 1 else 'are'} set: use rediss:// for TLS, "
            "or unset REDIS_TLS_* (lockguard never falls back to plain text)"
        )
    elif tls_given and scheme == "unix":
        out.append(
            f"REDIS_URL: is a unix:// socket, which has no TLS, but "
            f"{' and '.join(tls_given)} {'is' if len(tls_given) == 1 else 'are'} "
            "set; unset REDIS_TLS_*"
        )
    cert, key = t.redis_tls_cert_file, t.redis_tls_key_file
    if cert and not key:
        out.append(
            "REDIS_TLS_KEY_FILE: required with REDIS_TLS_CERT_FILE (the private key "
            "of that client certificate)"
        )
    elif key and not cert:
        out.append(
            "REDIS_TLS_CERT_FILE: required with REDIS_TLS_KEY_FILE (the client "
            "certificate of that key)"
        )
    if tls_given:
        out += _tls_files_problems(t.redis_tls_ca_file, cert, key)
    return out


def _tls_files_problems(ca: str | None, cert: str | None, key: str | None) -> list[str]:
    """The TLS files loaded as the connection will load them: each that does not load, named."""
    out: list[str] = []
    context = ssl.create_default_context()
    if ca:
        try:
            context.load_verify_locations(cafile=ca)
        except (ssl.SSLError, OSError, ValueError) as exc:
            out.append(
                f"REDIS_TLS_CA_FILE: {ca} does not load as PEM CA certificates ({_ssl_reason(exc)})"
            )
    if cert and key:
        try:
            context.load_cert_chain(cert, key, password=_no_key_password)
        except (ssl.SSLError, OSError, ValueError) as exc:
            out.append(
                f"REDIS_TLS_CERT_FILE: {cert} and REDIS_TLS_KEY_FILE {key} do not "
                "load as a PEM certificate and its unencrypted private key "
                f"({_ssl_reason(exc)})"
            )
    return out
