"""trunkwatch's benchmarks: `python -m benchmarks` (or `make bench`; see __main__ for the workloads).

Every workload drives the real code paths against stand-ins on 127.0.0.1 and moto or the
in-memory store; `usage` counts the AWS calls (requests, items, request units), `budgets`
checks the figures, `docs` renders docs/performance.md from the summary.
"""
