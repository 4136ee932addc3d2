"""IAM as the deployed stack applies it to the table: template.yaml translated by the SAM
translator, the DynamoDB requests a function made (each call as botocore is asked to make
it) as IAM authorizes them, and each role's verdict on them.

Only what the template's table statements use is evaluated (actions with wildcards, the
table's ARN, `dynamodb:LeadingKeys` under `ForAllValues:StringLike` or
`ForAllValues:StringEquals`); any other condition is refused, so a template that starts
using one makes these helpers fail rather than guess."""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from samtranslator.parser.parser import Parser
from samtranslator.translator.translator import Translator

from trunkwatch_local.template import load_template

TABLE_ARN = {"Fn::GetAtt": ["Table", "Arn"]}
LEADING_KEYS = "dynamodb:LeadingKeys"
# How IAM authorizes the items of a transaction: per contained action.
_TRANSACT_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}
_KEY_CONDITION = re.compile(r"(#\w+|\bpk\b)\s*=\s*(:\w+)")


def translated_resources(template: Path) -> dict[str, Any]:
    """The template's resources as CloudFormation gets them (local code paths stand in as
    S3 objects, as `sam deploy` uploads them)."""
    sam = json.loads(json.dumps(load_template(template)))
    for resource in sam["Resources"].values():
        props = resource.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):
            if isinstance(props.get(key), str):
                props[key] = {"Bucket": "artifacts", "Key": props[key]}
    translator = Translator(None, Parser(), boto_session=boto3.session.Session(region_name="us-east-1"))
    translated = translator.translate(sam, parameter_values={}, get_managed_policy_map=dict)
    resources: dict[str, Any] = translated["Resources"]
    return resources


def statements(role: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for policy in role["Properties"].get("Policies", []):
        yield from policy["PolicyDocument"]["Statement"]


def actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def resources_of(statement: dict[str, Any]) -> list[Any]:
    resource = statement["Resource"]
    return resource if isinstance(resource, list) else [resource]


@dataclass(frozen=True)
class TableRequest:
    """One request as IAM authorizes it: the action and the partition keys it names (the
    values of `dynamodb:LeadingKeys`)."""

    action: str
    leading_keys: frozenset[str]

    def __str__(self) -> str:
        return f"{self.action} on {sorted(self.leading_keys)}"


def table_requests(operation: str, body: dict[str, Any]) -> list[TableRequest]:
    """A DynamoDB call's requests (its operation and parameters, in DynamoDB JSON as on the
    wire), one per authorization IAM makes (a transaction is one per item)."""

    def request(action: str, *keys: str) -> TableRequest:
        return TableRequest(f"dynamodb:{action}", frozenset(keys))

    if operation in ("GetItem", "DeleteItem", "UpdateItem"):
        return [request(operation, body["Key"]["pk"]["S"])]
    if operation == "PutItem":
        return [request(operation, body["Item"]["pk"]["S"])]
    if operation == "Query":
        return [request(operation, _queried_partition(body))]
    if operation == "BatchGetItem":
        keys = [key["pk"]["S"] for table in body["RequestItems"].values() for key in table["Keys"]]
        return [request(operation, *keys)]
    if operation == "BatchWriteItem":
        writes = [
            write for table in body["RequestItems"].values() for entry in table for write in entry.values()
        ]
        return [request(operation, *((w.get("Item") or w["Key"])["pk"]["S"] for w in writes))]
    if operation in ("TransactWriteItems", "TransactGetItems"):
        return [
            request(_TRANSACT_ACTIONS.get(kind, "GetItem"), (part.get("Item") or part["Key"])["pk"]["S"])
            for item in body["TransactItems"]
            for kind, part in item.items()
        ]
    return [request(operation)]  # no item named (Scan, DescribeTable...)


def _queried_partition(body: dict[str, Any]) -> str:
    names = body.get("ExpressionAttributeNames", {})
    for name, value in _KEY_CONDITION.findall(body["KeyConditionExpression"]):
        if names.get(name, name) == "pk":
            return str(body["ExpressionAttributeValues"][value]["S"])
    raise ValueError(f"no partition key in {body['KeyConditionExpression']!r}")


def allows(role: dict[str, Any], request: TableRequest) -> bool:
    """IAM's verdict on a request to the table from a role's inline statements: an Allow
    that matches, and no Deny."""
    verdicts = {
        statement["Effect"]
        for statement in statements(role)
        if any(fnmatch.fnmatchcase(request.action, pattern) for pattern in actions(statement))
        and TABLE_ARN in resources_of(statement)
        and _condition_holds(statement.get("Condition", {}), request.leading_keys)
    }
    return "Allow" in verdicts and "Deny" not in verdicts


def _condition_holds(condition: dict[str, Any], leading_keys: frozenset[str]) -> bool:
    holds = True
    for operator, tests in condition.items():
        if operator not in ("ForAllValues:StringLike", "ForAllValues:StringEquals") or set(tests) != {
            LEADING_KEYS
        }:
            raise ValueError(f"condition {operator} {sorted(tests)} is not evaluated here")
        allowed = tests[LEADING_KEYS]
        allowed = [allowed] if isinstance(allowed, str) else allowed
        like = operator.endswith("StringLike")
        # ForAllValues: every key the request names matches one of the values.
        holds &= all(
            any(fnmatch.fnmatchcase(key, value) if like else key == value for value in allowed)
            for key in leading_keys
        )
    return holds
