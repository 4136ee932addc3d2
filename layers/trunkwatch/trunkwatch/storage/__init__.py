"""Storage: one port (`port.py`: a small interface per aggregate, taking and returning the
domain's records: `domain/`), implemented on DynamoDB (`dynamodb.py`: one table, PynamoDB models,
one module per aggregate) and in memory (`memory.py`). A function's edge builds its `Storage`
and passes it down; nothing above this package sees PynamoDB. Every key is built in
`keys.py`; no other package touches the models' keys or the table directly.

Key design (single table, `pk` hash key + `sk` range key, `kind` on every item so the
stream's FilterCriteria can route records, `expires_at` as the TTL attribute). Each Query
reads one partition holding only what it decides on: a job's cells live under their own
key, so judging a job never reads another job's items, and a poll's writes spread over
one partition per job.

| item             | pk                               | sk                         | kind         |
|------------------|----------------------------------|----------------------------|--------------|
| trunk state      | `TRUNK#<repo>#<branch>`          | `STATE`                    | trunk        |
| job index        | `TRUNK#<repo>#<branch>`          | `JOBS`                     | jobs         |
| source state     | `TRUNK#<repo>#<branch>`          | `SOURCE`                   | source       |
| commit           | `COMMITS#<repo>#<branch>`        | `<seq:08d>`                | commit       |
| job cell         | `CELLS#<repo>#<branch>#<job>`    | `<seq:08d>`                | cell         |
| alert            | `ALERTS#<repo>#<branch>`         | `<alertname>#<job or ->`   | alert        |
| job episode      | `EPISODES#<repo>#<branch>`       | `<starts_at>#<job>`        | episode      |
| fixed breakage   | `FIXED#<repo>#<branch>`          | `<culprit sha>#<job>`      | fixed        |
| notification log | `LOG#<repo>#<branch>`            | `<receiver>#<fingerprint>` | notification |
| rejection        | `LOG#<repo>#<branch>`            | `REJECTED#<receiver>#<fingerprint>` | rejection |
| acknowledgement  | `ACKS#<repo>#<branch>`           | `<fingerprint>`            | ack          |
| tick barrier     | `TICK#<repo>#<branch>`           | `<poll or group id>`       | tick         |
| rerun            | `RERUNS#<repo>#<branch>`         | `<job>#<episode start>#<role>` | rerun    |
| commit by sha    | `SHA#<repo>#<branch>#<sha>`      | `SEQ`                      | commit_sha   |
| webhook shard    | `SHARDS#<repo>#<branch>#<sha>#<job>` | `<shard's job name>`   | shard        |
| workflow run     | `RUN#<repo>#<branch>#<run id>`   | `RUN`                      | run          |
| held job report  | `RUN#<repo>#<branch>#<run id>`   | `HELD#<job name>#<attempt>#<status>` | held |
| silence          | `SILENCE`                        | `<uuid>`                   | silence      |
| silence audit    | `SILENCE#AUDIT`                  | `<time>#<uuid>#<action>`   | audit        |

Expiry (`expires_at`, epoch seconds), set by each kind's writer: commits and cells the rule's
`retention` after the commit's time; notification logs `retention` after their last write,
except while last sent firing; rejections `retention` after the rejection; acknowledgements
`retention` after their episode ended, never while live; webhook shards, runs and held job
reports SHARD_TTL (30 days) after their write; job episodes EPISODE_RETENTION (31 days) after
they resolved, never while firing; fixed breakages EPISODE_RETENTION after they were
detected; ticks TICK_TTL after their poll; silences and their audit records `endsAt` + 120 h;
reruns `retention` after they were planned. Trunk items and alerts never expire (one per
trunk or job). `LOG#heartbeat` holds the heartbeat's notification logs (design.md §4.2) and
its rejections; a trunk's `LOG#` partition also holds the daily digest's entry per receiver
(§4.4), under the digest's own fingerprint.

`seq` is the commit's position on the branch's first-parent history (grows with newer
commits, with gaps where pushes arrived out of order: `app/ledger.py`), so one Query
newest-first on a job's cell partition reads its window, and one on the commits partition
reads the trunk's newest commits. A commit's by-sha pointer may exist before the commit is
placed, holding only the seq of its child placed first (the bound it is placed below).
Cell and tick items carry `trunk` (and cells `job`) so stream consumers never parse keys.
"""
