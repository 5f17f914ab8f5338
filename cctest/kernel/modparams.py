"""A module parameter's allowed values, as the module itself states them.

A module's description of a parameter may end in "[range LO..HI]", "[range 0 or LO..HI]" (0 means
"unset") or "[read-only]": the module's own range check (its parameter ops refuse anything else
with -EINVAL) and this model are the same definition. kmod reads the descriptions from a built
module (modinfo), modsource from its sources before anything is built; both read them here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

RANGE = re.compile(r"\[range (?P<zero>0 or )?(?P<lo>\d+)\.\.(?P<hi>\d+)\]\s*$")
READ_ONLY = re.compile(r"\[read-only\]\s*$")


@dataclass(frozen=True)
class ParamSpec:
    name: str
    lo: int | None = None  # None: the module states no range (any value its type takes)
    hi: int | None = None
    zero_ok: bool = False
    read_only: bool = False

    @classmethod
    def described(cls, name: str, description: str, writable: bool = True) -> ParamSpec:
        """The spec a parameter's description states; one that cannot be written is read-only."""
        bounds = RANGE.search(description)
        if bounds and writable:
            return cls(name, int(bounds["lo"]), int(bounds["hi"]), bool(bounds["zero"]))
        return cls(name, read_only=bool(READ_ONLY.search(description)) or not writable)

    def allows(self, value: int) -> bool:
        if self.read_only:
            return False
        if self.lo is None or self.hi is None:
            return True
        return self.lo <= value <= self.hi or (self.zero_ok and value == 0)

    def allowed(self) -> str:
        if self.read_only:
            return "read-only (a counter the module reports)"
        if self.lo is None:
            return "any integer"
        return f"{'0 or ' if self.zero_ok else ''}{self.lo}..{self.hi}"


def param_problem(cc: str, specs: dict[str, ParamSpec], name: str, value: int) -> str | None:
    """What is wrong with setting `name`=`value` on module `cc`, or None."""
    spec = specs.get(name)
    if spec is None:
        return f"module {cc} has no parameter {name!r}; allowed: {', '.join(specs) or '(none)'}"
    if not spec.allows(value):
        return f"{value} is not allowed for {cc} parameter {name}; allowed: {spec.allowed()}"
    return None
