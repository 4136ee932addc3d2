"""template.yaml as CloudFormation will see it: translated by the SAM translator and checked
for the properties the rest of trunkwatch relies on; plus the template loader and the
sample events of events/."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.utilities.data_classes import (
    APIGatewayProxyEvent,
    DynamoDBStreamEvent,
    EventBridgeEvent,
)
from aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event import (
    APIGatewayAuthorizerTokenEvent,
)
from pynamodb.attributes import TTLAttribute

from tests.support.iam import actions as _actions
from tests.support.iam import resources_of as _resources_of
from tests.support.iam import statements as _statements
from tests.support.iam import translated_resources
from tests.support.paths import ROOT
from trunkwatch.app.configuration import load_configuration
from trunkwatch.app.settings import PIPELINE, Edge
from trunkwatch.domain.config import parse_duration
from trunkwatch.storage import keys
from trunkwatch.storage.items import (
    CellItem,
    CommitItem,
    NotificationLog,
    SilenceAuditItem,
    SilenceItem,
    TickItem,
)
from trunkwatch.storage.keys import TTL_ATTRIBUTE
from trunkwatch_local import template as template_module
from trunkwatch_local.template import TEMPLATE_ENV, TemplateError, find_template, load_template

TEMPLATE = ROOT / "template.yaml"
EVENTS = ROOT / "events"
FUNCTIONS = (
    "DispatcherFunction",
    "IngestFunction",
    "EvaluatorFunction",
    "NotifierFunction",
    "ApiFunction",
    "AuthorizerFunction",
    "WebhookFunction",
)
TABLE_ARN = {"Fn::GetAtt": ["Table", "Arn"]}
DLQ_ARN = {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]}
STREAM_ARN = {"Fn::GetAtt": ["Table", "StreamArn"]}
STREAM_ACTIONS = {
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:ListStreams",
}
EXAMPLE_ACCOUNT = "123456789012"


@pytest.fixture(scope="module")
def source() -> dict[str, Any]:
    return load_template(TEMPLATE)


@pytest.fixture(scope="module")
def resources(source: dict[str, Any]) -> dict[str, Any]:
    """The translated template's resources (local code paths stand in as S3 objects)."""
    return translated_resources(TEMPLATE)


def _of_type(resources: dict[str, Any], kind: str) -> dict[str, Any]:
    return {name: r for name, r in resources.items() if r["Type"] == kind}


def _sub_text(value: Any) -> str:
    """The text of an `Fn::Sub` (either form)."""
    sub = value["Fn::Sub"]
    return sub if isinstance(sub, str) else sub[0]


def _with_defaults(text: str, source: dict[str, Any]) -> str:
    """A `Fn::Sub` text with the template parameters' defaults filled in."""
    defaults = {name: str(p["Default"]) for name, p in source["Parameters"].items()}
    return re.sub(r"\$\{(\w+)\}", lambda m: defaults[m.group(1)], text)


def _matches(pattern: dict[str, Any], event: dict[str, Any]) -> bool:
    """Lambda event filtering for the pattern forms the template uses (lists of exact values)."""
    for key, expected in pattern.items():
        if isinstance(expected, dict):
            if not isinstance(event.get(key), dict) or not _matches(expected, event[key]):
                return False
        elif key not in event or event[key] not in expected:
            return False
    return True


def _stream_mapping(resources: dict[str, Any], function: str) -> dict[str, Any]:
    (mapping,) = [
        r["Properties"]
        for r in _of_type(resources, "AWS::Lambda::EventSourceMapping").values()
        if r["Properties"]["FunctionName"] == {"Ref": function}
    ]
    return mapping


def _pattern(resources: dict[str, Any], function: str) -> dict[str, Any]:
    (only,) = _stream_mapping(resources, function)["FilterCriteria"]["Filters"]
    pattern: dict[str, Any] = json.loads(only["Pattern"])
    return pattern


def _token_shape(source: dict[str, Any]) -> str:
    """The Authorization header API Gateway lets through to the authorizer."""
    authorizer = source["Resources"]["Api"]["Properties"]["Auth"]["Authorizers"]["TokenAuthorizer"]
    shape: str = authorizer["Identity"]["ValidationExpression"]
    return shape


def _event(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    return data


# --- the template loader ------------------------------------------------------------


def test_loader_turns_short_form_tags_into_intrinsic_dicts(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(
        "AWSTemplateFormatVersion: 2010-09-09\n"
        "A: !Ref Table\n"
        "B: !GetAtt Table.StreamArn\n"
        "C: !GetAtt [Table, Arn]\n"
        "D: !Sub arn:${AWS::Partition}:ssm:::parameter/${Name}\n"
        "E: !Sub ['${X}-y', {X: !Ref Stage}]\n"
        "F: !Join ['', [a, !Ref B]]\n"
        "G: !If [IsProd, !Select [0, !Split [',', 'a,b']], !Ref AWS::NoValue]\n"
        "H: !Equals [!Ref Env, prod]\n"
        "I: !Condition IsProd\n",
        encoding="utf-8",
    )
    assert load_template(path) == {
        "AWSTemplateFormatVersion": "2010-09-09",
        "A": {"Ref": "Table"},
        "B": {"Fn::GetAtt": ["Table", "StreamArn"]},
        "C": {"Fn::GetAtt": ["Table", "Arn"]},
        "D": {"Fn::Sub": "arn:${AWS::Partition}:ssm:::parameter/${Name}"},
        "E": {"Fn::Sub": ["${X}-y", {"X": {"Ref": "Stage"}}]},
        "F": {"Fn::Join": ["", ["a", {"Ref": "B"}]]},
        "G": {
            "Fn::If": ["IsProd", {"Fn::Select": [0, {"Fn::Split": [",", "a,b"]}]}, {"Ref": "AWS::NoValue"}]
        },
        "H": {"Fn::Equals": [{"Ref": "Env"}, "prod"]},
        "I": {"Condition": "IsProd"},
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("A: !Bogus x\n", "unknown tag !Bogus at line 1, column 4"),
        ("A: 1\nB: 2\nA: 3\n", "duplicate key 'A' at line 3, column 1"),
        ("A: !GetAtt Table\n", "!GetAtt 'Table' needs Resource.Attribute"),
        ("- just\n- a list\n", "a template is a mapping, found list"),
        ("A: [unclosed\n", "not valid YAML"),
    ],
)
def test_loader_rejects_what_cloudformation_would_with_the_place(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TemplateError) as err:
        load_template(path)
    assert message in str(err.value)
    assert str(path) in str(err.value)


def test_find_template_prefers_the_environment_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other.yaml"
    other.write_text("Resources: {}\n", encoding="utf-8")
    monkeypatch.setenv(TEMPLATE_ENV, str(other))
    assert find_template() == other


def test_find_template_names_a_missing_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TEMPLATE_ENV, str(tmp_path / "gone.yaml"))
    with pytest.raises(TemplateError, match=f"{TEMPLATE_ENV}=.*gone.yaml: no such file"):
        find_template()


def test_find_template_ignores_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TEMPLATE_ENV, raising=False)
    (tmp_path / "template.yaml").write_text("Resources: {}\n", encoding="utf-8")
    (tmp_path / "functions").mkdir()
    monkeypatch.chdir(tmp_path)
    # Another project's template in the working directory is not ours.
    assert find_template() == TEMPLATE


def test_find_template_uses_the_bundled_copy_outside_a_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TEMPLATE_ENV, raising=False)
    package = tmp_path / "site-packages" / "trunkwatch_local"
    (package / "project" / "functions").mkdir(parents=True)
    (package / "project" / "template.yaml").write_text("Resources: {}\n", encoding="utf-8")
    monkeypatch.setattr(template_module, "__file__", str(package / "template.py"))
    assert find_template() == package / "project" / "template.yaml"


def test_find_template_explains_when_there_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TEMPLATE_ENV, raising=False)
    monkeypatch.setattr(template_module, "__file__", str(tmp_path / "site-packages" / "template.py"))
    with pytest.raises(TemplateError, match=f"no template.yaml in the checkout .*set {TEMPLATE_ENV}"):
        find_template()


