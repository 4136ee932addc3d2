"""The DynamoDB storage: every store on one table, the one a function's environment names.

PynamoDB keeps the table on its model classes, so opening a table points every model at it:
a process works on one table at a time (a Lambda container always does; the local runtime,
tests and benchmarks open the emulated table they created)."""

from __future__ import annotations

from trunkwatch.storage.alerts import DynamoAlerts
from trunkwatch.storage.cells import DynamoCells
from trunkwatch.storage.commits import DynamoCommits
from trunkwatch.storage.deliveries import DynamoDeliveries
from trunkwatch.storage.logs import DynamoLogs
from trunkwatch.storage.port import Storage
from trunkwatch.storage.reruns import DynamoReruns
from trunkwatch.storage.shards import DynamoShards
from trunkwatch.storage.silences import DynamoSilences
from trunkwatch.storage.table import bind
from trunkwatch.storage.ticks import DynamoTicks
from trunkwatch.storage.trunks import DynamoTrunks


def open_table(table_name: str, region: str | None = None, endpoint_url: str | None = None) -> Storage:
    """The storage on `table_name` (`endpoint_url`: a local emulation's)."""
    bind(table_name, region, endpoint_url)
    return Storage(
        trunks=DynamoTrunks(),
        commits=DynamoCommits(),
        cells=DynamoCells(),
        alerts=DynamoAlerts(),
        ticks=DynamoTicks(),
        shards=DynamoShards(),
        deliveries=DynamoDeliveries(),
        logs=DynamoLogs(),
        silences=DynamoSilences(),
        reruns=DynamoReruns(),
    )
