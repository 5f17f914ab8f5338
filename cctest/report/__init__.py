"""Figures and the HTML page of `cctest report` (input: run directories only)."""

from .build import Options, Result, write_report
from .load import ReportInputError, find_run_dirs, load_run, load_runs

__all__ = ["Options", "Result", "ReportInputError", "write_report", "find_run_dirs", "load_run", "load_runs"]
