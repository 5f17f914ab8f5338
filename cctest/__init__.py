"""cctest: experiment-as-code for TCP congestion-control research."""

__version__ = "0.1.0"
