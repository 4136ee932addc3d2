"""The moto and botocore the local AWS emulation is verified against, checked before it starts.

`trunkwatch_local.emulator` replaces private methods of moto and reads its internals; on
another moto several of those changes would give wrong answers rather than errors, and a
botocore newer than moto speaks protocols moto does not answer. So the runtime starts only on
the versions below (pyproject.toml's `local` extra pins them, constraints.txt locks them) and
only where every method it replaces still takes the parameters it was written against.

Upgrading moto: change `MOTO` and the pin in pyproject.toml, `make lock`, then fix what this
check and tests/test_emulator.py report.
"""

from __future__ import annotations

import importlib
import inspect
from importlib.metadata import PackageNotFoundError, version

MOTO = "5.2.1"
BOTOCORE_SERIES = "1.43"  # boto3/botocore 1.43.x; the lock pins one of them
# The fix the error names: the README's install line (from the checkout, at the lock's versions).
INSTALL = ".venv/bin/pip install -c constraints.txt '.[local]'"

# "module:Class.method" -> its parameters, in order (the emulator passes some positionally).
PATCHED: dict[str, tuple[str, ...]] = {
    "moto.core.responses:ActionResult.execute_result": ("self", "context"),
    "moto.dynamodb.responses:DynamoResult.execute_result": ("self", "context"),
    "moto.dynamodb.models.dynamo_type:Item.__init__": ("self", "hash_key", "range_key", "attrs"),
    "moto.dynamodb.models.dynamo_type:Item.__deepcopy__": ("self", "memo"),
    "moto.dynamodb.models.dynamo_type:Item.size": ("self",),
    "moto.dynamodb.models.table:Table.query": (
        "self",
        "hash_key",
        "range_comparison",
        "range_objs",
        "limit",
        "exclusive_start_key",
        "scan_index_forward",
        "projection_expressions",
        "index_name",
        "consistent_read",
        "filter_expression",
        "hash_key_conditions",
        "range_key_conditions",
        "filter_kwargs",
    ),
    "moto.dynamodb.models.table:Table.put_item": (
        "self",
        "item_attrs",
        "expected",
        "condition_expression",
        "expression_attribute_names",
        "expression_attribute_values",
        "overwrite",
        "return_values_on_condition_check_failure",
    ),
    "moto.dynamodb.models.table:Table.delete_item": ("self", "hash_key", "range_key"),
    "moto.dynamodb.models:DynamoDBBackend.transact_write_items": ("self", "transact_items"),
    "moto.dynamodb.models.table:StreamShard.add": ("self", "old", "new"),
    "moto.dynamodb.models.table:StreamShard.get": ("self", "start", "quantity"),
    "moto.dynamodbstreams.models:DynamoDBStreamsBackend.get_shard_iterator": (
        "self",
        "arn",
        "shard_id",
        "shard_iterator_type",
        "sequence_number",
    ),
    "moto.dynamodbstreams.models:DynamoDBStreamsBackend.get_records": ("self", "iterator_arn", "limit"),
}


class UnverifiedEmulation(RuntimeError):
    """The installed moto/botocore is not the one the emulation is verified against."""


def check() -> None:
    """Raise `UnverifiedEmulation` (one line: what is installed, what is supported, how to
    install it) unless the verified moto and botocore are installed and every method the
    emulator replaces has the parameters it was written against."""
    installed = {name: _installed(name) for name in ("moto", "botocore")}
    supported = f"moto {MOTO} with botocore {BOTOCORE_SERIES}.x"
    if installed["moto"] != MOTO or not (installed["botocore"] or "").startswith(BOTOCORE_SERIES + "."):
        found = ", ".join(f"{name} {found or 'not installed'}" for name, found in installed.items())
        raise UnverifiedEmulation(
            f"the local AWS emulation runs on {supported}, found {found}; install it with: {INSTALL}"
        )
    changed = [target for target, parameters in PATCHED.items() if _parameters(target) != parameters]
    if changed:
        raise UnverifiedEmulation(
            f"moto {MOTO} here is not the release the emulation was verified against "
            f"(changed: {', '.join(changed)}); reinstall it with: {INSTALL}"
        )


def _installed(distribution: str) -> str | None:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def _parameters(target: str) -> tuple[str, ...] | None:
    module_name, _, path = target.partition(":")
    owner_name, _, attribute = path.partition(".")
    try:
        owner = getattr(importlib.import_module(module_name), owner_name)
        return tuple(inspect.signature(getattr(owner, attribute)).parameters)
    except (ImportError, AttributeError, TypeError, ValueError):
        return None