def test_the_project_template_loads_with_intrinsics_resolved(source: dict[str, Any]) -> None:
    assert source["Transform"] == "AWS::Serverless-2016-10-31"
    assert source["AWSTemplateFormatVersion"] == "2010-09-09"
    assert source["Globals"]["Function"]["Layers"] == [{"Ref": "DomainLayer"}, {"Ref": "ConfigLayer"}]
    events = source["Resources"]["EvaluatorFunction"]["Properties"]["Events"]
    assert events["CellStream"]["Properties"]["Stream"] == {"Fn::GetAtt": ["Table", "StreamArn"]}


# --- parameters and the configuration they seed -------------------------------------


def test_parameter_defaults(source: dict[str, Any]) -> None:
    defaults = {name: p.get("Default") for name, p in source["Parameters"].items()}
    assert defaults == {
        "Schedule": "rate(1 minute)",
        "FailuresToOpen": 3,
        "TrunkBandMaxJobs": 5,
        "RepeatInterval": "4h",
        "SecretsPrefix": "trunkwatch/",
        "ReceiverSecretsPrefix": "trunkwatch/receivers/",
        "ApiTokensParameter": "/trunkwatch/api-tokens",
        "WebhookSecretParameter": "/trunkwatch/github-webhook",
        "BuildkiteWebhookTokenParameter": "/trunkwatch/buildkite-webhook",
        "LogLevel": "INFO",
        "LogRetentionDays": 30,
        "Tracing": "PassThrough",
        "CreateDashboard": "false",
        "EncryptAlarmTopic": "false",
        "AlarmSubscription": "",
    }


def test_the_packaged_configuration_is_a_valid_pytorch_deployment() -> None:
    deployment = load_configuration(ROOT / "config" / "trunkwatch.yaml")
    (trunk,) = deployment.trunks
    assert (trunk.repo, trunk.branch, trunk.source) == ("pytorch/pytorch", "main", "hud")
    assert deployment.rule_for(trunk).include == "^(pull|trunk|docs-build|linux-binary-)"


