"""Response shapes of the Alertmanager v2 subset, for the published OpenAPI document.

Timestamps are RFC 3339 strings exactly as Alertmanager prints them (milliseconds, `Z`).
Each model builds its pydantic schema when first used, not when this module is imported
(a cold start of the API function then pays only for the models its first request uses).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(defer_build=True)


class ApiError(_Model):
    error: str = Field(description="What is wrong with the request")


class MatcherOut(_Model):
    name: str
    value: str
    isRegex: bool
    isEqual: bool


class SilenceStatus(_Model):
    state: Literal["pending", "active", "expired"]


class GettableSilence(_Model):
    model_config = ConfigDict(extra="forbid")

    id: str
    status: SilenceStatus
    updatedAt: str
    matchers: list[MatcherOut]
    startsAt: str
    endsAt: str
    createdBy: str
    comment: str


class SilenceCreated(_Model):
    silenceID: str


class Receiver(_Model):
    name: str


class AlertStatus(_Model):
    state: Literal["unprocessed", "active", "suppressed"]
    silencedBy: list[str]
    inhibitedBy: list[str]


class GettableAlert(_Model):
    model_config = ConfigDict(extra="forbid")

    labels: dict[str, str]
    annotations: dict[str, str]
    receivers: list[Receiver]
    fingerprint: str
    startsAt: str
    updatedAt: str
    endsAt: str
    generatorURL: str
    status: AlertStatus


class AlertGroup(_Model):
    model_config = ConfigDict(extra="forbid")

    labels: dict[str, str]
    receiver: Receiver
    alerts: list[GettableAlert]


class ClusterStatus(_Model):
    status: Literal["ready", "settling", "disabled"]
    peers: list[dict[str, str]]


class VersionInfo(_Model):
    version: str
    revision: str
    branch: str
    buildUser: str
    buildDate: str
    goVersion: str


class AlertmanagerConfig(_Model):
    original: str


class AlertmanagerStatus(_Model):
    cluster: ClusterStatus
    versionInfo: VersionInfo
    config: AlertmanagerConfig
    uptime: str


class AcknowledgementOut(_Model):
    createdBy: str = Field(description="Who acknowledged it")
    comment: str = Field(description="Their note")
    at: str = Field(description="When")
    via: str = Field(description="`api` (the API or the status page), or `silence <id>` for an ACK! silence")


class AcknowledgedAlert(_Model):
    model_config = ConfigDict(extra="forbid")

    fingerprint: str
    labels: dict[str, str]
    startsAt: str
    acknowledgement: AcknowledgementOut
