#!/usr/bin/env bash
# Offline checks of template.yaml (no AWS account, no Docker), in this order:
#   1. sam validate --lint      SAM's schema validation plus cfn-lint on the SAM template
#   2. sam validate             the SAM translator's own validation
#   3. cfn-lint (translated)    the CloudFormation that SAM generates, linted as it will deploy
#   4. sam build                the layers (layers/trunkwatch/Makefile, config/Makefile) and
#                               every function, then the built artifacts are checked for their
#                               handlers and the configuration file
# They run on a copy of what `sam build` reads with examples/organization.yaml (100 trunks) as
# config/trunkwatch.yaml, the documented way to deploy a configuration (docs/deploying.md).
# Prints one line per passed check and stops at the first failure, showing the tool's output.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

venv="${SAM_VENV:-$root/.venv-sam}"
[[ "$venv" == /* ]] || venv="$root/$venv"  # the checks run in a copy of the project
sam="$venv/bin/sam"
cfn_lint="$venv/bin/cfn-lint"
region=us-east-1
export SAM_CLI_TELEMETRY=0

work="$(mktemp -d "${TMPDIR:-/tmp}/check-template.XXXXXX")"
trap 'rm -rf "$work"' EXIT

fail() {
  echo "check-template: FAILED: $1" >&2
  if [[ -s "$work/output" ]]; then
    sed 's/^/    /' "$work/output" >&2
  fi
  exit 1
}

# check <name> <command...>: the command's output is shown only when it fails.
check() {
  local name="$1"
  shift
  "$@" >"$work/output" 2>&1 || fail "$name"
  echo "check-template: ok: $name"
}

for tool in "$sam" "$cfn_lint"; do
  [[ -x "$tool" ]] || fail "$tool not found (create the SAM virtualenv: make .venv-sam)"
done

# The project as `sam build` reads it, with the organization's configuration dropped in.
organization="$root/examples/organization.yaml"
mkdir "$work/project"
cp -R template.yaml functions layers config "$work/project/"
cp "$organization" "$work/project/config/trunkwatch.yaml"
cd "$work/project"

# The translator needs local CodeUri/ContentUri paths replaced by S3 locations, as
# `sam deploy` does after uploading them.
lint_translated() {
  "$venv/bin/python" - template.yaml "$work/translated.json" "$region" <<'PY'
import json
import sys

import boto3
from samcli.yamlhelper import yaml_parse
from samtranslator.parser.parser import Parser
from samtranslator.translator.translator import Translator

source, target, region = sys.argv[1:4]
with open(source, encoding="utf-8") as f:
    template = yaml_parse(f.read())
for resource in template.get("Resources", {}).values():
    properties = resource.get("Properties", {})
    for key in ("CodeUri", "ContentUri"):
        if isinstance(properties.get(key), str) and not properties[key].startswith("s3://"):
            properties[key] = {"Bucket": "artifacts", "Key": properties[key]}
translator = Translator(None, Parser(), boto_session=boto3.session.Session(region_name=region))
translated = translator.translate(template, parameter_values={}, get_managed_policy_map=dict)
with open(target, "w", encoding="utf-8") as f:
    json.dump(translated, f, indent=1)
PY
  "$cfn_lint" --regions "$region" -- "$work/translated.json"
}

# sam build needs the functions' runtime on PATH; fall back to pyenv's newest 3.12.
use_python312() {
  if python3.12 -c '' >/dev/null 2>&1; then
    return 0
  fi
  local version=""
  if command -v pyenv >/dev/null 2>&1; then
    version="$(pyenv versions --bare | grep -E '^3\.12(\.[0-9]+)?$' | tail -n 1 || true)"
  fi
  [[ -n "$version" ]] || fail "python3.12 (the Lambda runtime) is not on PATH and pyenv has no 3.12"
  PATH="$(pyenv prefix "$version")/bin:$PATH"
  export PATH
}

# Every function's handler module and the layer's package must be in the build output
# (sam build skips a missing CodeUri silently); the runtime-provided SDK must not be.
build_and_inspect() {
  "$sam" build --template-file template.yaml --build-dir "$work/build" --cache-dir "$work/cache" \
    --no-cached --parallel
  "$venv/bin/python" - "$work/build" "$organization" <<'PY'
import sys
from pathlib import Path, PurePosixPath

from samcli.yamlhelper import yaml_parse

build, configuration = Path(sys.argv[1]), Path(sys.argv[2])
template = yaml_parse((build / "template.yaml").read_text(encoding="utf-8"))
problems = []
# The functions' CONFIG_FILE is the configuration as written, in ConfigLayer (extracted to /opt).
config_file = PurePosixPath(template["Globals"]["Function"]["Environment"]["Variables"]["CONFIG_FILE"])
layer = build / template["Resources"]["ConfigLayer"]["Properties"]["ContentUri"]
packaged = layer / config_file.relative_to("/opt")
if not packaged.is_file() or packaged.read_bytes() != configuration.read_bytes():
    problems.append(f"ConfigLayer: {config_file.relative_to('/opt')} is not {configuration.name} as written")
for name, resource in template["Resources"].items():
    properties = resource.get("Properties", {})
    if resource["Type"] == "AWS::Serverless::Function":
        module = properties["Handler"].rsplit(".", 1)[0].replace(".", "/") + ".py"
        if not (build / properties["CodeUri"] / module).is_file():
            problems.append(f"{name}: handler module {module} is missing from its CodeUri")
    elif resource["Type"] == "AWS::Serverless::LayerVersion":
        python = build / properties["ContentUri"] / "python"
        if name == "DomainLayer" and not (python / "trunkwatch" / "__init__.py").is_file():
            problems.append(f"{name}: python/trunkwatch is missing")
        if name == "ApiLayer" and not (python / "pydantic").is_dir():
            problems.append(f"{name}: python/pydantic is missing")
        problems += [f"{name}: python/{p} should not be in the layer" for p in
                     ("trunkwatch_local", "boto3", "botocore", "s3transfer", "urllib3", "pydantic")
                     if (python / p).exists() and not (name == "ApiLayer" and p == "pydantic")]
if problems:
    sys.exit("\n".join(problems))
PY
}

check "sam validate --lint" "$sam" validate --lint --template-file template.yaml --region "$region"
check "sam validate" "$sam" validate --template-file template.yaml --region "$region"
check "cfn-lint on the translated template" lint_translated
use_python312
check "sam build" build_and_inspect
