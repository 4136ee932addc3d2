"""Domain: pure types and rules (cells, the rule, alerts, dedup, configuration, clock)."""
