"""What cctest tells its user when it cannot do what was asked: one line, and an exit code that
says whose problem it is.

  1    a run, or what it needs from this machine, failed (a module build, the VM, the topology,
       a tool that exited); also `report --compare` finding a regression
  2    bad input: the invocation or a file cannot work as given, and nothing was set up
  3    a scenario's claim failed or had no data to be judged on (`report`, `check`)
  130  interrupted (Ctrl-C, SIGTERM)

Every error meant for the user is a CctestError whose class carries its exit code; `Group` and
`Command` (the `cctest` group and the commands registered outside cli.py) turn one into its line
and code, in `exit_on_error`, the one place that does. Anything else escaping a command is a bug
and keeps its traceback.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import click

FAILED = 1
BAD_INPUT = 2
CLAIMS_FAILED = 3
INTERRUPTED = 130


class CctestError(Exception):
    """A one-line, user-facing problem; the class says which exit code it means."""

    exit_code = FAILED

    def __init__(self, message: str):
        # Keys, values and tool output quoted into a message may hold line breaks: it stays one line.
        super().__init__(str(message).replace("\r", "\\r").replace("\n", "\\n"))


class BadInput(CctestError):
    """The invocation or a file cannot work as given; raised before anything is set up."""

    exit_code = BAD_INPUT


class ClaimsFailed(CctestError):
    """A claim was contradicted by the data, or had no data to be judged on."""

    exit_code = CLAIMS_FAILED


@contextlib.contextmanager
def exit_on_error(ctx: click.Context) -> Iterator[None]:
    """`error: <message>` on stderr and the error's exit code, for a CctestError or a Click usage
    error (a bad option or argument is bad input too, and one line like the others)."""
    try:
        yield
    except CctestError as error:
        click.echo(f"error: {error}", err=True)
        ctx.exit(error.exit_code)
    except click.UsageError as error:
        where = error.ctx.command_path if error.ctx else ctx.command_path
        click.echo(f"error: {where}: {error.format_message()} ({where} -h for help)", err=True)
        ctx.exit(BAD_INPUT)


class Command(click.Command):
    def invoke(self, ctx: click.Context):
        with exit_on_error(ctx):
            return super().invoke(ctx)


class Group(click.Group):
    def invoke(self, ctx: click.Context):
        with exit_on_error(ctx):
            return super().invoke(ctx)
