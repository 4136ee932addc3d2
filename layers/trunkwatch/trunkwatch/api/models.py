"""Response shapes of the Alertmanager v2 subset, for the published OpenAPI document.

Timestamps are RFC 3339 strings exactly as Alertmanager prints them (milliseconds, `Z`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ApiError(BaseModel):
    error: str = Field(description="What is wrong with the request")


class MatcherOut(BaseModel):
    name: str
    value: str
    isRegex: bool
    isEqual: bool


class SilenceStatus(BaseModel):
    state: Literal["pending", "active", "expired"]


class GettableSilence(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    status: SilenceStatus
    updatedAt: str
    matchers: list[MatcherOut]
    startsAt: str
    endsAt: str
    createdBy: str
    comment: str


class SilenceCreated(BaseModel):
    silenceID: str


class Receiver(BaseModel):
    name: str


class AlertStatus(BaseModel):
    state: Literal["unprocessed", "active", "suppressed"]
    silencedBy: list[str]
    inhibitedBy: list[str]


class GettableAlert(BaseModel):
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


class AlertGroup(BaseModel):
    model_config = ConfigDict(extra="forbid")

    labels: dict[str, str]
    receiver: Receiver
    alerts: list[GettableAlert]


class ClusterStatus(BaseModel):
    status: Literal["ready", "settling", "disabled"]
    peers: list[dict[str, str]]


class VersionInfo(BaseModel):
    version: str
    revision: str
    branch: str
    buildUser: str
    buildDate: str
    goVersion: str


class AlertmanagerConfig(BaseModel):
    original: str


class AlertmanagerStatus(BaseModel):
    cluster: ClusterStatus
    versionInfo: VersionInfo
    config: AlertmanagerConfig
    uptime: str
