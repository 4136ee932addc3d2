"""Calling the API the way its clients meet it, and the real Alertmanager and amtool next to it.

`call_api` sends one API Gateway proxy event through the API Lambda's handler. The peer
helpers find Debian's `amtool` / `prometheus-alertmanager` (installing them with
scripts/install_peers.sh when missing) and run Alertmanager on a free 127.0.0.1 port. A peer
that cannot be had fails the test, unless the peers switch (SKIP_PEERS below) skips it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support.aws import running_stack
from tests.support.paths import ROOT
from trunkwatch.api import auth
from trunkwatch_local import apigw
from trunkwatch_local.runtime import LambdaContext
from trunkwatch_local.stack import load_handler

INSTALL_PEERS = ROOT / "scripts" / "install_peers.sh"
ALERTMANAGER_CONFIG = """\
route:
  receiver: blackhole
receivers:
  - name: blackhole
"""


def load_function(name: str) -> ModuleType:
    """functions/<name>/app.py as Lambda loads it: the `aws` fixture's stack's (on its
    simulated clock) while a test has one, else loaded once per process (real time)."""
    stack = running_stack()
    return stack.handler(name) if stack is not None else _loaded(name)


@functools.cache
def _loaded(name: str) -> ModuleType:
    return load_handler(ROOT / "functions" / name / "app.py")


def invoke(name: str, event: dict[str, Any]) -> Any:
    context = LambdaContext(function_name=name, aws_request_id=str(uuid.uuid4()))
    return load_function(name).lambda_handler(event, context)


WRITER = auth.Caller(principal="alice", scope="write")
READER = auth.Caller(principal="bob", scope="read")


def call_api(
    method: str,
    path: str,
    body: Any = None,
    *,
    query: str = "",
    raw_body: bytes | None = None,
    headers: dict[str, str] | None = None,
    caller: auth.Caller | None = WRITER,
) -> tuple[int, Any]:
    """(status, decoded JSON body or None) of one request through the API handler."""
    data = raw_body if raw_body is not None else (json.dumps(body).encode() if body is not None else None)
    sent_headers = {"Content-Type": "application/json", **(headers or {})} if data else dict(headers or {})
    event = apigw.proxy_event(method, path, query=query, headers=sent_headers, body=data, caller=caller)
    response = invoke("api", event)
    text = response.get("body") or ""
    return response["statusCode"], json.loads(text) if text else None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# The one peers switch, with the same meaning for `make peers` and for the tests: exactly "1"
# skips the real peers (Alertmanager, amtool, chromium): `make peers` installs nothing and
# every test that needs one is skipped. Unset or any other value: they run, and are installed
# on demand. (README, Troubleshooting, tells users.)
SKIP_PEERS = "TRUNKWATCH_SKIP_PEERS"
# What install_peers.sh installs each binary from.
PEER_PACKAGES = {"amtool": "prometheus-alertmanager", "prometheus-alertmanager": "prometheus-alertmanager"}


def peers_skipped() -> bool:
    return os.environ.get(SKIP_PEERS) == "1"


def peer_binary(name: str) -> str:
    """Path of `amtool`, `prometheus-alertmanager` or `chromium`, installed on demand."""
    if peers_skipped():
        pytest.skip(f"{SKIP_PEERS}=1: not running the tests that need {name}")
    found = shutil.which(name)
    if found is None:
        result = subprocess.run([str(INSTALL_PEERS)], capture_output=True, text=True, check=False)
        found = shutil.which(name)
        if found is None:
            pytest.fail(
                f"{name} is missing and {INSTALL_PEERS.name} could not install it "
                f"(exit {result.returncode}): {result.stderr.strip()[-500:]}\n"
                f"Install Debian's {PEER_PACKAGES.get(name, name)}, "
                f"or set {SKIP_PEERS}=1 to skip these tests."
            )
    return found


def _wait_ready(url: str, process: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"Alertmanager exited with {process.returncode} before becoming ready")
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2):  # noqa: S310 - 127.0.0.1
                return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.1)
    raise RuntimeError(f"Alertmanager at {url} did not become ready in {timeout_s}s")


@contextlib.contextmanager
def alertmanager(workdir: Path) -> Iterator[str]:
    """A real Alertmanager on a free 127.0.0.1 port (no gossip, temp storage); yields its URL."""
    binary = peer_binary("prometheus-alertmanager")
    config = workdir / "alertmanager.yml"
    config.write_text(ALERTMANAGER_CONFIG)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (workdir / "alertmanager.log").open("wb")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_ready(url, process)
        yield url
    finally:
        process.kill()
        process.wait(timeout=10)
        log.close()


def wait_until_serving(process: subprocess.Popen[str], timeout_s: float = 240) -> list[str]:
    """Read `trunkwatch serve`'s stderr until it says it serves (after replaying its scenario);
    returns the lines read."""
    assert process.stderr is not None
    deadline, seen = time.monotonic() + timeout_s, []
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        seen.append(line)
        if "serving; Ctrl-C stops" in line or not line:
            break
    assert any("serving; Ctrl-C stops" in line for line in seen), "".join(seen)
    return seen