def _built_config_layer(source: dict[str, Any], config: Path, artifacts: Path) -> Path:
    """ConfigLayer built as `sam build` builds it (its Makefile's target, in a copy of its
    directory, ARTIFACTS_DIR set) with `config` as config/trunkwatch.yaml, extracted where
    Lambda extracts layers (`artifacts` standing for /opt); the file CONFIG_FILE names there."""
    layer = source["Resources"]["ConfigLayer"]
    assert layer["Metadata"] == {"BuildMethod": "makefile"}
    scratch = artifacts.parent / "scratch"
    shutil.copytree(ROOT / layer["Properties"]["ContentUri"], scratch)
    shutil.copyfile(config, scratch / "trunkwatch.yaml")  # the documented step (docs/deploying.md)
    built = subprocess.run(
        ["make", "--no-print-directory", "build-ConfigLayer"],
        cwd=scratch,
        env={**os.environ, "ARTIFACTS_DIR": str(artifacts)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    deployed = Path(source["Globals"]["Function"]["Environment"]["Variables"]["CONFIG_FILE"])
    return artifacts / deployed.relative_to("/opt")


@pytest.mark.parametrize("config", ["config/trunkwatch.yaml", "examples/organization.yaml"])
def test_the_functions_read_the_configuration_as_written(
    source: dict[str, Any], config: str, tmp_path: Path
) -> None:
    """The file a person writes reaches the functions unchanged, whatever its size, and they
    read it the way `trunkwatch check-config` does."""
    packaged = _built_config_layer(source, ROOT / config, tmp_path / "opt")
    assert packaged.read_bytes() == (ROOT / config).read_bytes()
    environ = {"TABLE_NAME": "t", "AWS_REGION": "us-east-1", "CONFIG_FILE": str(packaged)}
    edge = Edge.from_environ(PIPELINE, environ)
    assert edge.deployment() == load_configuration(ROOT / config)
    assert len(edge.deployment().trunks) == (100 if "organization" in config else 1)


@pytest.mark.parametrize("value", ["4h", "0", "90s", "1h30m", "250ms", "1.5h"])
def test_repeat_interval_pattern_accepts_what_the_config_accepts(source: dict[str, Any], value: str) -> None:
    parse_duration(value)
    assert re.fullmatch(source["Parameters"]["RepeatInterval"]["AllowedPattern"], value)


@pytest.mark.parametrize("value", ["4 hours", "h", "", "-1h", "4d"])
def test_repeat_interval_pattern_rejects_what_the_config_rejects(source: dict[str, Any], value: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(value)
    assert not re.fullmatch(source["Parameters"]["RepeatInterval"]["AllowedPattern"], value)


def test_secrets_prefix_cannot_widen_to_every_secret(source: dict[str, Any]) -> None:
    pattern = source["Parameters"]["SecretsPrefix"]["AllowedPattern"]
    assert re.fullmatch(pattern, "trunkwatch/") and re.fullmatch(pattern, "ci/trunkwatch/")
    for too_wide in ("", "/", "trunkwatch", "*"):
        assert not re.fullmatch(pattern, too_wide)


def test_rule_defaults_are_json_of_rule_keys(resources: dict[str, Any], source: dict[str, Any]) -> None:
    for name in FUNCTIONS:
        variables = resources[name]["Properties"]["Environment"]["Variables"]
        values = json.loads(_with_defaults(_sub_text(variables["RULE_DEFAULTS"]), source))
        assert values == {"failures_to_open": 3, "trunk_band_max_jobs": 5, "repeat_interval": "4h"}


def test_every_function_gets_the_shared_environment(resources: dict[str, Any]) -> None:
    for name in FUNCTIONS:
        variables = resources[name]["Properties"]["Environment"]["Variables"]
        assert variables["TABLE_NAME"] == {"Ref": "Table"}
        assert variables["TOPIC_ARN"] == {"Ref": "AlertTopic"}
        assert variables["CONFIG_FILE"] == "/opt/trunkwatch/config.yaml"
        assert variables["API_TOKENS_PARAMETER"] == {"Ref": "ApiTokensParameter"}
        assert variables["POWERTOOLS_SERVICE_NAME"] == "trunkwatch"
        assert variables["POWERTOOLS_METRICS_NAMESPACE"] == "Trunkwatch"
        assert variables["POWERTOOLS_LOG_LEVEL"] == {"Ref": "LogLevel"}
    notifier = resources["NotifierFunction"]["Properties"]["Environment"]["Variables"]
    assert _sub_text(notifier["API_URL"]) == "https://${Api}.execute-api.${AWS::Region}.${AWS::URLSuffix}/v1"


def test_dashboard_url_points_at_the_dashboard(resources: dict[str, Any]) -> None:
    name = _sub_text(resources["Dashboard"]["Properties"]["DashboardName"])
    for function in FUNCTIONS:
        # Empty when the Dashboard parameter leaves the dashboard out.
        condition, present, absent = resources[function]["Properties"]["Environment"]["Variables"][
            "DASHBOARD_URL"
        ]["Fn::If"]
        assert (condition, absent) == ("WithDashboard", "")
        assert resources["Dashboard"]["Condition"] == "WithDashboard"
        url = _sub_text(present)
        assert url.endswith(f"#dashboards/dashboard/{name}")
        assert url.startswith(
            "https://${AWS::Region}.console.aws.amazon.com/cloudwatch/home?region=${AWS::Region}"
        )


# --- functions ----------------------------------------------------------------------


def test_functions_run_python312_on_arm64_with_the_domain_layer(resources: dict[str, Any]) -> None:
    functions = _of_type(resources, "AWS::Lambda::Function")
    assert set(functions) == set(FUNCTIONS)
    layers = _of_type(resources, "AWS::Lambda::LayerVersion")
    (domain,) = [layer for layer in layers if layer.startswith("DomainLayer")]
    (api,) = [layer for layer in layers if layer.startswith("ApiLayer")]
    (config,) = [layer for layer in layers if layer.startswith("ConfigLayer")]
    for name, function in functions.items():
        props = function["Properties"]
        assert props["Runtime"] == "python3.12", name
        assert props["Architectures"] == ["arm64"], name
        assert props["Handler"] == "app.lambda_handler", name
        # pydantic and the validating resolver's parts only where the API runs.
        wanted = [domain, config, api] if name == "ApiFunction" else [domain, config]
        assert props["Layers"] == [{"Ref": layer} for layer in wanted], name
        assert props["TracingConfig"] == {"Mode": {"Ref": "Tracing"}}, name
        # The webhook function's size is chosen by the push benchmark's billed GB-s.
        assert props["MemorySize"] == (128 if name == "WebhookFunction" else 256), name
        assert props["Code"]["S3Key"] == f"functions/{name.removesuffix('Function').lower()}/", name


def test_layer_is_built_by_its_makefile_for_the_functions_runtime(
    source: dict[str, Any], resources: dict[str, Any]
) -> None:
    makefile = (ROOT / "layers" / "trunkwatch" / "Makefile").read_text(encoding="utf-8")
    assert "ARCH ?= aarch64" in makefile  # the functions' arm64
    for name in ("DomainLayer", "ApiLayer"):
        layer = source["Resources"][name]
        assert layer["Metadata"]["BuildMethod"] == "makefile"
        assert layer["Properties"]["ContentUri"] == "layers/trunkwatch/"
        assert re.search(rf"^build-{name}:", makefile, re.MULTILINE)
    translated = _of_type(resources, "AWS::Lambda::LayerVersion").values()
    assert len(translated) == 3  # DomainLayer, ApiLayer and ConfigLayer
    for layer in translated:
        assert layer["Properties"]["CompatibleRuntimes"] == ["python3.12"]
        assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]


def test_the_domain_layer_leaves_out_pydantic_and_what_the_runtime_ships() -> None:
    requirements = (ROOT / "layers" / "trunkwatch" / "requirements.txt").read_text(encoding="utf-8")
    assert "pydantic" not in requirements.lower()
    makefile = (ROOT / "layers" / "trunkwatch" / "Makefile").read_text(encoding="utf-8")
    (provided,) = re.findall(r"^RUNTIME_PROVIDED := (.*)$", makefile, re.MULTILINE)
    assert {"boto3", "botocore", "s3transfer", "urllib3", "dateutil", "jmespath", "six"} <= set(
        provided.split()
    )


def test_schedules_use_the_schedule_parameter(resources: dict[str, Any]) -> None:
    rules = _of_type(resources, "AWS::Events::Rule")
    assert set(rules) == {"DispatcherFunctionPoll", "EvaluatorFunctionSweep"}
    for rule in rules.values():
        assert rule["Properties"]["ScheduleExpression"] == {"Ref": "Schedule"}
    assert rules["DispatcherFunctionPoll"]["Properties"]["Targets"][0]["Arn"] == {
        "Fn::GetAtt": ["DispatcherFunction", "Arn"]
    }
    assert rules["EvaluatorFunctionSweep"]["Properties"]["Targets"][0]["Arn"] == {
        "Fn::GetAtt": ["EvaluatorFunction", "Arn"]
    }


# The evaluator takes a first poll's ~20,000 cell records in ~20 invocations.
@pytest.mark.parametrize(("function", "batch_size"), [("EvaluatorFunction", 1000), ("NotifierFunction", 100)])
def test_stream_mappings_retry_bisect_and_dead_letter(
    resources: dict[str, Any], function: str, batch_size: int
) -> None:
    mapping = _stream_mapping(resources, function)
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": ["Table", "StreamArn"]}
    assert mapping["StartingPosition"] == "TRIM_HORIZON"
    assert mapping["BatchSize"] == batch_size
    # The evaluator gathers a poll's cells for a second; a settled tick is one record.
    assert mapping["MaximumBatchingWindowInSeconds"] == (1 if function == "EvaluatorFunction" else 0)
    assert mapping["MaximumRetryAttempts"] == 3
    assert mapping["BisectBatchOnFunctionError"] is True
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["DestinationConfig"] == {"OnFailure": {"Destination": DLQ_ARN}}
    # SAM grants the function's role the send to its failure destination.
    role = resources[f"{function}Role"]
    sends = [s for s in _statements(role) if "sqs:SendMessage" in _actions(s)]
    assert [_resources_of(s) for s in sends] == [[DLQ_ARN]]


def test_stream_filters_route_cells_to_the_evaluator_and_settled_ticks_to_the_notifier(
    resources: dict[str, Any],
) -> None:
    assert _pattern(resources, "EvaluatorFunction") == {
        "eventName": ["INSERT", "MODIFY"],
        "dynamodb": {"NewImage": {"kind": {"S": ["cell"]}}},
    }
    assert _pattern(resources, "NotifierFunction") == {
        "eventName": ["INSERT", "MODIFY"],
        "dynamodb": {"NewImage": {"kind": {"S": ["tick"]}, "settled": {"BOOL": [True]}}},
    }


def test_sample_stream_events_reach_only_their_function(resources: dict[str, Any]) -> None:
    evaluator, notifier = _pattern(resources, "EvaluatorFunction"), _pattern(resources, "NotifierFunction")
    cells = _event("evaluator_stream.json")["Records"]
    (tick,) = _event("notifier_stream.json")["Records"]
    assert len(cells) == 2
    assert all(_matches(evaluator, r) and not _matches(notifier, r) for r in cells)
    assert _matches(notifier, tick) and not _matches(evaluator, tick)
    unsettled = json.loads(json.dumps(tick))
    unsettled["dynamodb"]["NewImage"].pop("settled")
    removed = {**cells[0], "eventName": "REMOVE"}
    assert not _matches(notifier, unsettled)
    assert not _matches(evaluator, removed)


# --- storage, topics, queue ---------------------------------------------------------


def test_table_keys_stream_ttl_recovery_and_encryption(resources: dict[str, Any]) -> None:
    table = resources["Table"]
    props = table["Properties"]
    assert props["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    assert props["AttributeDefinitions"] == [
        {"AttributeName": "pk", "AttributeType": "S"},
        {"AttributeName": "sk", "AttributeType": "S"},
    ]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["SSESpecification"] == {"SSEEnabled": True}
    assert table["DeletionPolicy"] == table["UpdateReplacePolicy"] == "Retain"
    assert props["DeletionProtectionEnabled"] is True


def test_every_expiring_item_expires_through_the_tables_ttl(resources: dict[str, Any]) -> None:
    """DynamoDB deletes only what carries the one TTL attribute the table names, as epoch
    seconds (PynamoDB's TTLAttribute); every kind that must not accumulate carries it."""
    ttl = resources["Table"]["Properties"]["TimeToLiveSpecification"]
    assert ttl["Enabled"] is True
    expiring = (CellItem, CommitItem, TickItem, NotificationLog, SilenceItem, SilenceAuditItem)
    for model in expiring:
        (attribute,) = [a for a in model.get_attributes().values() if isinstance(a, TTLAttribute)]
        assert attribute.attr_name == ttl["AttributeName"] == TTL_ATTRIBUTE, model.__name__
    # A TTL deletion is a REMOVE record: it wakes neither the evaluator nor the notifier.
    for function in ("EvaluatorFunction", "NotifierFunction"):
        (pattern,) = _stream_mapping(resources, function)["FilterCriteria"]["Filters"]
        assert json.loads(pattern["Pattern"])["eventName"] == ["INSERT", "MODIFY"]


def test_alert_topic_is_encrypted_and_alarms_use_a_topic_cloudwatch_can_publish_to(
    source: dict[str, Any], resources: dict[str, Any]
) -> None:
    assert resources["AlertTopic"]["Properties"]["KmsMasterKeyId"] == "alias/aws/sns"
    # The alarm topic's own key is optional: its messages are alarm states, and the key
    # is a fixed monthly fee.
    assert resources["AlarmTopic"]["Properties"]["KmsMasterKeyId"] == {
        "Fn::If": ["WithAlarmTopicKey", {"Ref": "AlarmTopicKey"}, {"Ref": "AWS::NoValue"}]
    }
    assert resources["AlarmTopicKey"]["Condition"] == "WithAlarmTopicKey"
    assert source["Parameters"]["EncryptAlarmTopic"]["Default"] == "false"
    key = resources["AlarmTopicKey"]["Properties"]
    assert key["EnableKeyRotation"] is True
    (grant,) = [
        s for s in key["KeyPolicy"]["Statement"] if s["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    ]
    assert sorted(grant["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey*"]


def test_dead_letter_queue_is_encrypted_and_keeps_messages_14_days(resources: dict[str, Any]) -> None:
    props = resources["DeadLetterQueue"]["Properties"]
    assert props["SqsManagedSseEnabled"] is True
    assert props["MessageRetentionPeriod"] == 14 * 24 * 3600


# --- least privilege ----------------------------------------------------------------


def test_dynamodb_access_is_on_the_table_only(resources: dict[str, Any]) -> None:
    for name, role in _of_type(resources, "AWS::IAM::Role").items():
        for statement in _statements(role):
            assert statement["Resource"] != "*", name
            actions = {a for a in _actions(statement) if a.startswith("dynamodb:")}
            if actions & STREAM_ACTIONS:
                assert actions == STREAM_ACTIONS and _resources_of(statement) == [STREAM_ARN], name
            elif actions:
                assert _resources_of(statement) == [TABLE_ARN], name


@pytest.mark.parametrize("function", ["EvaluatorFunction", "NotifierFunction"])
def test_stream_readers_read_only_the_tables_stream(resources: dict[str, Any], function: str) -> None:
    role = resources[f"{function}Role"]
    assert resources[function]["Properties"]["Role"] == {"Fn::GetAtt": [f"{function}Role", "Arn"]}
    # Not SAM's AWSLambdaDynamoDBExecutionRole, whose stream actions are on "*".
    managed = [_sub_text(arn) for arn in role["Properties"]["ManagedPolicyArns"]]
    assert managed == [
        "arn:${AWS::Partition}:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
        "arn:${AWS::Partition}:iam::aws:policy/AWSXrayWriteOnlyAccess",
    ]
    (stream,) = [s for s in _statements(role) if set(_actions(s)) & STREAM_ACTIONS]
    assert set(_actions(stream)) == STREAM_ACTIONS and _resources_of(stream) == [STREAM_ARN]
    (dead_letters,) = [s for s in _statements(role) if "sqs:SendMessage" in _actions(s)]
    assert _resources_of(dead_letters) == [DLQ_ARN]
    mapping = _stream_mapping(resources, function)
    assert mapping["EventSourceArn"] == STREAM_ARN


@pytest.mark.parametrize(
    ("function", "actions"),
    [
        ("IngestFunction", {"GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem", "BatchWriteItem"}),
        ("EvaluatorFunction", {"GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem"}),
        ("NotifierFunction", {"GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem"}),
        ("ApiFunction", {"GetItem", "BatchGetItem", "Query", "PutItem"}),
        ("AuthorizerFunction", set()),
        (
            "WebhookFunction",
            {"GetItem", "BatchGetItem", "Query", "PutItem", "UpdateItem", "BatchWriteItem"},
        ),
    ],
)
def test_table_actions_per_function(resources: dict[str, Any], function: str, actions: set[str]) -> None:
    granted = {
        a.removeprefix("dynamodb:")
        for s in _statements(resources[f"{function}Role"])
        for a in _actions(s)
        if a.startswith("dynamodb:") and a not in STREAM_ACTIONS
    }
    assert granted == actions


def test_the_api_writes_only_silence_and_audit_items(resources: dict[str, Any]) -> None:
    from trunkwatch.storage.keys import SILENCE_AUDIT, SILENCES

    statements = list(_statements(resources["ApiFunctionRole"]))
    reads = [s for s in statements if set(_actions(s)) & {"dynamodb:GetItem", "dynamodb:Query"}]
    writes = [s for s in statements if any(a.startswith("dynamodb:") for a in _actions(s))]
    writes = [s for s in writes if s not in reads]
    assert [set(_actions(s)) for s in reads] == [
        {"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"}
    ]
    silences, acknowledgements = writes
    assert _actions(silences) == _actions(acknowledgements) == ["dynamodb:PutItem"]
    assert silences["Condition"] == {
        "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [SILENCES, SILENCE_AUDIT]}
    }
    # Acknowledgements, in a partition of their own: never a notification log.
    assert acknowledgements["Condition"] == {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": [_partition(keys.acks(TRUNK_ID))]}
    }


def test_only_the_notifier_publishes_and_only_to_the_alert_topic(resources: dict[str, Any]) -> None:
    publishers = {
        name: _resources_of(s)
        for name, role in _of_type(resources, "AWS::IAM::Role").items()
        for s in _statements(role)
        if "sns:Publish" in _actions(s)
    }
    assert publishers == {"NotifierFunctionRole": [{"Ref": "AlertTopic"}]}


def test_authorizer_reads_the_token_parameter_and_nothing_else(resources: dict[str, Any]) -> None:
    role = resources["AuthorizerFunctionRole"]
    (statement,) = _statements(role)
    assert _actions(statement) == ["ssm:GetParameter"]
    (arn,) = _resources_of(statement)
    assert _sub_text(arn).endswith(":parameter${ApiTokensParameter}")
    assert not any("DynamoDB" in arn for arn in role["Properties"]["ManagedPolicyArns"])


def test_source_tokens_are_readable_by_ingest_alone_and_under_the_prefix(resources: dict[str, Any]) -> None:
    readers: dict[str, list[str]] = {}
    for name, role in _of_type(resources, "AWS::IAM::Role").items():
        for statement in _statements(role):
            if statement["Effect"] != "Allow":
                continue
            if {"secretsmanager:GetSecretValue", "ssm:GetParameter"} & set(_actions(statement)):
                readers.setdefault(name, []).extend(_sub_text(r) for r in _resources_of(statement))
    prefix = "arn:${AWS::Partition}:{service}:${AWS::Region}:${AWS::AccountId}:"
    assert sorted(readers["IngestFunctionRole"]) == sorted(
        [
            prefix.replace("{service}", "ssm") + "parameter/${SecretsPrefix}*",
            prefix.replace("{service}", "secretsmanager") + "secret:${SecretsPrefix}*",
        ]
    )
    for name in ("EvaluatorFunctionRole", "ApiFunctionRole", "DispatcherFunctionRole"):
        assert name not in readers  # the configuration is a file of their layer
    assert sorted(readers["NotifierFunctionRole"]) == sorted(
        [
            prefix.replace("{service}", "ssm") + "parameter/${ReceiverSecretsPrefix}*",
            prefix.replace("{service}", "secretsmanager") + "secret:${ReceiverSecretsPrefix}*",
        ]
    )


def test_the_notifier_reads_receiver_secrets_only(resources: dict[str, Any], source: dict[str, Any]) -> None:
    role = resources["NotifierFunctionRole"]
    ssm = f"arn:aws:ssm:us-east-1:{EXAMPLE_ACCOUNT}:parameter"
    secrets = f"arn:aws:secretsmanager:us-east-1:{EXAMPLE_ACCOUNT}:secret:"
    tokens = source["Parameters"]["ApiTokensParameter"]["Default"]
    assert _may(role, "secretsmanager:GetSecretValue", f"{secrets}trunkwatch/receivers/slack-AbCdEf", source)
    assert _may(role, "ssm:GetParameter", f"{ssm}/trunkwatch/receivers/github-token", source)
    assert not _may(role, "secretsmanager:GetSecretValue", f"{secrets}trunkwatch/github-token-AbCdEf", source)
    assert not _may(role, "ssm:GetParameter", f"{ssm}{tokens}", source)


def _may(role: dict[str, Any], action: str, arn: str, source: dict[str, Any]) -> bool:
    """IAM's verdict for one action on one ARN from a role's inline statements (defaults
    filled in; an explicit Deny wins over any Allow)."""
    verdicts = set()
    for statement in _statements(role):
        if not any(fnmatch.fnmatchcase(action, pattern) for pattern in _actions(statement)):
            continue
        for resource in _resources_of(statement):
            if not isinstance(resource, dict) or "Fn::Sub" not in resource:
                continue
            text = _sub_text(resource)
            pattern = _with_defaults(text, source)
            pattern = pattern.replace("${AWS::Partition}", "aws").replace("${AWS::Region}", "us-east-1")
            pattern = pattern.replace("${AWS::AccountId}", EXAMPLE_ACCOUNT)
            if fnmatch.fnmatchcase(arn, pattern):
                verdicts.add(statement["Effect"])
    return "Allow" in verdicts and "Deny" not in verdicts


def test_ingest_reads_source_tokens_but_never_the_api_tokens(
    resources: dict[str, Any], source: dict[str, Any]
) -> None:
    role = resources["IngestFunctionRole"]
    ssm = f"arn:aws:ssm:us-east-1:{EXAMPLE_ACCOUNT}:parameter"
    secrets = f"arn:aws:secretsmanager:us-east-1:{EXAMPLE_ACCOUNT}:secret:"
    tokens = source["Parameters"]["ApiTokensParameter"]["Default"]
    assert tokens.startswith("/" + source["Parameters"]["SecretsPrefix"]["Default"])  # the overlap
    assert _may(role, "ssm:GetParameter", f"{ssm}/trunkwatch/hud-token", source)
    assert _may(role, "secretsmanager:GetSecretValue", f"{secrets}trunkwatch/github-token-AbCdEf", source)
    assert not _may(role, "ssm:GetParameter", f"{ssm}{tokens}", source)
    assert not _may(role, "ssm:GetParameter", f"{ssm}/other/token", source)
    assert _may(resources["AuthorizerFunctionRole"], "ssm:GetParameter", f"{ssm}{tokens}", source)
    (deny,) = [s for s in _statements(role) if s.get("Sid") == "NeverOtherFunctionsSecrets"]
    assert deny["Effect"] == "Deny"
    assert [_sub_text(r).rsplit(":", 1)[1] for r in _resources_of(deny)] == [
        "parameter${ApiTokensParameter}",
        "parameter${WebhookSecretParameter}",
        "parameter${BuildkiteWebhookTokenParameter}",
    ]


@pytest.mark.parametrize(
    ("parameter", "sid"),
    [
        ("WebhookSecretParameter", "ReadWebhookSecret"),
        ("BuildkiteWebhookTokenParameter", "ReadBuildkiteWebhookToken"),
    ],
)
def test_webhooks_come_through_an_unauthenticated_function_url_that_alone_reads_the_secrets(
    resources: dict[str, Any], source: dict[str, Any], parameter: str, sid: str
) -> None:
    # The function checks each delivery's signature; a URL costs nothing beyond the function.
    url = resources["WebhookFunctionUrl"]
    assert url["Type"] == "AWS::Lambda::Url"
    assert url["Properties"]["AuthType"] == "NONE"
    assert url["Properties"]["TargetFunctionArn"] == {"Ref": "WebhookFunction"}
    assert resources["WebhookFunction"]["Properties"]["Timeout"] == 10  # GitHub waits 10 s
    secret = f"arn:${{AWS::Partition}}:ssm:${{AWS::Region}}:${{AWS::AccountId}}:parameter${{{parameter}}}"

    def reads_secret(statement: dict[str, Any]) -> bool:
        return statement.get("Effect") == "Allow" and any(
            isinstance(r, dict) and "Fn::Sub" in r and _sub_text(r) == secret
            for r in _resources_of(statement)
        )

    readers = {f for f in FUNCTIONS for s in _statements(resources[f"{f}Role"]) if reads_secret(s)}
    assert readers == {"WebhookFunction"}
    # Nor through a prefix: the default parameter sits under SecretsPrefix, which ingest reads.
    default = source["Parameters"][parameter]["Default"]
    assert default.startswith("/" + source["Parameters"]["SecretsPrefix"]["Default"])  # the overlap
    arn = f"arn:aws:ssm:us-east-1:{EXAMPLE_ACCOUNT}:parameter{default}"
    may_read = {f for f in FUNCTIONS if _may(resources[f"{f}Role"], "ssm:GetParameter", arn, source)}
    assert may_read == {"WebhookFunction"}
    role = resources["WebhookFunctionRole"]
    (statement,) = [s for s in _statements(role) if s.get("Sid") == sid]
    assert _actions(statement) == ["ssm:GetParameter"]
    assert [_sub_text(r) for r in _resources_of(statement)] == [secret]
    assert not any("secretsmanager:GetSecretValue" in _actions(s) for s in _statements(role))


def test_github_and_buildkite_secrets_are_two_parameters(source: dict[str, Any]) -> None:
    """A stack fed by both keeps GitHub's signing secret and Buildkite's token apart."""
    parameters = source["Parameters"]
    names = {parameters[p]["Default"] for p in ("WebhookSecretParameter", "BuildkiteWebhookTokenParameter")}
    assert len(names) == 2
    environment = source["Globals"]["Function"]["Environment"]["Variables"]
    assert environment["BUILDKITE_WEBHOOK_TOKEN_PARAMETER"] == {"Ref": "BuildkiteWebhookTokenParameter"}


def test_ingest_never_reads_receiver_secrets_with_the_default_prefixes(
    resources: dict[str, Any], source: dict[str, Any]
) -> None:
    """The defaults put ReceiverSecretsPrefix under SecretsPrefix: an explicit Deny keeps
    the notifier's secrets (Slack webhook URLs, issue-writing tokens) from ingest."""
    role = resources["IngestFunctionRole"]
    parameters = source["Parameters"]
    receivers = parameters["ReceiverSecretsPrefix"]["Default"]
    assert receivers.startswith(parameters["SecretsPrefix"]["Default"])  # the overlap
    ssm = f"arn:aws:ssm:us-east-1:{EXAMPLE_ACCOUNT}:parameter/"
    secrets = f"arn:aws:secretsmanager:us-east-1:{EXAMPLE_ACCOUNT}:secret:"
    for action, arn in (
        ("secretsmanager:GetSecretValue", f"{secrets}{receivers}slack-oncall-AbCdEf"),
        ("ssm:GetParameter", f"{ssm}{receivers}github-issues-token"),
        ("ssm:GetParametersByPath", f"{ssm}{receivers}"),
    ):
        assert not _may(role, action, arn, source), arn
    assert _may(role, "secretsmanager:GetSecretValue", f"{secrets}trunkwatch/github-token-AbCdEf", source)


def _leading_keys(statement: dict[str, Any]) -> list[str]:
    ((operator, tests),) = statement["Condition"].items()
    assert operator in ("ForAllValues:StringLike", "ForAllValues:StringEquals")
    values: list[str] = tests["dynamodb:LeadingKeys"]
    return values


def _partition(key: str) -> str:
    """A partition key as a StringLike pattern of every trunk's: `TRUNK#o/r#main` -> `TRUNK#*`."""
    return key.split("#", 1)[0] + "#*"


TRUNK_ID = "owner/repo#main"


def test_the_webhook_reads_and_writes_only_the_partitions_a_delivery_is_written_to(
    resources: dict[str, Any],
) -> None:
    """Leading keys from storage/keys.py: the internet-facing function never touches alerts,
    notification logs, silences or reruns."""
    statements = [s for s in _statements(resources["WebhookFunctionRole"]) if "Condition" in s]
    (table,) = [s for s in _statements(resources["WebhookFunctionRole"]) if TABLE_ARN in _resources_of(s)]
    assert statements == [table]
    delivery = [
        keys.trunk(TRUNK_ID),
        keys.commits(TRUNK_ID),
        keys.commit_sha(TRUNK_ID, "0" * 40),
        keys.cells(TRUNK_ID, "pull / build"),
        keys.shards(TRUNK_ID, "0" * 40, "pull / build"),
        keys.run(TRUNK_ID, 1),
        keys.ticks(TRUNK_ID),
    ]
    assert _leading_keys(table) == [_partition(key) for key in delivery]
    assert "ForAllValues:StringLike" in table["Condition"]


def test_the_notifier_writes_only_logs_and_acknowledgements_and_deletes_nothing(
    resources: dict[str, Any],
) -> None:
    """A delivery's claim is its notification log entry: the notifier needs no partition of
    its own, and nothing it writes is ever deleted but by TTL."""
    role = resources["NotifierFunctionRole"]
    table = {s["Sid"]: s for s in _statements(role) if TABLE_ARN in _resources_of(s)}
    assert set(table) == {"TableRead", "WriteNotificationLogs", "WriteAcknowledgements"}
    assert set(_actions(table["TableRead"])) == {
        "dynamodb:GetItem",
        "dynamodb:BatchGetItem",
        "dynamodb:Query",
    }
    reads = [
        keys.trunk(TRUNK_ID),
        keys.alerts(TRUNK_ID),
        keys.commits(TRUNK_ID),
        keys.episodes(TRUNK_ID),  # the daily digest's
        keys.fixed(TRUNK_ID),
    ]
    assert _leading_keys(table["TableRead"]) == [
        *(_partition(key) for key in reads),
        keys.SILENCES,
        _partition(keys.logs(TRUNK_ID)),
        _partition(keys.acks(TRUNK_ID)),
    ]
    assert set(_actions(table["WriteAcknowledgements"])) == {"dynamodb:PutItem", "dynamodb:UpdateItem"}
    assert _leading_keys(table["WriteAcknowledgements"]) == [_partition(keys.acks(TRUNK_ID))]
    assert set(_actions(table["WriteNotificationLogs"])) == {"dynamodb:PutItem", "dynamodb:UpdateItem"}
    assert _leading_keys(table["WriteNotificationLogs"]) == [_partition(keys.logs(TRUNK_ID))]
    assert not any("dynamodb:DeleteItem" in _actions(statement) for statement in _statements(role))


def test_the_evaluator_deletes_only_in_the_fixed_breakages_partition(resources: dict[str, Any]) -> None:
    role = resources["EvaluatorFunctionRole"]
    (delete,) = [s for s in _statements(role) if "dynamodb:DeleteItem" in _actions(s)]
    assert _actions(delete) == ["dynamodb:DeleteItem"] and _resources_of(delete) == [TABLE_ARN]
    assert _leading_keys(delete) == [_partition(keys.fixed(TRUNK_ID))]


def test_the_public_webhook_function_has_reserved_concurrency(resources: dict[str, Any]) -> None:
    """A flood at the unauthenticated URL cannot take the concurrency the pipeline needs."""
    reserved = {
        name: r["Properties"]["ReservedConcurrentExecutions"]
        for name, r in _of_type(resources, "AWS::Lambda::Function").items()
        if "ReservedConcurrentExecutions" in r["Properties"]
    }
    assert reserved == {"DispatcherFunction": 1, "WebhookFunction": 10}


def test_every_function_logs_to_its_own_group_with_a_retention(resources: dict[str, Any]) -> None:
    groups = _of_type(resources, "AWS::Logs::LogGroup")
    assert len(groups) == len(FUNCTIONS)
    for function in FUNCTIONS:
        group = function.removesuffix("Function") + "LogGroup"
        props = resources[function]["Properties"]
        assert props["LoggingConfig"]["LogGroup"] == {"Ref": group}, function
        assert groups[group]["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}


def test_the_webhook_function_logs_no_platform_lines(resources: dict[str, Any]) -> None:
    """Millions of deliveries a month are dropped from their body: Lambda's START/END/REPORT
    lines for each would be most of the push path's log bill."""
    config = resources["WebhookFunction"]["Properties"]["LoggingConfig"]
    assert (config["LogFormat"], config["SystemLogLevel"]) == ("JSON", "WARN")
    others = [f for f in FUNCTIONS if f != "WebhookFunction"]
    assert all(set(resources[f]["Properties"]["LoggingConfig"]) == {"LogGroup"} for f in others)


# --- API ----------------------------------------------------------------------------


def test_api_stage_throttling_and_default_token_authorizer(resources: dict[str, Any]) -> None:
    stage = resources["Apiv1Stage"]["Properties"]
    assert stage["StageName"] == "v1"
    assert stage["MethodSettings"] == [
        {"ResourcePath": "/*", "HttpMethod": "*", "ThrottlingBurstLimit": 20, "ThrottlingRateLimit": 10}
    ]
    assert not _of_type(resources, "AWS::ApiGateway::Stage").keys() - {"Apiv1Stage"}
    body = resources["Api"]["Properties"]["Body"]
    route = body["paths"]["/api/v2/{proxy+}"]["x-amazon-apigateway-any-method"]
    assert route["security"] == [{"TokenAuthorizer": []}]
    assert route["x-amazon-apigateway-integration"]["type"] == "aws_proxy"
    scheme = body["components"]["securitySchemes"]["TokenAuthorizer"]
    assert scheme["name"] == "Authorization"
    authorizer = scheme["x-amazon-apigateway-authorizer"]
    assert authorizer["type"] == "token"
    assert authorizer["authorizerResultTtlInSeconds"] == 0
    assert authorizer["authorizerUri"]["Fn::Sub"][1] == {
        "__FunctionArn__": {"Fn::GetAtt": ["AuthorizerFunction", "Arn"]}
    }
    assert re.fullmatch(authorizer["identityValidationExpression"], "Bearer abc.DEF-123_~+/=")
    assert not re.fullmatch(authorizer["identityValidationExpression"], "Basic dXNlcjpwYXNz")


def test_gateway_errors_use_the_api_error_shape(resources: dict[str, Any]) -> None:
    responses = resources["Api"]["Properties"]["Body"]["x-amazon-apigateway-gateway-responses"]
    for kind in ("DEFAULT_4XX", "DEFAULT_5XX"):
        template = responses[kind]["responseTemplates"]["application/json"]
        # $context.error.messageString is already a quoted JSON string.
        assert json.loads(template.replace("$context.error.messageString", '"Unauthorized"')) == {
            "error": "Unauthorized"
        }


# --- alarms, dashboard, outputs -----------------------------------------------------


def test_alarms_on_every_function_and_the_dead_letter_queue(resources: dict[str, Any]) -> None:
    alarms = _of_type(resources, "AWS::CloudWatch::Alarm")
    # No alarm of the dispatcher's own: when it fails or is throttled no trunk is polled,
    # which PollsStoppedAlarm sees (each alarm costs a month's fee). No throttle alarms:
    # Lambda retries throttled stream and queue invocations, so a lasting throttle shows as
    # the iterator-age and polls-stopped alarms.
    alarmed = [f for f in FUNCTIONS if f != "DispatcherFunction"]
    assert set(alarms) == (
        {f"{f}ErrorsAlarm" for f in alarmed}
        | {"EvaluatorFunctionIteratorAgeAlarm", "NotifierFunctionIteratorAgeAlarm"}
        | {"DeadLetterQueueAlarm", "PollErrorsAlarm", "PollsStoppedAlarm", "Api5xxAlarm"}
        | {"TicksSettledBySweepAlarm", "StreamRecordsFailedAlarm"}
        | {"NotificationErrorsAlarm", "NotificationsRejectedAlarm"}
    )
    for name, alarm in alarms.items():
        props = alarm["Properties"]
        assert props["AlarmActions"] == [{"Ref": "AlarmTopic"}], name
        assert props["OKActions"] == [{"Ref": "AlarmTopic"}], name
        if name not in ("PollsStoppedAlarm",) and "IteratorAge" not in name:
            assert (props["ComparisonOperator"], props["Threshold"]) == ("GreaterThanThreshold", 0), name
    for function in alarmed:
        props = alarms[f"{function}ErrorsAlarm"]["Properties"]
        assert (props["Namespace"], props["MetricName"]) == ("AWS/Lambda", "Errors")
        assert props["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": function}}]
    dlq = alarms["DeadLetterQueueAlarm"]["Properties"]
    # Messages sent in the period, not the queue's depth (which stays up for 14 days): the
    # alarm goes back to OK after a quiet period and fires again for each new dead letter.
    assert (dlq["Namespace"], dlq["MetricName"], dlq["Statistic"]) == (
        "AWS/SQS",
        "NumberOfMessagesSent",
        "Sum",
    )
    assert (dlq["EvaluationPeriods"], dlq["TreatMissingData"]) == (1, "notBreaching")
    assert dlq["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": ["DeadLetterQueue", "QueueName"]}}
    ]


def test_service_metric_alarms_use_the_powertools_namespace_and_service(resources: dict[str, Any]) -> None:
    variables = resources["IngestFunction"]["Properties"]["Environment"]["Variables"]
    service = [{"Name": "service", "Value": variables["POWERTOOLS_SERVICE_NAME"]}]
    errors = resources["PollErrorsAlarm"]["Properties"]
    assert (errors["Namespace"], errors["MetricName"]) == (
        variables["POWERTOOLS_METRICS_NAMESPACE"],
        "PollErrors",
    )
    assert errors["Dimensions"] == service and errors["TreatMissingData"] == "notBreaching"
    forced = resources["TicksSettledBySweepAlarm"]["Properties"]
    assert (forced["Namespace"], forced["MetricName"], forced["Dimensions"]) == (
        variables["POWERTOOLS_METRICS_NAMESPACE"],
        "TicksSettledBySweep",
        service,
    )
    # Polls that stop: no successful poll's data point at all is the alarm, not its absence of data.
    stopped = resources["PollsStoppedAlarm"]["Properties"]
    assert (stopped["Namespace"], stopped["MetricName"]) == ("Trunkwatch", "CellsIngested")
    assert stopped["Dimensions"] == service
    assert (stopped["Statistic"], stopped["ComparisonOperator"], stopped["Threshold"]) == (
        "SampleCount",
        "LessThanThreshold",
        1,
    )
    assert stopped["TreatMissingData"] == "breaching"


@pytest.mark.parametrize(
    ("alarm", "metric", "periods"),
    [
        # A receiver retried at every tick alarms once it has failed for three periods in a row.
        ("NotificationErrorsAlarm", "NotificationErrors", 3),
        # A rejected message is never retried: the first one alarms.
        ("NotificationsRejectedAlarm", "NotificationsRejected", 1),
        # A failed stream record is no Lambda error: its own count alarms.
        ("StreamRecordsFailedAlarm", "StreamRecordsFailed", 1),
    ],
)
def test_failed_and_rejected_notifications_and_failed_stream_records_alarm(
    resources: dict[str, Any], alarm: str, metric: str, periods: int
) -> None:
    from benchmarks.cost import FAILURE_METRICS, emitted_metrics

    variables = resources["NotifierFunction"]["Properties"]["Environment"]["Variables"]
    props = resources[alarm]["Properties"]
    assert (props["Namespace"], props["MetricName"]) == (variables["POWERTOOLS_METRICS_NAMESPACE"], metric)
    assert props["Dimensions"] == [{"Name": "service", "Value": variables["POWERTOOLS_SERVICE_NAME"]}]
    assert metric in emitted_metrics() and metric in FAILURE_METRICS  # the code counts it, on failure only
    assert (props["Statistic"], props["Period"], props["TreatMissingData"]) == ("Sum", 300, "notBreaching")
    assert props["EvaluationPeriods"] == props.get("DatapointsToAlarm", periods) == periods


def _evaluate(value: Any, parameters: dict[str, str], conditions: dict[str, Any]) -> Any:
    """The intrinsics the template's conditions and the subscription use, as CloudFormation
    evaluates them."""
    if not isinstance(value, dict):
        return value
    ((name, args),) = value.items()
    if name == "Ref":
        return parameters.get(args, value)  # a resource's stays as written
    if name == "Condition":
        return _evaluate(conditions[args], parameters, conditions)
    values = [_evaluate(arg, parameters, conditions) for arg in args]
    if name == "Fn::Equals":
        return values[0] == values[1]
    if name == "Fn::Not":
        return not values[0]
    if name == "Fn::Select":
        return values[1][int(values[0])]
    if name == "Fn::Split":
        return str(values[1]).split(values[0])
    if name == "Fn::If":
        return values[1] if _evaluate(conditions[args[0]], parameters, conditions) else values[2]
    raise AssertionError(f"an intrinsic this test does not evaluate: {name}")


@pytest.mark.parametrize(
    ("endpoint", "protocol"),
    [
        ("oncall@example.com", "email"),
        ("first.last+trunkwatch@ci.example.org", "email"),
        ("https://alarms.example.com/sns?team=ci", "https"),
        ("", None),
    ],
)
def test_alarm_subscription_subscribes_an_email_or_an_https_endpoint_to_the_alarm_topic(
    source: dict[str, Any], resources: dict[str, Any], endpoint: str, protocol: str | None
) -> None:
    parameter = source["Parameters"]["AlarmSubscription"]
    assert re.fullmatch(parameter["AllowedPattern"], endpoint)
    subscription = resources["AlarmTopicSubscription"]
    conditions = source["Conditions"]
    parameters = {"AlarmSubscription": endpoint}
    exists = _evaluate({"Condition": subscription["Condition"]}, parameters, conditions)
    assert exists is (protocol is not None)  # empty: no subscription, nobody gets alarms
    props = {k: _evaluate(v, parameters, conditions) for k, v in subscription["Properties"].items()}
    if protocol is not None:
        assert props == {"TopicArn": {"Ref": "AlarmTopic"}, "Protocol": protocol, "Endpoint": endpoint}
    assert subscription["Type"] == "AWS::SNS::Subscription"


@pytest.mark.parametrize(
    "endpoint",
    ["http://alarms.example.com/sns", "oncall", "oncall@example", "a@example.com b@example.com", "https://"],
)
def test_alarm_subscription_refuses_what_sns_could_not_deliver_to(
    source: dict[str, Any], endpoint: str
) -> None:
    assert not re.fullmatch(source["Parameters"]["AlarmSubscription"]["AllowedPattern"], endpoint)


def test_stream_lag_and_api_5xx_alarms(resources: dict[str, Any]) -> None:
    for function in ("EvaluatorFunction", "NotifierFunction"):
        props = resources[f"{function}IteratorAgeAlarm"]["Properties"]
        assert (props["Namespace"], props["MetricName"], props["Statistic"]) == (
            "AWS/Lambda",
            "IteratorAge",
            "Maximum",
        )
        assert props["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": function}}]
        assert props["ComparisonOperator"] == "GreaterThanThreshold" and props["Threshold"] > 0
    api = resources["Api5xxAlarm"]["Properties"]
    assert (api["Namespace"], api["MetricName"]) == ("AWS/ApiGateway", "5XXError")
    name = resources["Api"]["Properties"]["Name"]
    assert api["Dimensions"] == [{"Name": "ApiName", "Value": name}, {"Name": "Stage", "Value": "v1"}]


