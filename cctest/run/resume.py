"""`cctest run --resume`: the planned runs that --out already holds, made as this session would make
them, so that a campaign cut short (a session's end, a machine's) goes on where it stopped.

A run counts as made when its directory under --out/<scenario>/ says, in meta.json and
scenario.yaml: status ok; the same scenario as resolved now, matrix point, repetition and seed; this
checkout's commit (a checkout with uncommitted changes cannot tell its runs from another's); and the
engine this session runs on (its name and kernel build). Anything else (failed, interrupted, another
commit or engine) is run again, its old directory left as it is."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import BadInput, CctestError
from ..host import rundir
from ..model import record, runfiles
from ..model.plan import RunSpec

# Per guest, not per build: which host CPU it was pinned to, and the seed its kernel booted with
# (the run's own seed, compared on its own).
PER_GUEST = {"host_cpu", "rng_seed"}
COMPARED = ("status", "scenario", "matrix", "repetition", "seed", "cctest", "engine", "kernel")


@dataclass(frozen=True)
class Made:
    """The runs of a selection found made: index into the selection -> its run directory."""

    dirs: dict[int, Path]

    def remaining(self, specs: list[RunSpec]) -> list[RunSpec]:
        return [spec for i, spec in enumerate(specs) if i not in self.dirs]

    def not_ingested(self) -> list[Path]:
        """Made, but the session that made them ended before it wrote their tables."""
        return [d for d in self.dirs.values() if not (d / "checks.json").exists()]


def commit_to_match() -> str:
    commit = rundir.git_commit()
    if not commit or commit.endswith("-dirty"):
        raise BadInput(f"--resume: this checkout's commit is {commit or 'unknown'}: resume needs a clean checkout "
                       "(commit or stash the changes) so that the runs it keeps are this code's")
    return commit


def find_made(specs: list[RunSpec], out: Path, engine: dict, release: str | None = None) -> Made:
    """Which of `specs` --out holds made by `commit_to_match()` on `engine` (its record, as the runs'
    meta.json carries it; `release`: the kernel release a native run must have run on)."""
    commit = commit_to_match()
    wanted = _as_json({k: v for k, v in engine.items() if k not in PER_GUEST})
    kept: dict[str, list[Kept]] = {}  # each scenario's finished runs in --out, each read once
    found: dict[int, Path] = {}
    for i, spec in enumerate(specs):
        if spec.scenario.name not in kept:
            kept[spec.scenario.name] = _kept_runs(out / spec.scenario.name, commit, wanted, release)
        candidates = kept[spec.scenario.name]
        text = rundir.scenario_text(spec).encode()
        match = next((k for k in candidates if k.is_of(spec, text)), None)
        if match is not None:
            found[i] = match.run_dir
            candidates.remove(match)  # one directory stands for one planned run
    return Made(found)


@dataclass(frozen=True)
class Kept:
    """A finished run in --out made by this commit on this engine: what a planned run is matched on."""

    run_dir: Path
    ran: record.RunRecord
    scenario: bytes  # its scenario.yaml

    def is_of(self, spec: RunSpec, text: bytes) -> bool:
        return (self.ran.scenario == spec.scenario.name and self.ran.matrix == _as_json(spec.matrix)
                and self.ran.repetition == spec.repetition and self.ran.seed == spec.seed and self.scenario == text)


def _kept_runs(scenario_dir: Path, commit: str, engine: dict, release: str | None) -> list[Kept]:
    if not scenario_dir.is_dir():
        return []
    found = []
    for run_dir in sorted(scenario_dir.iterdir()):
        try:  # bounded reads, no link followed out of the run directory: --out may hold anyone's runs
            meta = runfiles.read_json(run_dir, "meta.json")
            scenario = runfiles.read_bytes(run_dir, "scenario.yaml", runfiles.MAX_JSON_BYTES, "the resolved scenario")
            ran = record.read_parts(meta, COMPARED, run_dir / "meta.json") if isinstance(meta, dict) else None
        except (OSError, CctestError):
            continue  # not a run of ours to keep: its planned run runs again
        if ran is None or scenario is None:
            continue
        ran_on = ran.engine.model_dump(exclude_unset=True) if ran.engine else {}
        if (ran.status == "ok" and ran.cctest is not None and ran.cctest.git_commit == commit
                and _as_json({k: ran_on.get(k) for k in engine}) == engine
                and (release is None or (ran.kernel is not None and ran.kernel.release == release))):
            found.append(Kept(run_dir, ran, scenario))
    return found


def _as_json(value: dict) -> dict:
    """As meta.json holds it (tuples as lists): what a run directory's record is compared with."""
    return json.loads(json.dumps(value))
