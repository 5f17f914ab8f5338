"""A `cctest run` and its companions: the session that picks the runs and the engine (session.py),
one run on this machine (runner.py), what this machine can do (doctor.py), and `cctest clean`
(cleanup.py), which undoes what a crashed run left."""
