"""Module parameters as the modules' sources declare them, read without building anything, so
that `list` and `run --dry-run` refuse what insmod would (and what a run would silently clamp).

A module `<cc>` is `modules/<tree>/<cc>.c` with the files it #includes from its tree and from
modules/common. Its parameters are whatever its macros expand to: the C preprocessor's
function-like macros are expanded here (arguments, `#` and `##`), and each
`module_param_cb`/`module_param` gives a parameter and its permissions, each `MODULE_PARM_DESC`
the description modinfo will show; the range is read from that description as modinfo's is
(modparams.py: "[range LO..HI]", "[range 0 or LO..HI]", "[read-only]"). Nothing here knows a
module's parameter list.

Relations between parameters come from the code that reads them: a clamp helper called with a
parameter and bounds (`hi = modest_param(wmax_x1000, lo, 4000)`) whose bound is another parameter,
directly or through a variable assigned from one (`lo = modest_param(wmin_x1000, 0, 1000)`), means
the module silently replaces a value beyond it: a scenario setting wmin_x1000 above wmax_x1000
would not run what it says, so it is refused.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..base.errors import BadInput
from . import projectccs
from .modparams import ParamSpec, param_problem

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Protocol

    class PlannedRun(Protocol):
        """What check_declared_params reads of a run: model.plan.RunSpec, a layer above this one."""

        @property
        def modules(self) -> dict[str, dict[str, int]]: ...

        def params_key(self, cc: str) -> str: ...


MODULES_DIR = projectccs.MODULES_DIR
_STRING = r'"(?:[^"\\\n]|\\.)*"'
_MAX_EXPANSIONS = 10_000  # a macro that expands to itself is no module of ours


class BadModuleParameter(BadInput):
    """A scenario sets a parameter its module does not declare, or a value the module refuses or clamps."""


@dataclass(frozen=True)
class Relation:
    """`param` is kept at least (`>=`) or at most (`<=`) `other` by the module (`where` is file:line)."""

    param: str
    op: str
    other: str
    where: str

    def holds(self, values: dict[str, int]) -> bool:
        a, b = values.get(self.param), values.get(self.other)
        if a is None or b is None:
            return True
        return a >= b if self.op == ">=" else a <= b


@dataclass(frozen=True)
class Declared:
    specs: dict[str, ParamSpec]
    defaults: dict[str, int]
    relations: tuple[Relation, ...]


def _strip_comments(text: str) -> str:
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            skipped = text[i:n if end < 0 else end + 2]
            out.append("\n" * skipped.count("\n") or " ")  # keep line numbers
            i = n if end < 0 else end + 2
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text[i] in "\"'":
            match = re.compile(r"'(?:[^'\\\n]|\\.)*'" if text[i] == "'" else _STRING).match(text, i)
            step = match.end() if match else i + 1
            out.append(text[i:step])
            i = step
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _unit(path: Path, seen: set[Path] | None = None) -> list[tuple[str, str]]:
    """(file:line, line) of a translation unit, local `#include "..."` files inlined where they stand."""
    seen = set() if seen is None else seen
    if path in seen or not path.is_file():
        return []
    seen.add(path)
    lines: list[tuple[str, str]] = []
    raw = _strip_comments(path.read_text(errors="replace")).splitlines()
    number = 0
    while number < len(raw):
        first, line = number + 1, raw[number]
        while line.endswith("\\") and number + 1 < len(raw):  # a continued line: one logical line
            number += 1
            line = line[:-1] + " " + raw[number]
        number += 1
        include = projectccs.LOCAL_INCLUDE.match(line)
        if include:
            lines += _unit(projectccs.local_include(path, include[1]), seen)
        else:
            lines.append((f"{path.name}:{first}", line))
    return lines


def _split_args(text: str, start: int) -> tuple[list[str], int] | None:
    """The comma-separated arguments of the call whose '(' is at `start`, and the index after ')'."""
    depth, args, current, i = 0, [], [], start
    while i < len(text):
        c = text[i]
        if c == '"':
            match = re.compile(_STRING).match(text, i)
            if not match:
                return None
            current.append(match.group())
            i = match.end()
            continue
        if c in "([{":
            depth += 1
            if depth == 1:
                i += 1
                continue
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append("".join(current).strip())
                return args, i + 1
        elif c == "," and depth == 1:
            args.append("".join(current).strip())
            current = []
            i += 1
            continue
        current.append(c)
        i += 1
    return None


def _expand(text: str, macros: dict[str, tuple[list[str], str]]) -> str:
    """Function-like macros expanded until none is left (C's rescanning, without its subtleties)."""
    if not macros:
        return text
    call = re.compile(r"\b(" + "|".join(map(re.escape, macros)) + r")\s*\(")
    for _ in range(_MAX_EXPANSIONS):
        match = call.search(text)
        if not match:
            return text
        parsed = _split_args(text, match.end() - 1)
        if parsed is None:
            return text
        args, end = parsed
        params, body = macros[match[1]]
        values = dict(zip(params, args, strict=False))
        # `##` pastes tokens, `#x` makes a string of the argument as written, then the arguments go in
        body = re.sub(r"\s*##\s*", "\x00", body)

        def substitute(token: re.Match, values: dict[str, str] = values) -> str:  # string literals stay as written
            word = token.group()
            if word.startswith('"'):
                return word
            if word.startswith("#"):
                name = word[1:].strip()
                if name not in values:
                    return word
                # C stringifies the tokens as written: our line markers and the line breaks are not part of them
                spelled = " ".join(re.sub(r"\x01[^\x02]*\x02", " ", values[name]).split())
                return '"' + spelled.replace('"', '\\"') + '"'
            return values.get(word, word)

        body = re.sub(_STRING + r"|#\s*\w+|\b\w+\b", substitute, body)
        text = text[:match.start()] + body.replace("\x00", "") + text[end:]
    raise BadInput(f"modules: a macro expands more than {_MAX_EXPANSIONS} times; not a module cctest can read")


def _int(token: str, constants: dict[str, str]) -> int | None:
    token = token.strip()
    for _ in range(10):
        token = constants.get(token, token).strip().strip("()").rstrip("UuLl")
    if re.fullmatch(r"0[0-7]+", token):
        return int(token, 8)  # C's octal, as permissions are written
    try:
        return int(token, 0)
    except ValueError:
        return None


@functools.cache
def declared(cc: str, modules_dir: Path = MODULES_DIR) -> Declared | None:
    """The parameters module `cc`'s sources declare (None when there are no sources for it)."""
    source = projectccs.source_of(cc, modules_dir)
    if source is None:
        return None
    lines = _unit(source)
    macros: dict[str, tuple[list[str], str]] = {}
    constants: dict[str, str] = {}
    code: list[tuple[str, str]] = []
    for where, line in lines:
        function = re.match(r"\s*#\s*define\s+(\w+)\(([^)]*)\)\s*(.*)", line)
        constant = re.match(r"\s*#\s*define\s+(\w+)\s+(.+)", line)
        if function:
            macros[function[1]] = ([p.strip() for p in function[2].split(",")], function[3])
        elif constant:
            constants[constant[1]] = constant[2].strip()
        elif not line.lstrip().startswith("#"):
            code.append((where, line))
    # one statement stream with each line's place kept: expansion happens per statement
    text = "\n".join(f"\x01{where}\x02{line}" for where, line in code)
    text = _expand(text, macros)
    specs: dict[str, ParamSpec] = {}
    perms: dict[str, int] = {}
    for match in re.finditer(r"\bmodule_param(?:_cb|_named)?\s*\(", text):
        parsed = _split_args(text, match.end() - 1)
        if parsed and parsed[0]:
            perm = _int(parsed[0][-1], constants)
            # a symbolic mode (S_IRUGO...): as the description says
            perms[parsed[0][0]] = 0o644 if perm is None else perm
    descriptions: dict[str, str] = {}
    for match in re.finditer(r"\bMODULE_PARM_DESC\s*\(", text):
        parsed = _split_args(text, match.end() - 1)
        if parsed and len(parsed[0]) == 2:
            literals = re.findall(_STRING, parsed[0][1])
            descriptions[parsed[0][0]] = "".join(bytes(s[1:-1], "utf-8").decode("unicode_escape") for s in literals)
    for name, perm in perms.items():
        specs[name] = ParamSpec.described(name, descriptions.get(name, ""), writable=bool(perm & 0o222))
    defaults = {}
    for match in re.finditer(r"\bstatic\s+(?:unsigned\s+)?(?:int|u32|uint)\s+(\w+)\s*=\s*([^;]+);", text):
        if match[1] in specs:
            value = _int(match[2], constants)
            if value is not None:
                defaults[match[1]] = value
    return Declared(specs, defaults, tuple(_relations(text, specs)))


def _relations(text: str, specs: dict[str, ParamSpec]) -> list[Relation]:
    """Clamps whose bound is another parameter (see the module docstring), in statement order:
    a variable stands for the parameter most recently assigned to it."""
    names = "|".join(map(re.escape, specs)) or "(?!)"
    clamp = re.compile(rf"\b\w+\s*\(\s*({names})\s*,\s*([\w.]+)\s*,\s*([\w.]+)\s*\)")
    stands_for: dict[str, str] = {}
    out: list[Relation] = []
    where = "?"
    for statement in re.split(r"[;{}]", text):
        places = re.findall(r"\x01([^\x02]*)\x02", statement)
        where = places[-1] if places else where
        statement = re.sub(r"\x01[^\x02]*\x02", "", statement)
        for match in clamp.finditer(statement):
            param, lo, hi = match[1], match[2], match[3]
            for bound, op in ((lo, ">="), (hi, "<=")):
                other = bound if bound in specs else stands_for.get(bound)
                if other and other != param:
                    out.append(Relation(param, op, other, where))
        assigned = re.match(r"\s*(?:(?:const|unsigned|signed|static|u8|u16|u32|u64|s32|int|long)\s+)*(\w+)\s*=(?!=)",
                            statement)
        if assigned:
            call = clamp.search(statement)
            if call and statement.find(call.group()) > statement.find("="):
                stands_for[assigned[1]] = call[1]
            else:
                stands_for.pop(assigned[1], None)
    return list(dict.fromkeys(out))


def param_problems(cc: str, params: dict[str, int]) -> list[str]:
    """What is wrong with giving module `cc` these parameters, per its sources (empty: nothing)."""
    found = declared(cc)
    if found is None or not params:
        return []
    problems = [p for p in (param_problem(cc, found.specs, name, value) for name, value in params.items()) if p]
    if problems:
        return problems
    values = {**found.defaults, **params}
    for relation in found.relations:
        if (relation.param in params or relation.other in params) and not relation.holds(values):
            given = lambda name: f"{name} = {values[name]}" + ("" if name in params else " (its default)")  # noqa: E731
            word = "below" if relation.op == ">=" else "above"
            problems.append(f"{given(relation.param)} is {word} {given(relation.other)}; {cc} keeps {relation.param} "
                            f"{'at least' if relation.op == '>=' else 'at most'} {relation.other} "
                            f"({relation.where}), so the run would not be what it says")
    return problems


def check_declared_params(specs: Iterable[PlannedRun], source: str) -> None:
    """Every run's module parameters against the sources' declarations, before anything is built:
    BadModuleParameter names the file, scenario, flow key, parameter and what is allowed."""
    seen: set[tuple] = set()
    for spec in specs:
        for cc, params in spec.modules.items():
            key = (cc, tuple(sorted(params.items())))
            if key in seen:
                continue
            seen.add(key)
            problems = param_problems(cc, params)
            if problems:
                raise BadModuleParameter(f"{source}: {spec.params_key(cc)}: {problems[0]}")
