"""Hostile sources (issue #12): slow, huge, broken or lying servers on 127.0.0.1.

Each one must end as a classified SourceError of its own trunk, within the deadline and
without blowing up memory, while the next trunk of the same poll is still polled and written.
"Within the deadline" is asserted through the deadline mechanism (which deadline each HTTP
client was given, which one a timeout reports), never on the wall clock, so a busy machine
cannot fail these tests; memory is the peak tracemalloc sees, which a test can exceed.
"""

from __future__ import annotations

import gzip
import http.client
import io
import json
import re
import socket
import socketserver
import threading
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.support.aws import table_items
from tests.support.hud import HOSTILE_TOKEN, grid, two_trunks
from tests.support.polls import poll_each
from trunkwatch.app import poll
from trunkwatch.domain.config import load_deployment
from trunkwatch.net.http import HttpClient, Response, retry_after_seconds, says_rate_limited
from trunkwatch.sources.base import SourceError
from trunkwatch.sources.hud import HudSource
from trunkwatch_local.hud_server import HudServer

NOW = datetime(2026, 11, 18, 20, 0, tzinfo=UTC)
TOKEN = HOSTILE_TOKEN
MIB = 1024 * 1024
# The peak of Python's allocations while one hostile answer is read: the client caps a body at
# 32 MiB (inflated); about 56 MiB measured. An uncapped gzip bomb would inflate to 400 MiB.
PEAK_LIMIT = 100 * MIB


