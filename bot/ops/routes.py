"""The route abstraction of lockguard's HTTP server: `Request` in, `Response` out.

A route is `(method, path) -> handler`; a handler is any `Callable[[Request], Response]`. Handlers
know nothing of `http.server`: they get the method, the path (without the query string), the parsed
query, case-insensitive headers and the raw body bytes, and return a status, headers and body
bytes. That keeps the Slack adapter, the webhook, health and metrics testable as plain functions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

HeaderInput = Mapping[str, str] | Iterable[tuple[str, str]]


class Headers(Mapping[str, str]):
    """HTTP headers: case-insensitive names, one or more values per name, arrival order kept.

    `headers["Content-Type"]` and `headers.get("content-type")` give the first value;
    `get_all(name)` gives every value. Iterating yields each distinct name once, lower-cased.
    """

    __slots__ = ("_items",)

    def __init__(self, items: HeaderInput = ()) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        self._items: tuple[tuple[str, str], ...] = tuple((str(k), str(v)) for k, v in pairs)

    def __getitem__(self, name: str) -> str:
        wanted = name.lower()
        for key, value in self._items:
            if key.lower() == wanted:
                return value
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        seen: dict[str, None] = {}
        for key, _ in self._items:
            seen.setdefault(key.lower(), None)
        return iter(seen)

    def __len__(self) -> int:
        return len({key.lower() for key, _ in self._items})

    def __repr__(self) -> str:
        return f"Headers({list(self._items)!r})"

    def get_all(self, name: str) -> list[str]:
        wanted = name.lower()
        return [value for key, value in self._items if key.lower() == wanted]

    def pairs(self) -> list[tuple[str, str]]:
        """Every (name, value) as received or given, names in their original case."""
        return list(self._items)

    def to_multi(self) -> dict[str, list[str]]:
        """`{lower-case name: [values...]}`, the shape Bolt and most adapters take."""
        out: dict[str, list[str]] = {}
        for key, value in self._items:
            out.setdefault(key.lower(), []).append(value)
        return out

    def with_default(self, name: str, value: str) -> Headers:
        """These headers plus `name: value` unless `name` is already present."""
        return self if name in self else Headers([*self._items, (name, value)])


@dataclass(frozen=True)
class Request:
    """One HTTP request as a handler sees it. `path` excludes the query string; `query` maps each
    name to all its values (blank values kept); `body` is the raw bytes, exactly as received."""

    method: str
    path: str
    query: Mapping[str, list[str]] = field(default_factory=dict)
    headers: Headers = field(default_factory=Headers)
    body: bytes = b""
    query_string: str = ""
    remote_addr: str = ""

    def text(self, encoding: str = "utf-8") -> str:
        """The body decoded, strictly (UnicodeDecodeError on bytes that are not `encoding`)."""
        return self.body.decode(encoding)


@dataclass(frozen=True)
class Response:
    """What a handler returns. The server adds `Content-Length`; a missing `Content-Type` becomes
    `application/octet-stream` unless the body is empty."""

    status: int
    body: bytes = b""
    headers: Headers = field(default_factory=Headers)

    @classmethod
    def json(cls, status: int, value: Any, headers: HeaderInput = ()) -> Response:
        body = json.dumps(value, separators=(",", ":"), sort_keys=True).encode("utf-8")
        return cls(
            status,
            body,
            Headers(headers).with_default("Content-Type", "application/json; charset=utf-8"),
        )

    @classmethod
    def text(
        cls,
        status: int,
        text: str,
        content_type: str = "text/plain; charset=utf-8",
        headers: HeaderInput = (),
    ) -> Response:
        return cls(
            status,
            text.encode("utf-8"),
            Headers(headers).with_default("Content-Type", content_type),
        )


Handler = Callable[[Request], Response]


@dataclass(frozen=True)
class Route:
    """`method` is upper-cased HTTP (GET, POST, ...); `path` is matched exactly (no patterns)."""

    method: str
    path: str
    handler: Handler

    def __post_init__(self) -> None:
        if not self.path.startswith("/"):
            raise ValueError(f"route path must start with '/': {self.path!r}")
        object.__setattr__(self, "method", self.method.upper())


class RouteTable:
    """Exact-match lookup of (method, path). `resolve` returns the handler, or the methods the path
    does allow (empty when the path is unknown), so the server can answer 404 or 405 + Allow."""

    def __init__(self, routes: Iterable[Route]) -> None:
        self._by_path: dict[str, dict[str, Handler]] = {}
        for route in routes:
            methods = self._by_path.setdefault(route.path, {})
            if route.method in methods:
                raise ValueError(f"duplicate route: {route.method} {route.path}")
            methods[route.method] = route.handler

    def resolve(self, method: str, path: str) -> tuple[Handler | None, list[str]]:
        methods = self._by_path.get(path, {})
        handler = methods.get(method.upper())
        if handler is None and method.upper() == "HEAD":
            handler = methods.get("GET")
        return handler, sorted(methods)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        for path, methods in self._by_path.items():
            for method in methods:
                yield method, path


def error_response(status: int, error: str, headers: HeaderInput = ()) -> Response:
    """The server's own error bodies, `{"error": "<code word>"}`: nothing from an exception."""
    return Response.json(status, {"error": error}, headers)
