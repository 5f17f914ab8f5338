"""Analysis defaults (the report's and the metrics'), kept free of heavy imports so the CLI starts fast."""

DEFAULT_BIN_MS = 100.0  # display/analysis bin, same as iperf3's reporting interval in cctest
DEFAULT_SKIP_S = 10.0  # steady state starts this long after time zero (BBR startup + a few cycles)
DEFAULT_JAIN_WINDOW_S = 1.0  # sliding window of the Jain-over-time series
DEFAULT_MAX_POINTS = 2000  # per trace, after decimation