def test_dashboard_shows_service_lambda_and_queue_metrics(resources: dict[str, Any]) -> None:
    text = _sub_text(resources["Dashboard"]["Properties"]["DashboardBody"])
    body = json.loads(re.sub(r"\$\{([\w:.]+)\}", lambda m: m.group(1), text))
    metrics = [m for widget in body["widgets"] for m in widget["properties"]["metrics"]]
    service = {m[1] for m in metrics if m[0] == "Trunkwatch" and m[2:4] == ["service", "trunkwatch"]}
    assert service == {"CellsIngested", "PollErrors", "AlertsFiring", "NotificationsSent", "ApiErrors"}
    for metric in ("Errors", "Duration"):
        assert {m[3] for m in metrics if m[:3] == ["AWS/Lambda", metric, "FunctionName"]} == set(FUNCTIONS)
    assert [
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
        "QueueName",
        "DeadLetterQueue.QueueName",
    ] in metrics


def test_dashboard_shows_trunk_health_per_trunk_and_failures_per_receiver(resources: dict[str, Any]) -> None:
    from trunkwatch.app.trunk_metrics import ALERTS_FIRING, FAILING_JOBS, SECONDS_SINCE_GOOD_POLL

    text = _sub_text(resources["Dashboard"]["Properties"]["DashboardBody"])
    body = json.loads(re.sub(r"\$\{([\w:.]+)\}", lambda m: m.group(1), text))
    searches = [
        m[0]["expression"]
        for widget in body["widgets"]
        for m in widget["properties"]["metrics"]
        if isinstance(m[0], dict)
    ]
    # One series per trunk: the gauges' dimensions as Powertools' single_metric writes them.
    trunks = [
        f"SEARCH('{{Trunkwatch,service,trunk}} MetricName=\"{name}\"', 'Maximum', {period})"
        for name, period in ((FAILING_JOBS, 300), (ALERTS_FIRING, 300), (SECONDS_SINCE_GOOD_POLL, 60))
    ]
    # And one series per receiver: the notifier's per-receiver counts (dimension receiver).
    receivers = [
        f"SEARCH('{{Trunkwatch,receiver,service}} MetricName=\"{name}\"', 'Sum', 300)"
        for name in ("NotificationErrors", "NotificationsRejected")
    ]
    assert sorted(searches) == sorted(trunks + receivers)


