"""The command line: parse, call, print. `cctest` is main.main; report.py holds `report` and `check`,
validate.py `validate`, completion.py the shell's completion of scenario names and tags."""