def _gzip_bomb(inflated: int = 400 * MIB) -> bytes:
    """gzip of `inflated` zero bytes (about 400 KB), built without holding them in memory."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as writer:
        block = bytes(MIB)
        for _ in range(inflated // MIB):
            writer.write(block)
    return out.getvalue()


BOMB = _gzip_bomb()


def _head(status: str, headers: dict[str, str]) -> bytes:
    lines = [status, *(f"{k}: {v}" for k, v in headers.items()), "", ""]
    return "\r\n".join(lines).encode()


def _send_short_body(conn: socket.socket) -> None:
    conn.sendall(_head("HTTP/1.1 200 OK", {"Content-Length": "5000"}) + b'{"jobNames": [')


def _send_bad_status(conn: socket.socket) -> None:
    conn.sendall(b"THIS IS NOT HTTP\r\n\r\n")


def _send_no_status(conn: socket.socket) -> None:
    pass  # close without a word: RemoteDisconnected


def _send_nested_json(conn: socket.socket) -> None:
    body = b"[" * 200_000 + b"]" * 200_000
    conn.sendall(_head("HTTP/1.1 200 OK", {"Content-Length": str(len(body))}) + body)


def _timed_out_after(error: SourceError) -> float:
    """The deadline a timeout reports: how long its request was allowed, not how long it took."""
    assert error.kind == "timeout", str(error)
    match = re.search(r"timed out after ([0-9.e+-]+)s", str(error))
    assert match, str(error)
    return float(match[1])


def _send_trickle(conn: socket.socket) -> None:
    conn.sendall(_head("HTTP/1.1 200 OK", {"Content-Length": "100000"}))
    for _ in range(100):
        conn.sendall(b" ")
        time.sleep(1.5)


def _send_trickled_headers(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    for _ in range(100):
        conn.sendall(b"X-Slow: 1\r\n")
        time.sleep(1.5)


def _send_gzip_bomb(conn: socket.socket) -> None:
    conn.sendall(
        _head(
            "HTTP/1.1 200 OK",
            {"Content-Length": str(len(BOMB)), "Content-Encoding": "gzip"},
        )
        + BOMB
    )


def _send_endless(conn: socket.socket) -> None:
    conn.sendall(_head("HTTP/1.1 200 OK", {"Connection": "close"}))
    block = b" " * 65536
    for _ in range(1024):  # 64 MiB, no Content-Length
        conn.sendall(block)


def _send_huge_length(conn: socket.socket) -> None:
    conn.sendall(_head("HTTP/1.1 200 OK", {"Content-Length": str(10**12)}) + b"{")


def _send_ftp_redirect(conn: socket.socket) -> None:
    conn.sendall(_head("HTTP/1.1 302 Found", {"Location": "ftp://127.0.0.1/grid", "Content-Length": "0"}))


def _send_file_redirect(conn: socket.socket) -> None:
    conn.sendall(_head("HTTP/1.1 301 Moved", {"Location": "file:///etc/passwd", "Content-Length": "0"}))


def _send_bad_token(conn: socket.socket) -> None:
    body = b'{"message": "Bad credentials"}'
    conn.sendall(_head("HTTP/1.1 403 Forbidden", {"Content-Length": str(len(body))}) + body)


def _send_bad_chunking(conn: socket.socket) -> None:
    conn.sendall(_head("HTTP/1.1 200 OK", {"Transfer-Encoding": "chunked"}) + b"zz\r\nnope\r\n0\r\n\r\n")


HOSTILE: dict[str, tuple[Callable[[socket.socket], None], set[str]]] = {
    "short body": (_send_short_body, {"network"}),
    "bad status line": (_send_bad_status, {"malformed"}),
    "no status line": (_send_no_status, {"network"}),
    "nested json": (_send_nested_json, {"malformed"}),
    "trickled body": (_send_trickle, {"timeout"}),
    "trickled headers": (_send_trickled_headers, {"timeout"}),
    "gzip bomb": (_send_gzip_bomb, {"malformed"}),
    "endless body": (_send_endless, {"malformed"}),
    "huge content-length": (_send_huge_length, {"malformed"}),
    "ftp redirect": (_send_ftp_redirect, {"malformed"}),
    "file redirect": (_send_file_redirect, {"malformed"}),
    "403 bad token": (_send_bad_token, {"auth"}),
    "bad chunking": (_send_bad_chunking, {"network", "malformed"}),
}


class HostileServer:
    """Raw TCP on 127.0.0.1: reads the request head, then misbehaves with `send`."""

    def __init__(self, send: Callable[[socket.socket], None]) -> None:
        self.requests: list[bytes] = []
        owner = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                conn: socket.socket = self.request
                conn.settimeout(5)
                head = b""
                try:
                    while b"\r\n\r\n" not in head:
                        data = conn.recv(65536)
                        if not data:
                            return
                        head += data
                    owner.requests.append(head)
                    send(conn)
                except OSError:
                    pass  # the client gave up, as it should

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hostile(request: pytest.FixtureRequest) -> Iterator[HostileServer]:
    server = HostileServer(HOSTILE[request.param][0])
    yield server
    server.stop()


def _hud(url: str, token: str | None = TOKEN, **client: Any) -> HudSource:
    trunk = load_deployment({"trunks": [{"repo": "evil/repo", "url": url}]}).trunks[0]
    return HudSource(trunk, token, HttpClient(**client))


@pytest.mark.parametrize("hostile", sorted(HOSTILE), indirect=True)
def test_hostile_server_is_a_classified_source_error(hostile: HostileServer, request: Any) -> None:
    name = request.node.callspec.params["hostile"]
    tracemalloc.start()
    try:
        with pytest.raises(SourceError) as caught:
            _hud(hostile.url, timeout_s=3.0).poll({}, NOW)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert caught.value.kind in HOSTILE[name][1], str(caught.value)
    assert TOKEN not in str(caught.value)
    if caught.value.kind == "timeout":  # cut at the request's deadline
        assert _timed_out_after(caught.value) <= 3.0
    assert peak < PEAK_LIMIT, f"{name}: peak {peak / MIB:.0f} MiB"


def test_a_trickle_is_cut_at_the_whole_request_deadline_not_per_read() -> None:
    sent: list[int] = []

    def trickle(conn: socket.socket) -> None:  # a byte every 1.5 s, 100 of them
        conn.sendall(_head("HTTP/1.1 200 OK", {"Content-Length": "100000"}))
        for _ in range(100):
            conn.sendall(b" ")
            sent.append(1)
            time.sleep(1.5)

    server = HostileServer(trickle)
    try:
        with pytest.raises(SourceError) as caught:
            _hud(server.url, timeout_s=4.0).poll({}, NOW)
    finally:
        server.stop()
    # Every byte came 1.5 s after the previous one: a per-read timeout would never fire, and
    # the body would end short after all 100 of them (a "network" error), not as a timeout.
    assert _timed_out_after(caught.value) == 4.0
    assert len(sent) < 100


def test_the_client_deadline_caps_every_request() -> None:
    server = HostileServer(_send_trickle)
    try:
        with pytest.raises(SourceError) as caught:
            _hud(server.url, timeout_s=30.0, deadline=time.monotonic() + 2.0).poll({}, NOW)
    finally:
        server.stop()
    # The request was given what was left of the client's deadline, not its 30 s timeout.
    assert _timed_out_after(caught.value) <= 2.0
    with pytest.raises(SourceError) as spent:
        _hud("http://127.0.0.1:9", deadline=time.monotonic() - 1).poll({}, NOW)
    assert spent.value.kind == "timeout" and "budget" in str(spent.value)


def test_a_gzip_body_within_the_cap_is_decompressed_and_one_over_it_refused() -> None:
    body = json.dumps(grid()).encode()
    packed = gzip.compress(body)

    def send(conn: socket.socket) -> None:
        head = {"Content-Length": str(len(packed)), "Content-Encoding": "gzip"}
        conn.sendall(_head("HTTP/1.1 200 OK", head) + packed)

    server = HostileServer(send)
    try:
        assert len(_hud(server.url, max_body_bytes=len(body)).poll({}, NOW).commits) == 2
        with pytest.raises(SourceError) as caught:
            _hud(server.url, max_body_bytes=len(body) - 1).poll({}, NOW)
    finally:
        server.stop()
    assert caught.value.kind == "malformed" and "inflates" in str(caught.value)


def test_connections_are_kept_alive_across_requests_of_one_client() -> None:
    body = json.dumps(grid()).encode()
    connections = []

    def send(conn: socket.socket) -> None:  # HTTP/1.1 keep-alive: answer until the client closes
        connections.append(conn)
        answer = _head("HTTP/1.1 200 OK", {"Content-Length": str(len(body))}) + body
        conn.sendall(answer)
        head = b""
        while data := conn.recv(65536):
            head += data
            while b"\r\n\r\n" in head:
                _, head = head.split(b"\r\n\r\n", 1)
                conn.sendall(answer)

    server = HostileServer(send)
    try:
        source = _hud(server.url)
        for _ in range(3):
            assert len(source.poll({}, NOW).commits) == 2
        source.http.close()
    finally:
        server.stop()
    assert len(connections) == 1


def test_a_kept_connection_closed_by_the_server_is_retried_once() -> None:
    body = json.dumps(grid()).encode()

    def send(conn: socket.socket) -> None:  # answers one request per connection, then hangs up
        conn.sendall(_head("HTTP/1.1 200 OK", {"Content-Length": str(len(body))}) + body)

    server = HostileServer(send)
    try:
        source = _hud(server.url)
        assert len(source.poll({}, NOW).commits) == 2
        time.sleep(0.1)
        assert len(source.poll({}, NOW).commits) == 2
        assert len(server.requests) == 2
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        ("Wed, 18 Nov 2026 20:01:30 GMT", 90.0),
        ("Tue, 17 Nov 2026 20:00:00 GMT", 0.0),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_seconds_and_http_dates(value: str | None, seconds: float | None) -> None:
    assert retry_after_seconds(value, NOW) == seconds


@pytest.mark.parametrize(
    ("status", "headers", "body", "limited"),
    [
        (403, {}, b'{"message": "Bad credentials"}', False),
        (401, {}, b"", False),
        (403, {"x-ratelimit-remaining": "0"}, b"", True),
        (403, {"retry-after": "30"}, b"", True),
        (403, {}, b'{"message": "You have exceeded a secondary rate limit"}', True),
        (429, {}, b"", True),
    ],
)
def test_rate_limit_or_refused_credential(
    status: int, headers: dict[str, str], body: bytes, limited: bool
) -> None:
    assert says_rate_limited(Response(status, headers, body)) is limited


def test_protocol_errors_are_all_classified() -> None:
    from trunkwatch.net.http import _classified

    for err in (
        http.client.IncompleteRead(b"x", 10),
        http.client.BadStatusLine("x"),
        http.client.RemoteDisconnected("x"),
        http.client.LineTooLong("header"),
        ConnectionResetError(),
        zlib.error("x"),  # type: ignore[arg-type]
    ):
        assert _classified("GET /p", err).kind in {"network", "malformed"}  # type: ignore[arg-type]


# --- one poll of two trunks: the hostile one fails alone -----------------------------------


def _logged(caplog: pytest.LogCaptureFixture) -> str:
    """Every captured log record with its extra fields (cause, error), as text."""
    return "\n".join(repr(record.__dict__) for record in caplog.records)


@pytest.mark.parametrize(
    "hostile",
    [
        "short body",
        "bad status line",
        "nested json",
        "trickled body",
        "gzip bomb",
        "ftp redirect",
        "403 bad token",
        "bad chunking",
    ],
    indirect=True,
)
def test_a_hostile_trunk_fails_alone_and_the_poll_ends_in_time(
    aws: Any,
    hostile: HostileServer,
    healthy: HudServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    request: Any,
) -> None:
    name = request.node.callspec.params["hostile"]
    deployment = two_trunks(monkeypatch, hostile.url, healthy.url)
    budget = 5.0  # each trunk's invocation's
    clients: dict[str, tuple[float, HttpClient]] = {}  # repo -> (when made, its client)
    peaks: list[int] = []  # of the hostile source's poll (tracemalloc slows moto's writes)
    real_make_source = poll.make_source

    def recording_make_source(trunk: Any, http: Any = None) -> Any:
        clients[trunk.repo] = (time.monotonic(), http)
        source = real_make_source(trunk, http)
        if trunk.repo == "evil/repo":
            real_poll = source.poll

            def traced_poll(*args: Any) -> Any:
                tracemalloc.start()
                try:
                    return real_poll(*args)
                finally:
                    peaks.append(tracemalloc.get_traced_memory()[1])
                    tracemalloc.stop()

            source.poll = traced_poll
        return source

    monkeypatch.setattr(poll, "make_source", recording_make_source)
    result = poll_each(aws["storage"], deployment, NOW, budget)

    (error,) = result["errors"]
    assert error["trunk"] == "evil/repo#main"
    assert error["cause"] in HOSTILE[name][1], error
    (polled,) = result["polled"]
    assert polled["trunk"] == "pytorch/pytorch#main" and polled["cells_written"] > 0
    assert healthy.requests == 1
    assert {item["trunk"]["S"] for item in table_items("cell")} == {"pytorch/pytorch#main"}
    # Each trunk's client had its own invocation's time at most, and a timeout ended the
    # hostile one at its client's deadline.
    for made, client in clients.values():
        assert client.deadline is not None and client.deadline - made <= budget
    if error["cause"] == "timeout":
        assert float(re.findall(r"timed out after ([0-9.e+-]+)s", error["error"])[0]) <= budget
    (peak,) = peaks
    assert peak < PEAK_LIMIT, f"{name}: peak {peak / MIB:.0f} MiB"
    # The token went to the hostile server (same host), and nowhere into logs or results.
    assert TOKEN.encode() in hostile.requests[0]
    assert TOKEN not in _logged(caplog) + json.dumps(result)


def test_any_exception_of_one_trunk_is_a_classified_failure(
    aws: Any, healthy: HudServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    deployment = two_trunks(monkeypatch, "http://127.0.0.1:9", healthy.url)
    real = poll.make_source

    def make_source(trunk: Any, http: Any = None) -> Any:
        if trunk.repo == "evil/repo":
            raise KeyError(f"boom {TOKEN}")
        return real(trunk, http)

    monkeypatch.setattr(poll, "make_source", make_source)
    result = poll_each(aws["storage"], deployment, NOW)
    (error,) = result["errors"]
    assert error["cause"] == "internal" and error["error"].startswith("unexpected KeyError at ")
    assert [p["trunk"] for p in result["polled"]] == ["pytorch/pytorch#main"]
    output = _logged(caplog)
    assert "poll failed" in output and "unexpected KeyError" in output
    assert poll.metrics.metric_set["PollErrors"]["Value"]
    assert TOKEN not in output + json.dumps(result)