def test_outputs(source: dict[str, Any]) -> None:
    outputs = {name: o["Value"] for name, o in source["Outputs"].items()}
    assert _sub_text(outputs["ApiUrl"]) == "https://${Api}.execute-api.${AWS::Region}.${AWS::URLSuffix}/v1"
    assert outputs["AlertTopicArn"] == {"Ref": "AlertTopic"}
    assert outputs["AlarmTopicArn"] == {"Ref": "AlarmTopic"}
    assert outputs["TableName"] == {"Ref": "Table"}
    assert outputs["WebhookUrl"] == {"Fn::GetAtt": ["WebhookFunctionUrl", "FunctionUrl"]}
    assert _sub_text(outputs["DashboardUrl"]).endswith("#dashboards/dashboard/${Dashboard}")


# --- sample events ------------------------------------------------------------------


def test_sample_events_only_use_the_documentation_account() -> None:
    for path in sorted(EVENTS.glob("*.json")):
        text = path.read_text(encoding="utf-8")
        accounts = set(re.findall(r"arn:aws:[\w-]+:[\w-]*:(\d{12}):", text)) | set(
            re.findall(r'"(?:account|accountId)": "(\d+)"', text)
        )
        # A function URL without IAM auth names no account ("anonymous").
        assert accounts <= {EXAMPLE_ACCOUNT}, path.name


