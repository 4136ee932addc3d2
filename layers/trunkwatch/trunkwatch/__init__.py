"""trunkwatch: trunk-health alerting for CI (domain package shared by every Lambda)."""
