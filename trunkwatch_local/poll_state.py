"""What `trunkwatch poll` keeps between runs: the table's items, in DynamoDB JSON, in a state
file (by default one per configuration file, under `$XDG_STATE_HOME/trunkwatch/`). Each run
puts them back into its fresh table before its tick and writes them out after it, so a
second run sends only what is new (from cron: a page once, then reminders)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from trunkwatch.domain.config import ConfigError
from trunkwatch_local.pump import StreamPump
from trunkwatch_local.stack import LocalStack

VERSION = 1
BATCH = 25  # the most items one BatchWriteItem takes


def default_path(config: Path) -> Path:
    """The state file of the configuration file `config` (one per file, by its full path)."""
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    digest = hashlib.sha256(str(config.resolve()).encode()).hexdigest()[:12]
    return base / "trunkwatch" / f"poll-{config.stem}-{digest}.json"


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """One run at a time per state file (cron may start a run while the last one goes on)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = path.with_name(path.name + ".lock").open("a")
    except OSError as err:
        raise ConfigError(
            f"cannot keep poll state in {path}: {err.strerror} (choose another with --state)"
        ) from None
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(
                f"another trunkwatch poll is running with state {path}: this one sends nothing"
            ) from None
        yield


def restore(stack: LocalStack, pump: StreamPump, path: Path) -> int:
    """Put the items kept in `path` into the stack's table, and move `pump` past the stream
    records that wrote (the run that made them handled them). Returns how many there were."""
    items = _read(path)
    client = boto3.client("dynamodb")
    try:
        for start in range(0, len(items), BATCH):
            requests = [{"PutRequest": {"Item": item}} for item in items[start : start + BATCH]]
            client.batch_write_item(RequestItems={stack.table_name: requests})
    except (BotoCoreError, ClientError) as err:
        what = " ".join(str(err).split())  # botocore's message runs over lines
        raise ConfigError(f"poll state {path} holds an item the table refuses ({what}): {_AFRESH}") from None
    pump.skip_written()
    return len(items)


def save(stack: LocalStack, path: Path) -> None:
    """Write every item of the stack's table to `path` (whole or not at all)."""
    pages = boto3.client("dynamodb").get_paginator("scan").paginate(TableName=stack.table_name)
    items = [item for page in pages for item in page["Items"]]
    text = json.dumps({"version": VERSION, "items": items}, separators=(",", ":"))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)
    except OSError as err:
        raise ConfigError(
            f"cannot write poll state {path}: {err.strerror} (choose another with --state)"
        ) from None


_AFRESH = "delete it to start afresh (the next run then sends what is firing again)"


def _read(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as err:
        raise ConfigError(f"cannot read poll state {path}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"poll state {path} is not UTF-8 text: {_AFRESH}") from None
    try:
        document = json.loads(text)
    except ValueError as err:
        raise ConfigError(f"poll state {path} is not valid JSON ({err}): {_AFRESH}") from None
    items = (
        document.get("items") if isinstance(document, dict) and document.get("version") == VERSION else None
    )
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise ConfigError(f"{path} is not a trunkwatch poll state (version {VERSION}): {_AFRESH}")
    return items
