"""Figures and the HTML page of `cctest report` (input: run directories only): presentation of what
analysis/ measures and judges.

Entry point: build.write_report; the Click command is cli/report.py's report_command.
"""
