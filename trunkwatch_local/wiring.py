"""What the local runtime reads from template.yaml: the table, the functions, their stream
event sources and schedule, and the environment, with intrinsics resolved locally."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trunkwatch.domain.config import ConfigError
from trunkwatch_local.template import load_template


@dataclass(frozen=True)
class StreamSource:
    """A DynamoDB stream event source mapping of one function."""

    function: str
    patterns: tuple[dict[str, Any], ...]
    batch_size: int
    max_retries: int
    bisect: bool
    report_item_failures: bool
    starting_position: str
    # MaximumBatchingWindowInSeconds: how long Lambda gathers records before invoking with
    # fewer than batch_size (the local pump delivers at once; the benchmark accounts for it).
    batching_window_s: float = 0.0


@dataclass(frozen=True)
class QueueSource:
    """An SQS event source mapping of one function, with its queue's properties."""

    function: str
    queue: str  # the queue's logical id
    batch_size: int
    report_item_failures: bool
    fifo: bool
    retention_s: int
    visibility_timeout_s: int


@dataclass
class Wiring:
    table: dict[str, Any]
    parameters: dict[str, str]
    environment: dict[str, Any]  # Globals' variables, unresolved
    resources: dict[str, Any]
    conditions: dict[str, Any]  # the template's Conditions
    functions: dict[str, Path] = field(default_factory=dict)  # logical id -> handler module file
    streams: list[StreamSource] = field(default_factory=list)
    queues: list[QueueSource] = field(default_factory=list)
    schedules: dict[str, str] = field(default_factory=dict)  # function logical id -> expression
    # logical id -> the function's own variables (over Globals'), unresolved
    function_environment: dict[str, dict[str, Any]] = field(default_factory=dict)

    def environment_of(self, function: str, refs: dict[str, str]) -> dict[str, str]:
        """The environment the template gives `function` (Globals' variables, then its own),
        resolved against `refs`; a value that cannot be resolved is an error naming it."""
        variables = {**self.environment, **self.function_environment.get(function, {})}
        resolved: dict[str, str] = {}
        for name, value in variables.items():
            found = self.resolve(value, refs)
            if found is None:
                raise ConfigError(f"{function}: cannot resolve environment variable {name} ({value!r})")
            resolved[name] = str(found)
        return resolved

    def _truth(self, value: Any, refs: dict[str, str]) -> bool:
        """A condition of Fn::Equals / Fn::Not / Fn::And / Fn::Or / Condition, at the defaults."""
        if not isinstance(value, dict) or len(value) != 1:
            raise ValueError(f"unsupported condition {value!r}")
        ((fn, arg),) = value.items()
        if fn == "Condition":
            return self._truth(self.conditions.get(arg), refs)
        if fn == "Fn::Equals":
            left, right = (self.resolve(a, refs) for a in arg)
            return str(left) == str(right)
        if fn == "Fn::Not":
            return not self._truth(arg[0], refs)
        if fn == "Fn::And":
            return all(self._truth(a, refs) for a in arg)
        if fn == "Fn::Or":
            return any(self._truth(a, refs) for a in arg)
        raise ValueError(f"unsupported condition function {fn}")

    def resolve(self, value: Any, refs: dict[str, str]) -> Any:
        """Resolve Ref / Fn::Sub / Fn::GetAtt / Fn::Join / Fn::If against local names; None if
        unknown."""
        if isinstance(value, str | int | float | bool):
            return value
        if not isinstance(value, dict) or len(value) != 1:
            return None
        ((fn, arg),) = value.items()
        if fn == "Ref":
            return refs.get(arg, self.parameters.get(arg))
        if fn == "Fn::If":
            name, then, otherwise = arg
            return self.resolve(then if self._truth({"Condition": name}, refs) else otherwise, refs)
        if fn == "Fn::GetAtt":
            name = ".".join(arg) if isinstance(arg, list) else arg
            return refs.get(name)
        if fn == "Fn::Join":
            parts = [self.resolve(p, refs) for p in arg[1]]
            return None if any(p is None for p in parts) else str(arg[0]).join(str(p) for p in parts)
        if fn == "Fn::Sub":
            text, extra = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
            local = {k: self.resolve(v, refs) for k, v in extra.items()}

            def substitute(match: re.Match[str]) -> str:
                name = match.group(1)
                found = local.get(name, refs.get(name, self.parameters.get(name)))
                if found is None:
                    raise KeyError(name)
                return str(found)

            try:
                return re.sub(r"\$\{([^}!]+)\}", substitute, text)
            except KeyError:
                return None
        return None


