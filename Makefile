PYTHON ?= python3
# aws-sam-cli's pins conflict with moto's, so SAM and cfn-lint have their own virtualenv.
SAM_VENV ?= .venv-sam
SAM_REQUIREMENTS := requirements-sam.txt

.PHONY: check-template

$(SAM_VENV): $(SAM_REQUIREMENTS)
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r $(SAM_REQUIREMENTS)
	touch $(SAM_VENV)

# sam validate --lint, sam validate, cfn-lint on the translated template, sam build.
check-template: $(SAM_VENV)
	SAM_VENV=$(SAM_VENV) scripts/check_template.sh
