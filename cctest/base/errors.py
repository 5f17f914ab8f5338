"""What cctest tells its user when it cannot do what was asked: one line, and an exit code that
says whose problem it is.

  1    a run, or what it needs from this machine, failed (a module build, the VM, the topology,
       a tool that exited); also `report --compare` finding a regression
  2    bad input: the invocation or a file cannot work as given, and nothing was set up
  3    a scenario's claim failed or had no data to be judged on (`report`, `check`)
  130  interrupted (Ctrl-C, SIGTERM)

Every error meant for the user is a CctestError whose class carries its exit code; `Group` and
`Command` (the `cctest` group and the commands registered outside cli/main.py) turn one into its line
and code, in `exit_on_error`, the one place that does. Anything else escaping a command is a bug
and keeps its traceback.
"""

from __future__ import annotations

import contextlib
import unicodedata
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.console import Console

FAILED = 1
BAD_INPUT = 2
CLAIMS_FAILED = 3
INTERRUPTED = 130


MAX_LINE_CHARS = 480  # a message's length on the terminal; longer ones lose their middle
# Unicode categories that move the cursor, end a line or reorder text rather than show a glyph:
# controls (C0, DEL, C1 with NEL and CSI), format characters (bidi overrides, zero-width ones),
# the line and paragraph separators, surrogates and private use.
_UNSHOWN = ("Cc", "Cf", "Zl", "Zp", "Cs", "Co")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    if char == "\\" or unicodedata.category(char) not in _UNSHOWN:
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: object, limit: int | None = MAX_LINE_CHARS) -> str:
    """`text` as one line a terminal shows as written: every control, format and separator
    character escaped (ESC cannot restyle or clear the screen, NEL/LS/PS cannot break the line, a
    bidi override cannot reverse it), and at most `limit` characters, the middle elided."""
    line = "".join(_escaped(c) if not (" " <= c <= "~") else c for c in str(text))
    if limit is not None and len(line) > limit:
        head = limit * 2 // 3
        line = f"{line[:head]} … {line[-(limit - head - 3):]}"
    return line


def say(console: Console, *parts: object | tuple[object, str], limit: int | None = MAX_LINE_CHARS) -> None:
    """Print one line of text that may come from a file or a name (a run directory, a scenario, a
    journal) on a rich console: each part is printable() and never read as markup, so `[/]` cannot
    raise, `[see fig.3]` cannot vanish and no escape reaches the terminal. A part may be a
    (text, style) pair: the style is ours, the text is not."""
    from rich.text import Text

    line = Text()
    for part in parts:
        text, style = part if isinstance(part, tuple) else (part, "")
        line.append(printable(text, limit), style=style)
    console.print(line, highlight=False, soft_wrap=True)


class CctestError(Exception):
    """A one-line, user-facing problem; the class says which exit code it means."""

    exit_code = FAILED

    def __init__(self, message: str) -> None:
        # Keys, values and tool output quoted into a message may hold line breaks, terminal escapes
        # or a megabyte of text: it stays one line a terminal shows as written.
        super().__init__(printable(message))


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
        click.echo(printable(f"error: {where}: {error.format_message()} ({where} -h for help)"), err=True)
        ctx.exit(BAD_INPUT)


class Command(click.Command):
    def invoke(self, ctx: click.Context) -> Any:
        with exit_on_error(ctx):
            return super().invoke(ctx)


class Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        with exit_on_error(ctx):
            return super().invoke(ctx)
