"""Peer tests: against the real Alertmanager, amtool and chromium (`make peer-tests`; skipped
with TRUNKWATCH_SKIP_PEERS=1, see tests/support/peers.py)."""
