"""One invocation of one handler in a new interpreter, as a new Lambda container runs it.

Run by `tests/template/test_cold_start.py` as `python tests/support/cold_invoke.py '<spec JSON>'`
with exactly the environment the template gives the function. moto stands in for AWS: the table
(the template's definition), the token parameters, the topic, all named as the environment names
them; the configuration file is where the test put the ConfigLayer's copy. Nothing of the domain
package is imported here before the handler module loads, so the handler finds its table, region
and configuration on its own. Prints `{"results": [...]}` (one per event, in order) or
`{"error": ...}` as the last line.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import traceback
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import boto3
from moto import mock_aws


@dataclass
class Context:
    """The attributes of Lambda's context object the handlers and Powertools read."""

    function_name: str
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = ""
    aws_request_id: str = "00000000-0000-4000-8000-000000000001"

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def _create_resources(spec: dict[str, Any], environ: dict[str, str]) -> None:
    table = spec["table"]
    if environ.get("TABLE_NAME"):
        boto3.client("dynamodb").create_table(
            TableName=environ["TABLE_NAME"],
            KeySchema=table["KeySchema"],
            AttributeDefinitions=table["AttributeDefinitions"],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, **table["StreamSpecification"]},
        )
    ssm = boto3.client("ssm")
    if environ.get("API_TOKENS_PARAMETER"):
        ssm.put_parameter(
            Name=environ["API_TOKENS_PARAMETER"], Type="SecureString", Value=json.dumps(spec["tokens"])
        )
    if environ.get("WEBHOOK_SECRET_PARAMETER"):
        ssm.put_parameter(
            Name=environ["WEBHOOK_SECRET_PARAMETER"], Type="SecureString", Value=spec["webhook_secret"]
        )
    if environ.get("POLL_QUEUE_URL"):
        name = environ["POLL_QUEUE_URL"].rsplit("/", 1)[-1]
        boto3.client("sqs").create_queue(QueueName=name, Attributes={"FifoQueue": "true"})
    if environ.get("TOPIC_ARN"):
        boto3.client("sns").create_topic(Name=environ["TOPIC_ARN"].rsplit(":", 1)[-1])


def main() -> None:
    import os

    spec = json.loads(sys.argv[1])
    with mock_aws():
        _create_resources(spec, dict(os.environ))
        try:
            loader = importlib.util.spec_from_file_location("app", spec["handler"])
            assert loader is not None and loader.loader is not None
            module = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(module)
            from trunkwatch.domain.clock import SimulatedClock

            module.edge.use(clock=SimulatedClock(datetime.fromtimestamp(spec["at"], UTC)))
            # The first event meets the cold container, the others the same container warm.
            results = [module.lambda_handler(event, Context(spec["function"])) for event in spec["events"]]
        except Exception as err:
            traceback.print_exc()
            print(json.dumps({"error": f"{type(err).__name__}: {err}"}))
            return
    print(json.dumps({"results": results}, default=str))


if __name__ == "__main__":
    main()
