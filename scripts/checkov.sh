#!/usr/bin/env bash
# checkov on template.yaml, offline (--skip-download: no platform calls; the CloudFormation
# checks ship with checkov), then each failed check compared with the accepted findings that
# docs/deploying.md lists and explains (scripts/checkov_accepted.py): a finding not listed
# there, or a listed one that no longer occurs, fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

venv="${CHECKOV_VENV:-.venv-checkov}"
[[ -x "$venv/bin/checkov" ]] || { echo "checkov: $venv/bin/checkov not found (make $venv)" >&2; exit 1; }
report="$(mktemp "${TMPDIR:-/tmp}/checkov.XXXXXX")"
trap 'rm -f "$report"' EXIT
# checkov exits 1 when any check fails; the comparison decides (and refuses a report that is
# not checkov's JSON, so a crash does not pass).
"$venv/bin/checkov" --file template.yaml --framework cloudformation --skip-download --quiet \
  --compact --output json >"$report" || true
"$venv/bin/python" scripts/checkov_accepted.py "$report" docs/deploying.md
