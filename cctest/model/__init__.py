"""Pure code on data: a scenario (scenario.py) and its claims (claim_language.py), the concrete runs
(plan.py), the dumbbell and its bottleneck (dumbbell.py, bottleneck.py, aqm.py), and the records a
run leaves (record.py, compact.py, runfiles.py) with the metrics they are measured by (metric_table.py)."""