def test_stream_samples_parse_as_dynamodb_stream_events() -> None:
    cells = list(DynamoDBStreamEvent(_event("evaluator_stream.json")).records)
    assert [r.event_name.name for r in cells if r.event_name] == ["MODIFY", "INSERT"]
    for record in cells:
        assert record.dynamodb is not None
        image = record.dynamodb.new_image
        assert image["trunk"] == "pytorch/pytorch#main"
        assert image["pk"] == f"CELLS#pytorch/pytorch#main#{image['job']}"
        assert image["kind"] == "cell" and image["state"] == "fail"
        assert image["sk"] == f"{int(image['seq']):08d}"
        assert record.dynamodb.stream_view_type is not None
        assert record.dynamodb.stream_view_type.name == "NEW_AND_OLD_IMAGES"
        assert record.event_source_arn is not None and "/stream/" in record.event_source_arn
    # Each image is what the storage writes: it loads as a stored cell, attribute by attribute.
    for raw in _event("evaluator_stream.json")["Records"]:
        image = raw["dynamodb"]["NewImage"]
        cell = CellItem.from_raw_data(image)
        assert set(cell.serialize()) == set(image)
        assert cell.failure_lines == [
            "FAILED test_nn.py::TestNN::test_conv_backward - AssertionError: Tensor-likes are not close!"
        ]
    assert cells[0].dynamodb is not None
    assert cells[0].dynamodb.keys["pk"] == (
        "CELLS#pytorch/pytorch#main#pull / linux-jammy-py3.10-gcc11 / test (default, linux.2xlarge)"
    )
    (tick,) = DynamoDBStreamEvent(_event("notifier_stream.json")).records
    assert tick.dynamodb is not None
    image = tick.dynamodb.new_image
    assert image["kind"] == "tick" and image["settled"] is True
    assert image["pk"] == f"TICK#{image['trunk']}" and image["sk"] == image["poll"]
    assert {c.dynamodb.new_image["poll"] for c in cells if c.dynamodb} == {image["poll"]}


