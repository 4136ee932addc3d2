"""AWS on-demand list prices in USD: the only place the benchmarks take prices from.

Region us-east-1, as published on the AWS pricing pages (checked 2026-11); free tiers are
ignored. Not priced because they cost nothing here or are outside trunkwatch: reads of the
table's stream by Lambda triggers (free), EventBridge scheduled rules (free), SNS
deliveries to subscribers (priced by the subscriber's protocol), SSM Parameter Store
standard parameters at standard throughput (free), SQS requests to the dead-letter queue
(only on exhausted retries), X-Ray trace retrieval and scans (by people reading traces).
"""

from __future__ import annotations

REGION = "us-east-1"
CHECKED = "2026-11"
# aws.amazon.com/dynamodb/pricing/on-demand, Standard table class (after the 2024-11 cut).
DYNAMODB_WRITE_REQUEST_UNITS_PER_MILLION = 0.625
DYNAMODB_READ_REQUEST_UNITS_PER_MILLION = 0.125
DYNAMODB_STORAGE_GB_MONTH = 0.25
# Continuous backups (point-in-time recovery, which template.yaml enables).
DYNAMODB_PITR_GB_MONTH = 0.20
# aws.amazon.com/lambda/pricing, Arm, first duration tier.
LAMBDA_ARM_GB_SECOND = 0.0000133334
LAMBDA_REQUESTS_PER_MILLION = 0.20
# aws.amazon.com/sns/pricing, standard topics: each 64 KB chunk of a publish counts as one.
SNS_PUBLISHES_PER_MILLION = 0.50
# aws.amazon.com/cloudwatch/pricing: dashboards, standard-resolution alarm metrics, custom
# metrics (first 10,000 tier; one metric = a name with one set of dimension values), logs.
CLOUDWATCH_DASHBOARD_MONTH = 3.00
CLOUDWATCH_ALARM_METRIC_MONTH = 0.10
CLOUDWATCH_CUSTOM_METRIC_MONTH = 0.30
CLOUDWATCH_LOGS_INGESTED_GB = 0.50
CLOUDWATCH_LOGS_STORED_GB_MONTH = 0.03
# aws.amazon.com/kms/pricing: a customer managed key, and symmetric requests.
KMS_KEY_MONTH = 1.00
KMS_REQUESTS_PER_MILLION = 3.00
# aws.amazon.com/xray/pricing: traces recorded.
XRAY_TRACES_RECORDED_PER_MILLION = 5.00
# aws.amazon.com/secrets-manager/pricing.
SECRETS_MANAGER_SECRET_MONTH = 0.40
SECRETS_MANAGER_API_CALLS_PER_MILLION = 5.00
# aws.amazon.com/sqs/pricing: FIFO queue requests (each 64 KB chunk of a request counts as one).
SQS_FIFO_REQUESTS_PER_MILLION = 0.50
# aws.amazon.com/api-gateway/pricing, REST APIs, first 333 million requests.
API_GATEWAY_REST_REQUESTS_PER_MILLION = 3.50


def as_dict() -> dict[str, float]:
    """Every price above, named as here (lowercase), for the summary."""
    return {
        name.lower(): value
        for name, value in globals().items()
        if name.isupper() and isinstance(value, float)
    }


def source() -> str:
    return f"AWS on-demand list prices, {REGION}, as published {CHECKED} (benchmarks/prices.py)"
