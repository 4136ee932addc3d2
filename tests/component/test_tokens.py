"""Source tokens from the environment, SSM Parameter Store and Secrets Manager (moto)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest
from aws_lambda_powertools.utilities import parameters
from moto import mock_aws

from trunkwatch.domain.config import ConfigError, TokenRef
from trunkwatch.sources.credentials import forget_tokens, resolve_token

VALUE = "test-token-not-a-secret-42"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    parameters.clear_caches()  # Powertools keeps its clients across calls
    forget_tokens()
    with mock_aws():
        yield
    parameters.clear_caches()
    forget_tokens()


def test_no_token_configured() -> None:
    assert resolve_token(None) is None


def test_token_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TW_TEST_TOKEN", f"{VALUE}\n")
    assert resolve_token(TokenRef(env="TW_TEST_TOKEN")) == VALUE


def test_missing_environment_variable_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TW_TEST_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="environment variable TW_TEST_TOKEN is not set"):
        resolve_token(TokenRef(env="TW_TEST_TOKEN"))


def test_empty_environment_variable_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TW_TEST_TOKEN", "  ")
    with pytest.raises(ConfigError, match="environment variable TW_TEST_TOKEN is empty"):
        resolve_token(TokenRef(env="TW_TEST_TOKEN"))


def test_ssm_secure_string_is_decrypted(aws: None) -> None:
    boto3.client("ssm").put_parameter(Name="/trunkwatch/github-token", Value=VALUE, Type="SecureString")
    assert resolve_token(TokenRef(ssm="/trunkwatch/github-token")) == VALUE


@pytest.mark.parametrize("where", ["ssm", "secret"])
def test_a_token_from_aws_is_read_again_after_five_minutes(aws: None, where: str) -> None:
    name, ref = "/trunkwatch/github-token", TokenRef(**{where: "/trunkwatch/github-token"})

    def store(value: str) -> None:
        if where == "ssm":
            boto3.client("ssm").put_parameter(Name=name, Value=value, Type="SecureString", Overwrite=True)
        else:
            boto3.client("secretsmanager").put_secret_value(SecretId=name, SecretString=value)

    if where == "secret":
        boto3.client("secretsmanager").create_secret(Name=name)
    store(VALUE)
    read = datetime(2026, 11, 18, 12, tzinfo=UTC)
    assert resolve_token(ref, read) == VALUE
    store("rotated")
    assert resolve_token(ref, read + timedelta(minutes=5) - timedelta(seconds=1)) == VALUE
    assert resolve_token(ref, read + timedelta(minutes=5)) == "rotated"


def test_missing_ssm_parameter_names_it_and_the_cause(aws: None) -> None:
    with pytest.raises(ConfigError) as err:
        resolve_token(TokenRef(ssm="/trunkwatch/absent"))
    assert str(err.value) == "token: cannot read SSM parameter /trunkwatch/absent: ParameterNotFound"


def test_secret_string(aws: None) -> None:
    boto3.client("secretsmanager").create_secret(Name="trunkwatch/github", SecretString=VALUE)
    assert resolve_token(TokenRef(secret="trunkwatch/github")) == VALUE


def test_secret_binary_is_decoded(aws: None) -> None:
    boto3.client("secretsmanager").create_secret(Name="trunkwatch/github", SecretBinary=VALUE.encode())
    assert resolve_token(TokenRef(secret="trunkwatch/github")) == VALUE


def test_binary_secret_that_is_not_text_is_rejected(aws: None) -> None:
    boto3.client("secretsmanager").create_secret(Name="trunkwatch/github", SecretBinary=b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="secret trunkwatch/github is binary, not text"):
        resolve_token(TokenRef(secret="trunkwatch/github"))


def test_missing_secret_names_it_and_the_cause(aws: None) -> None:
    with pytest.raises(ConfigError) as err:
        resolve_token(TokenRef(secret="trunkwatch/absent"))
    assert str(err.value) == "token: cannot read secret trunkwatch/absent: ResourceNotFoundException"


def test_empty_secret_is_rejected_without_showing_a_value(aws: None) -> None:
    boto3.client("secretsmanager").create_secret(Name="trunkwatch/github", SecretString="\n")
    with pytest.raises(ConfigError, match=r"^token: secret trunkwatch/github is empty$"):
        resolve_token(TokenRef(secret="trunkwatch/github"))


def test_no_aws_region_is_a_config_error(aws: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "absent"))
    parameters.clear_caches()  # its SSM client was made with a region
    with pytest.raises(ConfigError, match=r"^token: cannot read SSM parameter /trunkwatch/x: NoRegionError$"):
        resolve_token(TokenRef(ssm="/trunkwatch/x"))
