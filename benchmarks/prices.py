"""AWS on-demand list prices in USD: the only place the benchmarks take prices from.

Region us-east-1, as published on the AWS pricing pages (checked 2026-11); free tiers are
ignored. Not priced because they cost nothing here or are outside trunkwatch: reads of the
table's stream by Lambda triggers (free), EventBridge scheduled rules (free), SNS
deliveries to subscribers (priced by the subscriber's protocol).
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


def as_dict() -> dict[str, float]:
    """Every price above, named as here (lowercase), for the summary."""
    return {
        name.lower(): value
        for name, value in globals().items()
        if name.isupper() and isinstance(value, float)
    }


def source() -> str:
    return f"AWS on-demand list prices, {REGION}, as published {CHECKED} (benchmarks/prices.py)"