@pytest.mark.parametrize("name", ["dispatcher_schedule.json", "evaluator_schedule.json"])
def test_schedule_samples_are_scheduled_events(name: str) -> None:
    event = EventBridgeEvent(_event(name))
    assert (event.source, event.detail_type, event.detail) == ("aws.events", "Scheduled Event", {})
    (rule,) = event.resources
    assert rule.startswith(f"arn:aws:events:us-east-1:{EXAMPLE_ACCOUNT}:rule/")


@pytest.mark.parametrize(
    ("name", "method", "scope"),
    [("api_get_silences.json", "GET", "read"), ("api_post_silence.json", "POST", "write")],
)
def test_api_samples_are_proxy_events_through_the_authorizer(
    source: dict[str, Any], name: str, method: str, scope: str
) -> None:
    event = APIGatewayProxyEvent(_event(name))
    assert re.fullmatch(_token_shape(source), event.headers["Authorization"])
    assert (event.http_method, event.path, event.resource) == (method, "/api/v2/silences", "/api/v2/{proxy+}")
    assert event.path_parameters == {"proxy": "silences"}
    assert event.request_context.stage == "v1"
    authorizer = event.request_context.authorizer
    assert authorizer.principal_id
    assert authorizer.get_context()["scope"] == scope
    if method == "POST":
        silence = event.json_body
        assert {"matchers", "startsAt", "endsAt", "createdBy", "comment"} <= silence.keys()
        assert all({"name", "value", "isRegex", "isEqual"} == m.keys() for m in silence["matchers"])


