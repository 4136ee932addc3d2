"""The local runtime: the deployed handlers on an in-process AWS emulation (moto), wired
from template.yaml. Not shipped in the Lambda layer."""
