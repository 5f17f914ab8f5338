"""The claims run directories carry (each scenario's `expect:` in its runs' scenario.yaml), read
and validated as experiments.yaml's are before `report` or `check` judges them.

Runs may come from anywhere (a CI artifact, a colleague's tarball), so the gate must not lose a
claim on the way: a scenario.yaml that cannot be read, an entry that is not a claim, an invalid
`known:` triage or a `where:` key the runs lack is bad input (exit 2), never a warning and a pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..base.errors import BadInput
from ..base.limits import MAX_EXPERIMENTS_BYTES
from ..base.safeload import Refused, load_yaml
from ..model import runfiles
from ..model.claim_language import ClaimError
from ..model.scenario import Expect, _describe, unknown_key_message
from .claims import Expectation, _is_bool

if TYPE_CHECKING:
    from .load import Run


class UnjudgeableClaims(BadInput):
    """A claim carried by run directories that cannot be judged: it fails the gate (exit 2) rather
    than dropping out of it with a warning."""


def _scenario_file(run: Run) -> dict:
    """The run's scenario.yaml as run (absent: no claims), by the one reader of run directories and
    the bounded loader of experiments files (a run directory may come from anywhere: a CI artifact)."""
    if run.recorded is not None:  # a compact record carries the text, read by the same loader
        text = run.recorded.scenario_yaml
        try:
            resolved = load_yaml(text) if text is not None else None
        except Refused as error:
            raise Refused(f"{run.path / 'record.json'}: scenario_yaml: {error}") from None
    else:
        resolved = runfiles.read_yaml(run.path, "scenario.yaml", MAX_EXPERIMENTS_BYTES, "a scenario.yaml")
    if resolved is not None and not isinstance(resolved, dict):
        raise Refused(f"{run.path / 'scenario.yaml'}: not a mapping of keys; a scenario.yaml is one")
    return resolved or {}


def validated_entry(name: str, k: int, entry: Any, matrix: dict[str, list], tags: tuple[str, ...] = (),
                    repetitions: int | None = None) -> Expectation:
    """One `expect:` entry carried by runs, validated as experiments.yaml's are (scenario.Expect:
    known keys, a parsable claim, a valid `known:` triage) and its `where:` keys among the matrix
    keys its runs record (`matrix`: key -> the values they record), a boolean only where those are
    booleans; ClaimError names the entry otherwise."""
    where = f"scenario {name}: expect.{k}"
    if not isinstance(entry, dict):
        raise ClaimError(f"{where}: {type(entry).__name__} {entry!r}; a claim is a mapping with a claim: key")
    try:
        checked = Expect.model_validate(entry)
    except ValidationError as error:
        extra = [e["loc"] for e in error.errors() if e["type"] == "extra_forbidden" and len(e["loc"]) == 1]
        if extra:  # _describe names a scenario's keys; these are a claim's
            message = unknown_key_message(str(extra[0][0]), list(Expect.model_fields))
            raise ClaimError(f"{where}.{extra[0][0]}: {message}") from None
        key, message = _describe(error)
        raise ClaimError(f"{where}.{key}: {message}") from None
    for key, wanted in checked.where.items():
        if key not in matrix:
            raise ClaimError(f"{where}.where: {key!r} is not a matrix key of its runs; allowed: "
                             f"{', '.join(sorted(matrix)) or 'none (its runs have no matrix)'}")
        for value in wanted if isinstance(wanted, list) else [wanted]:
            if _is_bool(value) != any(_is_bool(v) for v in matrix[key]):  # True would select the point 1
                raise ClaimError(f"{where}.where.{key}: {value!r}; its runs' values are "
                                 f"{', '.join(map(str, matrix[key]))}")
    return Expectation.from_entry(name, checked.model_dump(exclude_none=True), tags, repetitions)


def expectations_of_runs(runs: list[Run]) -> tuple[list[Expectation], list[str]]:
    """The expectations recorded with each scenario's runs (their scenario.yaml), once per scenario,
    and notes for the report. A claim that cannot be read or judged is UnjudgeableClaims: the
    first named, and how many more."""
    files: dict[str, dict] = {}
    matrices: dict[str, dict[str, list]] = {}  # scenario -> matrix key -> the values its runs record
    problems: list[str] = []
    for run in runs:
        name = run.record.scenario
        if name is None:
            continue
        for key, value in (run.record.matrix or {}).items():
            matrices.setdefault(name, {}).setdefault(key, []).append(value)
        if name in files:
            continue
        try:
            files[name] = _scenario_file(run)
        except Refused as error:
            problems.append(str(error))
            files[name] = {}
    out = []
    for name, resolved in files.items():
        tags = tuple(map(str, resolved["tags"])) if isinstance(resolved.get("tags"), list) else ()
        reps = resolved.get("repetitions")  # the n its points are judged on
        reps = reps if isinstance(reps, int) and not isinstance(reps, bool) and reps >= 1 else None
        entries = resolved.get("expect") or []
        if not isinstance(entries, list):
            problems.append(f"scenario {name}: expect: {type(entries).__name__}; a list of claims")
            continue
        for k, entry in enumerate(entries):
            try:
                out.append(validated_entry(name, k, entry, matrices.get(name, {}), tags, reps))
            except ClaimError as error:
                problems.append(str(error))
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UnjudgeableClaims(f"{problems[0]}{more}; a claim that cannot be judged fails the gate")
    return out, []