def read_wiring(path: Path) -> Wiring:
    try:
        template = load_template(path)
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot read {path}: {err}") from None
    resources = template.get("Resources") or {}
    tables = [r for r in resources.values() if r.get("Type") == "AWS::DynamoDB::Table"]
    if len(tables) != 1:
        raise ConfigError(f"{path}: expected exactly one AWS::DynamoDB::Table, found {len(tables)}")
    wiring = Wiring(
        table=tables[0].get("Properties") or {},
        parameters={
            name: str(spec.get("Default", "")) for name, spec in (template.get("Parameters") or {}).items()
        },
        environment=((template.get("Globals") or {}).get("Function") or {})
        .get("Environment", {})
        .get("Variables", {}),
        resources=resources,
        conditions=template.get("Conditions") or {},
    )
    for logical_id, resource in resources.items():
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        props = resource.get("Properties") or {}
        own = (props.get("Environment") or {}).get("Variables") or {}
        if own:
            wiring.function_environment[logical_id] = own
        module, _, _ = str(props.get("Handler", "app.lambda_handler")).rpartition(".")
        wiring.functions[logical_id] = (
            path.parent / str(props.get("CodeUri", "")) / f"{module.replace('.', '/')}.py"
        )
        for event in (props.get("Events") or {}).values():
            spec = event.get("Properties") or {}
            if event.get("Type") == "DynamoDB":
                filters = (spec.get("FilterCriteria") or {}).get("Filters") or []
                wiring.streams.append(
                    StreamSource(
                        function=logical_id,
                        patterns=tuple(json.loads(f["Pattern"]) for f in filters),
                        batch_size=int(spec.get("BatchSize", 100)),
                        max_retries=int(spec.get("MaximumRetryAttempts", -1)),
                        bisect=bool(spec.get("BisectBatchOnFunctionError", False)),
                        report_item_failures="ReportBatchItemFailures"
                        in (spec.get("FunctionResponseTypes") or []),
                        starting_position=str(spec.get("StartingPosition", "TRIM_HORIZON")),
                        batching_window_s=float(spec.get("MaximumBatchingWindowInSeconds", 0)),
                    )
                )
            elif event.get("Type") == "SQS":
                wiring.queues.append(_queue_source(path, resources, logical_id, spec))
            elif event.get("Type") in ("Schedule", "ScheduleV2"):
                wiring.schedules[logical_id] = str(
                    wiring.resolve(spec.get("Schedule") or spec.get("ScheduleExpression"), {})
                )
    return wiring


def _queue_source(path: Path, resources: dict[str, Any], function: str, spec: dict[str, Any]) -> QueueSource:
    """The SQS event source of `function` (`spec`: the event's properties), on a queue of the
    template (Queue: !GetAtt <queue>.Arn)."""
    arn = spec.get("Queue")
    name = arn.get("Fn::GetAtt") if isinstance(arn, dict) else None
    queue = (name.split(".")[0] if isinstance(name, str) else name[0]) if name else None
    if queue is None or (resources.get(queue) or {}).get("Type") != "AWS::SQS::Queue":
        raise ConfigError(f"{path}: {function}'s SQS event names no queue of the template ({arn!r})")
    props = resources[queue].get("Properties") or {}
    return QueueSource(
        function=function,
        queue=queue,
        batch_size=int(spec.get("BatchSize", 10)),
        report_item_failures="ReportBatchItemFailures" in (spec.get("FunctionResponseTypes") or []),
        fifo=bool(props.get("FifoQueue", False)),
        retention_s=int(props.get("MessageRetentionPeriod", 345600)),
        visibility_timeout_s=int(props.get("VisibilityTimeout", 30)),
    )
