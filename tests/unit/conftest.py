"""What keeps tests/unit a unit tier (tests/unit/__init__.py): a test that creates an AWS
client (boto3's, PynamoDB's, moto's: every one is made by a botocore session) or starts a
process fails. Those belong in tests/component."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.session import Session

# Process creation as Python's audit events name it (subprocess, os.system, fork, exec, spawn).
PROCESS_EVENTS = (
    "subprocess.Popen",
    "os.system",
    "os.fork",
    "os.forkpty",
    "os.posix_spawn",
    "os.exec",
    "os.spawn",
)
_started: list[str] = []  # what the running unit test started
_watching = False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _watching and event.startswith(PROCESS_EVENTS):
        _started.append(f"{event} {args[:2]!r}")
        raise RuntimeError(f"tests/unit starts no process ({event}): move the test to tests/component")


sys.addaudithook(_audit)  # audit hooks stay for the process: it acts only while `_watching`


@pytest.fixture(autouse=True)
def no_aws_and_no_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    global _watching
    clients: list[str] = []

    def create_client(session: Session, service_name: str, *args: Any, **kwargs: Any) -> Any:
        clients.append(service_name)
        raise RuntimeError(
            f"tests/unit creates no AWS client ({service_name}): move the test to tests/component"
        )

    monkeypatch.setattr(Session, "create_client", create_client)
    _started.clear()
    _watching = True
    try:
        yield
    finally:
        _watching = False
    # The code under test may have caught the error: the test fails all the same.
    assert not clients, f"created AWS clients {clients}: tests/unit uses no AWS, not even moto"
    assert not _started, f"started {_started}: tests/unit starts no process"
