"""From a run directory to numbers and verdicts, with no figure: raw captures to tables (ingest.py),
the run directory read (load.py, provenance.py), metrics (derived.py, metrics.py, stats.py), the
emulation's health (checks.py), the summary across runs (summary.py) and the claims judged
(claims.py, judge.py). `cctest check` stops here; `cctest report` draws it (report/)."""
