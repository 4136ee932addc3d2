"""trunkwatch's benchmarks: `python -m benchmarks` (or `make bench`).

Workloads, all on a synthetic PyTorch-scale trunk (`trunk`) and the real code paths:
1. ingest (`ingest`): a first and a steady-state poll through the HUD and GitHub sources
   against stand-ins on 127.0.0.1;
2. evaluator (`evaluator`): one commit's changed cells through the evaluator handler;
3. end to end (`end_to_end`): a simulated day through the local runtime, with the
   detection delay of every alert;
4. cold start (`cold_start`): handler import time against boto3's, and the layer's size;
5. cost (`cost`): a month at PyTorch scale at the prices in `prices`.
Run on their own (`python -m benchmarks <name>`), each merged into summary.json:
- `local_scale`: a first poll and 10 incremental polls of 2,000 (and 1,000) job columns
  through the local runtime, under a time cap;
- `github_budget`: a first GitHub poll at PyTorch scale against a stand-in answering 150 ms
  late, over as many time-budgeted polls as it takes.
AWS calls are counted by `usage` (requests, items, request units); `budgets` checks the
figures. The result is benchmarks/out/summary.json and a table on stdout.
"""
