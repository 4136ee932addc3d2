"""DynamoDB access: one table, PynamoDB models, one item kind per module.

Key design (single table, `pk` hash key + `sk` range key, `kind` on every item so the
stream's FilterCriteria can route records, `expires_at` as the TTL attribute):

| item            | pk                        | sk                               | kind         |
|-----------------|---------------------------|----------------------------------|--------------|
| trunk state     | `TRUNK#<repo>#<branch>`   | `STATE`                          | trunk        |
| job index       | `TRUNK#<repo>#<branch>`   | `JOBS`                           | jobs         |
| source state    | `TRUNK#<repo>#<branch>`   | `SOURCE`                         | source       |
| commit          | `TRUNK#<repo>#<branch>`   | `COMMIT#<seq:08d>`               | commit       |
| job cell        | `TRUNK#<repo>#<branch>`   | `CELL#<job key>#<seq:08d>`       | cell         |
| alert           | `TRUNK#<repo>#<branch>`   | `ALERT#<alertname>#<job or ->`   | alert        |
| notification log| `TRUNK#<repo>#<branch>`   | `NOTIFY#<fingerprint>`           | notification |
| tick barrier    | `TRUNK#<repo>#<branch>`   | `TICK#<poll id>`                 | tick         |
| silence         | `SILENCE`                 | `<uuid>`                         | silence      |
| silence audit   | `SILENCE#AUDIT`           | `<time>#<uuid>#<action>`         | audit        |
| idempotency     | `IDEMPOTENCY`             | `<hash of the transition>`       | (Powertools) |

`seq` is the commit's position on the branch's first-parent history (grows with newer
commits), so one Query on `CELL#<job>#` newest-first reads a job's window, and one Query on
`COMMIT#` reads the trunk's newest commits.
"""

from trunkwatch.storage.table import bind, trunk_pk

__all__ = ["bind", "trunk_pk"]
