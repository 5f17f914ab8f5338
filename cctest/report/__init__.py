"""Figures and the HTML page of `cctest report` (input: run directories only).

Entry points: build.write_report, load.load_runs; the Click command is command.report_command.
"""
