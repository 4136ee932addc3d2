"""What the stores cap and how long they keep what only they need."""

from __future__ import annotations

from datetime import timedelta

# Long enough for any re-run of a commit's jobs (GitHub re-runs within 30 days).
SHARD_TTL = timedelta(days=30)
TITLE_MAX = 200
ERROR_MAX = 500
# A steady good poll rewrites its time only this often.
LAST_OK_PRECISION = timedelta(minutes=5)
