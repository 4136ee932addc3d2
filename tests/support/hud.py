"""A HUD answer (support for the HUD source, ingest and handler tests), and a poll of two trunks,
one of them on a hostile server."""

from __future__ import annotations

from typing import Any

import pytest

from trunkwatch.domain.config import Deployment, load_deployment

# The token of the hostile trunk, which must never show in logs or results.
HOSTILE_TOKEN = "hostile-test-token-0123456789"
PATH = "/api/hud/pytorch/pytorch/main/1"


def grid() -> dict[str, Any]:
    return {
        "jobNames": ["pull / b / test (default, 1, 2, r)", "pull / b / test (default, 2, 2, r)", "lint / l"],
        "shaGrid": [
            {
                "sha": "bbb",
                "time": "2026-11-18T19:30:00Z",
                "prNum": 2,
                "commitTitle": "second",
                "author": "dev2",
                "jobs": [
                    {
                        "conclusion": "failure",
                        "status": "completed",
                        "htmlUrl": "u1",
                        "failureLines": ["FAILED t"],
                    },
                    {
                        "conclusion": "success",
                        "status": "completed",
                        "htmlUrl": "u2",
                        "failedPreviousRun": True,
                    },
                    {},
                ],
            },
            {
                "sha": "aaa",
                "time": "2026-11-18T19:00:00Z",
                "prNum": None,
                "commitTitle": "first",
                "author": "dev1",
                "jobs": [
                    {"conclusion": "pending", "status": "in_progress"},
                    {"conclusion": "success"},
                    {"conclusion": "success"},
                ],
            },
        ],
    }


def two_trunks(monkeypatch: pytest.MonkeyPatch, hostile_url: str, healthy_url: str) -> Deployment:
    """evil/repo (token HOSTILE_TOKEN) at `hostile_url`, then pytorch/pytorch at `healthy_url`."""
    monkeypatch.setenv("HOSTILE_TOKEN", HOSTILE_TOKEN)
    return load_deployment(
        {
            "trunks": [
                {"repo": "evil/repo", "url": hostile_url, "token": {"env": "HOSTILE_TOKEN"}},
                {"repo": "pytorch/pytorch", "url": healthy_url},
            ]
        }
    )
