"""The local runtime: the deployed handlers on an in-process AWS emulation (moto server on
127.0.0.1), wired from template.yaml. Not shipped in the Lambda layer."""