def test_authorizer_sample_is_a_token_event_for_the_v1_stage(source: dict[str, Any]) -> None:
    event = APIGatewayAuthorizerTokenEvent(_event("authorizer_request.json"))
    assert event.get_type == "TOKEN"
    assert re.fullmatch(_token_shape(source), event.authorization_token)
    assert (event.parsed_arn.stage, event.parsed_arn.http_method) == ("v1", "POST")
    assert event.parsed_arn.resource == "api/v2/silences"


def test_ticks_are_dispatched_once_and_never_retried(resources: dict[str, Any]) -> None:
    """One dispatch at a time, and a tick that fails or is throttled is not retried later
    (it would run on top of the next tick's): the next tick is the retry."""
    dispatcher = resources["DispatcherFunction"]["Properties"]
    assert dispatcher["ReservedConcurrentExecutions"] == 1
    (target,) = resources["DispatcherFunctionPoll"]["Properties"]["Targets"]
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == 0
    configs = [
        r["Properties"]
        for r in _of_type(resources, "AWS::Lambda::EventInvokeConfig").values()
        if r["Properties"]["FunctionName"] == {"Ref": "DispatcherFunction"}
    ]
    assert [(c["MaximumRetryAttempts"], c["MaximumEventAgeInSeconds"]) for c in configs] == [(0, 60)]


def test_each_trunk_polls_in_an_invocation_of_its_own(resources: dict[str, Any]) -> None:
    """Ingest takes one poll message per invocation from the FIFO poll queue (one message
    group per trunk: a trunk's polls never overlap, different trunks' run in parallel), and
    the dispatcher may send to that queue alone."""
    queue = resources["PollQueue"]["Properties"]
    assert queue["FifoQueue"] is True and queue["SqsManagedSseEnabled"] is True
    ingest = resources["IngestFunction"]["Properties"]
    assert "ReservedConcurrentExecutions" not in ingest
    # A failed poll's message expires before it is visible again: never retried.
    assert queue["MessageRetentionPeriod"] <= queue["VisibilityTimeout"]
    assert queue["VisibilityTimeout"] >= ingest["Timeout"]
    (mapping,) = [
        r["Properties"]
        for r in _of_type(resources, "AWS::Lambda::EventSourceMapping").values()
        if r["Properties"]["FunctionName"] == {"Ref": "IngestFunction"}
    ]
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": ["PollQueue", "Arn"]}
    assert mapping["BatchSize"] == 1 and mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    statements = _statements(resources["DispatcherFunctionRole"])
    senders = [st for st in statements if "sqs:SendMessage" in _actions(st)]
    assert [st["Resource"] for st in senders] == [{"Fn::GetAtt": ["PollQueue", "Arn"]}]
    variables = resources["DispatcherFunction"]["Properties"]["Environment"]["Variables"]
    assert variables["POLL_QUEUE_URL"] == {"Ref": "PollQueue"}
