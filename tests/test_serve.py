"""`trunkwatch serve`: replay, then the API answers on 127.0.0.1 until Ctrl-C."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.test_scenarios import SCENARIOS


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - 127.0.0.1
        return json.loads(response.read())


def test_serve_replays_then_serves_alerts_until_interrupted(tmp_path: Path) -> None:
    # basic-break up to 19:29: the broken job and TrunkBroken are firing.
    lines = (SCENARIOS / "basic-break.jsonl").read_text().splitlines()
    scenario = tmp_path / "firing.jsonl"
    scenario.write_text("\n".join(lines[:27]) + "\n")
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trunkwatch.local.cli",
            "serve",
            "--scenario",
            str(scenario),
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        deadline = time.monotonic() + 240
        seen = []
        while time.monotonic() < deadline:
            line = process.stderr.readline()
            seen.append(line)
            if "serving; Ctrl-C stops" in line or not line:
                break
        assert any("serving" in line for line in seen), "".join(seen)
        base = f"http://127.0.0.1:{port}/api/v2"
        names = sorted(alert["labels"]["alertname"] for alert in get(f"{base}/alerts"))
        assert names == ["TrunkBroken", "TrunkJobFailing"]
        assert all(alert["status"]["state"] == "active" for alert in get(f"{base}/alerts"))
        assert "versionInfo" in get(f"{base}/status")
        process.send_signal(signal.SIGINT)
        stdout, _ = process.communicate(timeout=60)
        assert process.returncode == 0
        assert "FIRING" in stdout and "TrunkBroken" in stdout
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
