"""The DynamoDB storage: every store on one table, the one a function's environment names
(each store is built on the models bound to its table: `table.bind`)."""

from __future__ import annotations

from trunkwatch.storage.alerts import DynamoAlerts
from trunkwatch.storage.cells import DynamoCells
from trunkwatch.storage.commits import DynamoCommits
from trunkwatch.storage.logs import DynamoLogs
from trunkwatch.storage.port import Storage
from trunkwatch.storage.reruns import DynamoReruns
from trunkwatch.storage.runs import DynamoRuns
from trunkwatch.storage.shards import DynamoShards
from trunkwatch.storage.silences import DynamoSilences
from trunkwatch.storage.table import Table, bind
from trunkwatch.storage.ticks import DynamoTicks
from trunkwatch.storage.trunks import DynamoTrunks


def open_table(table_name: str, region: str | None = None, endpoint_url: str | None = None) -> Storage:
    """The storage on `table_name` (`endpoint_url`: a local emulation's)."""
    table = bind(Table(table_name, region, endpoint_url))
    return Storage(
        trunks=DynamoTrunks(table),
        commits=DynamoCommits(table),
        cells=DynamoCells(table),
        alerts=DynamoAlerts(table),
        ticks=DynamoTicks(table),
        shards=DynamoShards(table),
        runs=DynamoRuns(table),
        logs=DynamoLogs(table),
        silences=DynamoSilences(table),
        reruns=DynamoReruns(table),
    )
