"""Limits the command line states in its help: kept free of imports so `cctest --help` stays fast."""

MAX_RUNS = 10_000  # one invocation's runs without --force: counted before anything is expanded
MAX_EXPERIMENTS_BYTES = 1 << 20  # an experiments file (matrices are lists of values, not generated data)
