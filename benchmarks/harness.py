"""The deployed functions on moto's in-process mock (`mock_aws`), metered: the local
runtime's stack (`trunkwatch_local.stack`), its stream batches delivered by its `StreamPump`
with the template's FilterCriteria and batch sizes, every invocation under its function's
label of the `Meter`. Differences from Lambda: X-Ray tracing is off (no daemon); logs and
metrics are produced but discarded.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from typing import Any

from benchmarks.usage import Meter, stored_by_kind
from trunkwatch.domain.config import Deployment, to_json
from trunkwatch_local.pump import merged
from trunkwatch_local.runtime import LambdaContext, scheduled_event
from trunkwatch_local.stack import ACCOUNT, REGION, LocalStack

DISCARD = open(os.devnull, "w")  # noqa: SIM115 - where the handlers' logs and metrics go, all run long


class InProcessAws:
    """Use as a context manager; `invoke` runs a handler, `drain` the stream's functions;
    `clock` is the simulated clock its handlers run on (the benchmark sets it)."""

    def __init__(self, deployment: Deployment, meter: Meter) -> None:
        self.deployment = deployment
        self.meter = meter
        # Unique names: a warm container's cached clients are keyed on them.
        # On moto's table: the meter counts DynamoDB's requests and request units.
        self.stack = LocalStack(
            name=f"trunkwatch-bench-{uuid.uuid4().hex[:8]}", credentials="bench", store="dynamodb"
        )
        self.name = self.stack.name
        self.clock = self.stack.clock

    def __enter__(self) -> InProcessAws:
        self.stack.start(to_json(self.deployment), {"POWERTOOLS_TRACE_DISABLED": "true"})
        try:
            # The benchmarks' own reads and direct use-case calls go to the functions' table.
            self.storage = self.stack.storage()
            # Powertools logs to stdout; the benchmark's stdout is its report.
            self.stack.load_handlers(log_stream=DISCARD)
            self.pump = self.stack.pump(self.invoke)
            self.queues = self.stack.queue_pump(self.invoke)
        except BaseException:
            self.stack.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stack.stop()

    def invoke(self, function: str, event: dict[str, Any]) -> Any:
        """Invoke the handler of functions/<function> (or of a logical id) under its label."""
        logical_id = self.stack.logical_id(function)
        folder = self.stack.wiring.functions[logical_id].parent.name
        context = LambdaContext(
            function_name=logical_id,
            aws_request_id=str(uuid.uuid4()),
            invoked_function_arn=f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{folder}",
        )
        handler = self.stack.handler(logical_id).lambda_handler
        with contextlib.redirect_stdout(DISCARD):
            return self.meter.invoke(folder, lambda: handler(event, context))

    def scheduled_event(self) -> dict[str, Any]:
        return scheduled_event(self.name, self.clock.now())

    def poll(self) -> dict[str, Any]:
        """A schedule tick's polls: the dispatcher, then ingest on each message it sent; what
        the polls came to (`polled`, `errors`)."""
        self.invoke("dispatcher", self.scheduled_event())
        return merged(self.queues.drain())

    def drain(self) -> None:
        """Deliver the stream's new records to their functions until it is quiet."""
        self.pump.drain()

    def stored(self) -> dict[str, tuple[int, int]]:
        """(items, bytes) the table holds now, per kind (see `usage.stored_by_kind`)."""
        return stored_by_kind(REGION, self.name)
