"""The runs one guest of a `--vm` session makes, as the host chose them: its plan file.

The host expands the experiments file (plan.py), selects runs (--only, --shard, --first-repetition,
each VM's share) and writes every guest the RunSpecs it must make into a JSON file the guest can
read; the guest's `cctest guest-run PLAN` reads them back and runs them natively. The guest never
reads the experiments file, so what it makes is the host's choice by construction, not because two
expansions of one file happened to agree.

The file holds the RunSpecs as pydantic serialises their dataclasses (the link and each flow as
planned, the scenario with only the keys it was given, so that it comes back as it was made), the
invocation's scenario names, where the guest writes its run directories and lists them, in the
guest's own names, and what the runs record that the host reads faster (the checkout's commit, the
tools' versions). Those facts travel here, read once by the guest's cctest, and not in the guest's
environment, which every process in the guest inherits: their text differs between machines (a
container that may not execute the setcap'd `ping` records it "missing"), and an environment of
another length moved a seeded guest's clock. A UML guest's names are fixed places, so its plan
names no host path: a seeded run repeats bit for bit only when nothing that differs between
machines reaches the guest (docs/uml.md, "Determinism").
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from pydantic import field_validator, model_validator

from ..base import atomic
from ..base.errors import BadInput
from ..base.strict import Strict
from . import versioned
from .plan import RunSpec, flow_runs, link_run

PLAN_VERSION = 2  # what this code writes
READABLE_VERSIONS = (2,)  # a guest reads the plan of its own host's checkout
# About 3 kB a run (the scenario and its resolved mapping ride along): room for tens of thousands.
MAX_PLAN_BYTES = 256 << 20


class PlanError(BadInput):
    """A plan file this code cannot read, or a run it cannot carry: the message names the file."""


class HostFacts(Strict):
    """What a guest's runs record about the code and the tools, as the host found them: the same
    checkout, the same binaries (a guest's root is its host's)."""

    commit: str | None
    tools: dict[str, str]


class GuestPlan(Strict):
    plan_version: int
    names: list[str]  # the invocation's scenarios, as the session's journal names its work
    out: str  # where the guest writes its run directories
    manifest: str  # where it lists each run directory as it starts it
    facts: HostFacts
    runs: list[RunSpec]

    @field_validator("out", "manifest")
    @classmethod
    def absolute(cls, path: str) -> str:
        if not PurePosixPath(path).is_absolute():
            raise ValueError(f"{path!r} is not an absolute path; the host names the guest's places in full")
        return path

    @model_validator(mode="after")
    def runs_are_what_their_scenarios_make(self) -> GuestPlan:
        """A run carries its link, flows and seed beside the scenario they come from (plan.expand);
        a file where they disagree would run one thing and record another."""
        if not self.runs:
            raise ValueError("runs: none; a plan holds the runs its guest makes")
        for i, run in enumerate(self.runs):
            flows = flow_runs(run.scenario)
            if run.flows != flows:
                raise ValueError(f"runs.{i}.flows: not the flows its scenario makes")
            if run.link != link_run(run.scenario.link, max(flow.rtt_ms for flow in flows)):
                raise ValueError(f"runs.{i}.link: not the link its scenario makes")
            if run.seed != run.scenario.seed + run.repetition:
                raise ValueError(f"runs.{i}.seed: not its scenario's seed plus its repetition")
        return self

    def to_json(self) -> str:
        # exclude_unset: each scenario model keeps exactly the keys it was validated from
        return self.model_dump_json(exclude_unset=True) + "\n"


def write(path: Path, runs: list[RunSpec], *, names: list[str], out: str, manifest: str, facts: HostFacts) -> None:
    """The plan file of one guest at `path`."""
    plan = GuestPlan(plan_version=PLAN_VERSION, names=names, out=out, manifest=manifest, facts=facts, runs=runs)
    atomic.write_text(path, plan.to_json())


def check_carried(runs: list[RunSpec]) -> None:
    """Before any guest boots: every run reads back from a plan file as exactly the run the host
    made, or a PlanError naming the first that does not (a value JSON cannot carry, e.g. a
    YAML date, would otherwise reach the guest changed)."""
    # only the runs are checked: any places will do
    text = GuestPlan(plan_version=PLAN_VERSION, names=[], out="/", manifest="/",
                     facts=HostFacts(commit=None, tools={}), runs=runs).to_json()
    back = parse(text.encode(), "the plan of this session").runs
    for run, read_back in zip(runs, back, strict=True):
        if read_back != run or read_back.scenario.model_fields_set != run.scenario.model_fields_set:
            raise PlanError(f"scenario {run.scenario.name}: run {run.label} r{run.repetition} does not survive a "
                            "guest's plan file unchanged (a value JSON cannot carry?)")


def parse(data: bytes, source: str) -> GuestPlan:
    """The plan in `data`, or a PlanError naming `source` and what is wrong."""
    return versioned.parse(data, source, GuestPlan, version_key="plan_version", readable=READABLE_VERSIONS,
                           noun="a plan", error=PlanError, unknown_field="not a field of a plan",
                           not_json_hint="; a plan file is what the host of a --vm session wrote")


def read(path: Path) -> GuestPlan:
    """The plan file at `path` (a regular file, bounded), or a PlanError naming it."""
    return parse(versioned.read_bytes(path, MAX_PLAN_BYTES, "a plan file", PlanError), str(path))
