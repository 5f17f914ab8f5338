"""experiments.yaml -> validated scenario models.

The file has `defaults:` (merged under every scenario), `scenarios:` and `include:`, the paper
suites' files (cctest/model/suites.py), whose scenarios take the same defaults. A scenario is plain data;
plan.py turns it into concrete runs. Every validation failure becomes one ScenarioError line that
names the file, the scenario, the key and what is allowed.
"""

from __future__ import annotations

import copy
import difflib
import math
import re
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    Field,
    StrictInt,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ..base import safeload
from ..base.errors import BadInput
from ..base.limits import MAX_EXPERIMENTS_BYTES
from ..base.strict import Strict
from ..kernel.projectccs import KERNEL_CCS, PROJECT_CCS
from .aqm import AQMS, AqmKind, Queue, aqm_settings
from .claim_language import ClaimError, parse as parse_claim, steady_terms
from .metric_table import STEADY_CC_TERMS, STEADY_RUN_TERMS
from .suites import MAX_INCLUDES, Suite, check_file_name, check_suite_tags, folder_entries, include_path, suite_tag_of
from .wire import ETHERNET_FRAME_BYTES

# Anything but the kernel's and this project's congestion controls is rejected before a run starts.
KNOWN_CCS = KERNEL_CCS + PROJECT_CCS

MAX_FLOWS = 253  # flow i's hosts are 10.0.1.(i+1) and 10.0.2.(i+1)
MAX_BUFFER_BYTES = 1 << 30  # 1 GiB: far beyond any emulated path, and netem's limit stays in range
MAX_PARAM = 2**32 - 1  # module parameters are uint
MAX_FILE_BYTES = MAX_EXPERIMENTS_BYTES
MAX_NESTING = safeload.MAX_NESTING


class ScenarioError(BadInput):
    """A one-line, user-facing description of what is wrong with experiments.yaml."""


ModuleParam = Annotated[StrictInt, Field(ge=0, le=MAX_PARAM)]


MIN_RATE_MBPS, MAX_RATE_MBPS = 0.01, 100_000


# tc applies delays in whole microseconds (64 ns ticks, then rounded): a smaller or finer delay is
# not what runs. Timed link changes go one at a time from one tc process: closer than a millisecond
# no packet would see the one between.
DELAY_RESOLUTION_MS = 0.001
MIN_CHANGE_GAP_S = 0.001
MAX_SCHEDULE_STEPS = 1000  # rate steps, and outages, per link: a schedule, not a trace to replay
MAX_NAME_CHARS = 64  # a scenario's name starts each run directory's name


Ms = TypeVar("Ms", float, float | None)


def whole_microseconds(value: Ms, key: str) -> Ms:
    if value is not None and abs(value / DELAY_RESOLUTION_MS - round(value / DELAY_RESOLUTION_MS)) > 1e-6:
        raise ValueError(f"{key}: {value!r} ms is not a whole number of microseconds, the resolution tc "
                         f"applies delays at; round it (e.g. {round(value, 3):g})")
    return value


def not_sub_millisecond(seconds: float, key: str) -> float:
    if seconds < MIN_CHANGE_GAP_S:
        raise ValueError(f"{key}: {seconds!r} s; at least {MIN_CHANGE_GAP_S * 1000:g} ms (a link change is applied "
                         "by a tc process, not at a finer time)")
    return seconds


class RateStep(Strict):
    """From `at_s` seconds after time zero on, the bottleneck runs at `rate_mbps`."""

    at_s: float = Field(gt=0, le=3600)
    rate_mbps: float = Field(ge=MIN_RATE_MBPS, le=MAX_RATE_MBPS)

    @field_validator("at_s")
    @classmethod
    def after_time_zero(cls, at_s: float) -> float:
        return not_sub_millisecond(at_s, "at_s")


class Outage(Strict):
    """From `at_s` seconds after time zero, for `duration_s`, the link delivers nothing: every packet
    leaving the bottleneck towards a receiver is dropped (a route failure, a radio fade)."""

    at_s: float = Field(gt=0, le=3600)
    duration_s: float = Field(gt=0, le=3600)

    @field_validator("at_s", "duration_s")
    @classmethod
    def not_too_close(cls, seconds: float, info: ValidationInfo) -> float:
        assert info.field_name is not None  # a field's validator
        return not_sub_millisecond(seconds, info.field_name)


class Link(Strict):
    # netem's rate is whole bit/s: below 10 kbit/s the rounding is the rate, and 0 means no shaping.
    rate_mbps: float = Field(ge=MIN_RATE_MBPS, le=MAX_RATE_MBPS)
    rtt_ms: float = Field(ge=DELAY_RESOLUTION_MS, le=10_000)
    buffer_bdp: float | None = Field(default=None, gt=0, le=1000)
    buffer_bytes: int | None = Field(default=None, gt=0, le=MAX_BUFFER_BYTES)
    loss_pct: float = Field(default=0.0, ge=0, lt=100)
    bdp_rtt_ms: float | None = Field(default=None, gt=0, le=10_000)
    aqm: AqmKind = "fifo"  # the bottleneck's queue discipline (cctest/model/aqm.py)
    aqm_params: dict[str, Any] = Field(default_factory=dict)  # checked against the aqm's own model
    ecn: bool = False  # senders and receivers negotiate ECN; the AQM marks instead of dropping
    rate_schedule: list[RateStep] = Field(default_factory=list, max_length=MAX_SCHEDULE_STEPS)
    outages: list[Outage] = Field(default_factory=list, max_length=MAX_SCHEDULE_STEPS)

    @model_validator(mode="before")
    @classmethod
    def schedules_bounded(cls, data: Any) -> Any:
        # before the steps are validated one by one: the bound is on that work too
        for key in ("rate_schedule", "outages"):
            steps = data.get(key) if isinstance(data, dict) else None
            if isinstance(steps, list) and len(steps) > MAX_SCHEDULE_STEPS:
                raise ValueError(f"{key}: {len(steps)} entries; at most {MAX_SCHEDULE_STEPS} per link")
        return data

    @field_validator("rtt_ms")
    @classmethod
    def rtt_applies(cls, rtt_ms: float) -> float:
        return whole_microseconds(rtt_ms, "rtt_ms")

    @model_validator(mode="after")
    def one_buffer_size(self) -> Link:
        if self.buffer_bdp is None and self.buffer_bytes is None:
            raise ValueError("set one of buffer_bdp or buffer_bytes")
        if self.buffer_bdp is not None and self.buffer_bytes is not None:
            raise ValueError("set only one of buffer_bdp or buffer_bytes, not both")
        if self.buffer_size_bytes > MAX_BUFFER_BYTES:
            raise ValueError(f"buffer is {self.buffer_size_bytes} bytes, more than {MAX_BUFFER_BYTES} (1 GiB); "
                             "lower buffer_bdp or buffer_bytes")
        if self.buffer_size_bytes < ETHERNET_FRAME_BYTES:
            raise ValueError(
                f"buffer is {self.buffer_size_bytes} bytes, less than one packet "
                f"({ETHERNET_FRAME_BYTES} bytes); raise buffer_bdp or buffer_bytes"
            )
        return self

    @model_validator(mode="after")
    def composable_bottleneck(self) -> Link:
        aqm_settings(self.aqm, self.aqm_params, self.queue)  # raises "aqm_params.<key>: ..." naming what is allowed
        if self.ecn and self.aqm == "fifo":
            raise ValueError("ecn: a fifo only drops; set aqm to one of "
                             f"{', '.join(a for a in AQMS if a != 'fifo')} to mark packets")
        times = [step.at_s for step in self.rate_schedule]
        if times != sorted(set(times)):
            raise ValueError(f"rate_schedule: at_s must increase from step to step, got {times}")
        for i, (before, after) in enumerate(pairwise(times), start=1):
            if after - before < MIN_CHANGE_GAP_S - 1e-12:
                raise ValueError(f"rate_schedule.{i}.at_s: {after!r} s is {after - before:.3g} s after the step "
                                 f"before; steps are at least {MIN_CHANGE_GAP_S * 1000:g} ms apart (tc applies them "
                                 "one at a time)")
        for i, (previous, outage) in enumerate(pairwise(self.outages), start=1):
            if outage.at_s < previous.at_s + previous.duration_s:
                raise ValueError(f"outages.{i}.at_s: {outage.at_s:g} s is before the previous outage ends "
                                 f"({previous.at_s + previous.duration_s:g} s); list outages in time order, apart")
        return self

    @property
    def bdp_bytes(self) -> int:
        """Bandwidth-delay product at the BDP reference RTT (default: the base RTT)."""
        rtt_ms = self.bdp_rtt_ms if self.bdp_rtt_ms is not None else self.rtt_ms
        return int(self.rate_mbps * 1e6 / 8 * rtt_ms / 1e3)

    @property
    def buffer_size_bytes(self) -> int:
        if self.buffer_bytes is not None:
            return self.buffer_bytes
        assert self.buffer_bdp is not None  # one of the two is set (one_buffer_size)
        return int(round(self.buffer_bdp * self.bdp_bytes))

    @property
    def queue(self) -> Queue:
        return Queue(self.buffer_size_bytes, self.rate_mbps, self.ecn)


class Flow(Strict):
    cc: str
    count: int = Field(default=1, ge=1, le=32)
    rtt_ms: float | None = Field(default=None, ge=DELAY_RESOLUTION_MS, le=10_000)
    start_s: float = Field(default=0.0, ge=0)
    duration_s: float | None = Field(default=None, gt=0)
    params: dict[str, ModuleParam] = Field(default_factory=dict)

    @field_validator("rtt_ms")
    @classmethod
    def rtt_applies(cls, rtt_ms: float | None) -> float | None:
        return whole_microseconds(rtt_ms, "rtt_ms")

    @field_validator("cc")
    @classmethod
    def known_cc(cls, cc: str) -> str:
        if cc not in KNOWN_CCS:
            raise ValueError(f"unknown congestion control {cc!r}; allowed: {', '.join(KNOWN_CCS)}")
        return cc

    @field_validator("params")
    @classmethod
    def param_names(cls, params: dict[str, int]) -> dict[str, int]:
        for name in params:
            if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
                raise ValueError(f"module parameter name {name!r} must match [a-z_][a-z0-9_]*")
        return params

    @model_validator(mode="after")
    def params_only_for_project_modules(self) -> Flow:
        if self.params and self.cc not in PROJECT_CCS:
            raise ValueError(f"params: {self.cc} is the kernel's own congestion control and takes none; "
                             f"params are for this project's modules ({', '.join(PROJECT_CCS)})")
        return self


class CaptureSettings(Strict):
    ss_interval_ms: int = Field(default=100, ge=10, le=10_000)
    qdisc_interval_ms: int = Field(default=100, ge=10, le=10_000)
    tcp_probe: bool = True
    pcap: bool = False


class Known(Strict):
    """An expected failure of a claim: why it fails (its triage) and the evidence, one line."""

    # claims.TRIAGES: no "scale": a scaled-down copy is tagged quick-* and stays outside the score
    triage: Literal["implementation", "spec", "setting", "paper"]
    reason: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=300)]

    @field_validator("triage", mode="before")
    @classmethod
    def scale_is_no_triage(cls, triage: Any) -> Any:
        if triage == "scale":
            raise ValueError("scale is no triage: run the claim at the paper's scale, where it passes or fails "
                             "(a scaled-down copy is tagged quick-* outside the score); allowed: implementation, "
                             "spec, setting, paper")
        return triage


class Expect(Strict):
    """One claim a scenario's results must bear out (cctest/model/claim_language.py has the language)."""

    claim: str
    where: dict[str, Any] = Field(default_factory=dict)  # matrix key -> value or list of values
    source: str = ""  # where the number comes from, e.g. "000 Fig. 13a"
    paper: str = ""  # the paper's own value as it states it, e.g. "0.48" (docs/reproduction.md)
    note: str = ""  # how our setting or implementation differs from the source's
    known: Known | None = None  # an expected failure: `cctest check` reports known-fail, not fail
    at_least: int | None = Field(default=None, ge=1)  # selected points that must pass (default all)
    steady_from_s: float | None = Field(default=None, gt=0, le=3600)  # steady terms measured from here
    # A race: the claim must hold in at least this many of a point's declared runs (per-run values shown)
    at_least_runs: int | None = Field(default=None, ge=1)
    sanity: bool = False  # no paper measured it: judged and listed apart, never in the score

    @model_validator(mode="after")
    def steady_from_needs_a_steady_term(self) -> Expect:
        if self.steady_from_s is not None and not steady_terms(parse_claim(self.claim)):
            allowed = ", ".join([*STEADY_RUN_TERMS, *(f"{t}(cc)" for t in STEADY_CC_TERMS)])
            raise ValueError(f"steady_from_s: the claim names no steady-state term; it moves only {allowed}")
        return self

    @field_validator("claim")
    @classmethod
    def parses(cls, text: str) -> str:
        try:
            parse_claim(text)
        except ClaimError as error:
            raise ValueError(f"{text!r}: {error}") from None
        return text


def same_value(a: Any, b: Any) -> bool:
    """Equal as a matrix value: a boolean equals only a boolean (in Python True == 1, and
    `--only buffer_bdp=true` or `where: {buffer_bdp: true}` would select the point 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return a == b


MATRIX_ROOTS = ("link", "flows", "duration_s", "capture", "seed")


class Scenario(Strict):
    name: str = ""
    description: str = ""
    tags: list[Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_.-]*$")]] = Field(default_factory=list)
    link: Link
    flows: list[Flow] = Field(min_length=1)
    duration_s: float = Field(gt=0, le=3600)
    repetitions: int = Field(default=1, ge=1, le=1000)
    capture: CaptureSettings = Field(default_factory=CaptureSettings)
    seed: int = Field(default=1, ge=0)
    matrix: dict[str, list[Any]] = Field(default_factory=dict)
    expect: list[Expect] = Field(default_factory=list)  # after flows and matrix: its check reads them

    @model_validator(mode="after")
    def flows_fit(self) -> Scenario:
        if self.flow_count > MAX_FLOWS:
            raise ValueError(f"flows: {self.flow_count} flows (counts summed); at most {MAX_FLOWS}, "
                             "one address per flow in 10.0.1.0/24")
        for i, flow in enumerate(self.flows):
            if flow.start_s >= self.duration_s:
                raise ValueError(f"flows.{i}.start_s: {flow.start_s:g} s is not before the scenario's end "
                                 f"(duration_s = {self.duration_s:g} s)")
            length = flow.duration_s or self.duration_s - flow.start_s
            end = flow.start_s + length
            if end > self.duration_s + 1e-9:
                raise ValueError(
                    f"flows.{i}: start_s + duration_s = {end:g} s exceeds the scenario's "
                    f"duration_s = {self.duration_s:g} s"
                )
            if abs(length - round(length)) > 1e-9 or round(length) < 1:
                # iperf3 -t takes whole seconds (2.7 runs 2 s, 0.4 runs forever): refuse, never round.
                raise ValueError(
                    f"flows.{i}: lasts {length:g} s; iperf3 runs whole seconds: make the flow's duration_s "
                    "(or the scenario's duration_s minus its start_s) a whole number of seconds, at least 1"
                )
        params_by_cc: dict[str, dict[str, int]] = {}
        for i, flow in enumerate(self.flows):
            # Module parameters are global to a module: flows sharing a cc must agree.
            seen = params_by_cc.setdefault(flow.cc, flow.params)
            if seen != flow.params:
                raise ValueError(
                    f"flows.{i}.params: flows using {flow.cc} must all have the same params "
                    "(module parameters are global to the module)"
                )
        return self

    @model_validator(mode="after")
    def link_schedule_within_run(self) -> Scenario:
        for i, step in enumerate(self.link.rate_schedule):
            if step.at_s >= self.duration_s:
                raise ValueError(f"link.rate_schedule.{i}.at_s: {step.at_s:g} s is not before the scenario's end "
                                 f"(duration_s = {self.duration_s:g} s)")
        for i, outage in enumerate(self.link.outages):
            if outage.at_s + outage.duration_s > self.duration_s:
                raise ValueError(f"link.outages.{i}: it ends at {outage.at_s + outage.duration_s:g} s, after the "
                                 f"scenario's end (duration_s = {self.duration_s:g} s)")
        return self

    @field_validator("matrix")
    @classmethod
    def matrix_varies_what_a_run_can(cls, matrix: dict[str, list[Any]]) -> dict[str, list[Any]]:
        """A matrix key sets what differs between runs: the link, the flows, the length, the
        captures, the seed. Not `name`, `repetitions`, `expect`, `matrix`, `tags` or `description`:
        those are about the scenario as a whole (a matrix over them mislabels its runs)."""
        for key in matrix:
            first = key.split(".", 1)[0]
            if first not in MATRIX_ROOTS and first not in Link.model_fields:
                raise ValueError(f"{key}: a run cannot vary {first}; a matrix key is a link field "
                                 f"({', '.join(Link.model_fields)}) or a path under {', '.join(MATRIX_ROOTS)}")
        return matrix

    @field_validator("expect")
    @classmethod
    def expectations_name_what_runs(cls, expect: list[Expect], info: ValidationInfo) -> list[Expect]:
        """Claims' `where` keys and values must be the matrix's, their ccs ones that run."""
        matrix = info.data.get("matrix") or {}
        ccs = {flow.cc for flow in info.data.get("flows") or []}
        for key, values in matrix.items():
            if re.fullmatch(r"flows\.(\d+|\*)\.cc", key):
                ccs.update(str(v) for v in values)
        for i, entry in enumerate(expect):
            for key, wanted in entry.where.items():
                if key not in matrix:
                    allowed = ", ".join(matrix) or "none (no matrix)"
                    raise ValueError(f"claim {i}: where {key!r} is not a matrix key; allowed: {allowed}")
                for value in wanted if isinstance(wanted, list) else [wanted]:
                    if not any(same_value(value, v) for v in matrix[key]):
                        raise ValueError(f"claim {i}: where {key}: {value!r} is not among the matrix's values "
                                         f"{matrix[key]}")
            selected = {k: entry.where.get(k, values) for k, values in matrix.items()}
            points = math.prod(len(v) if isinstance(v, list) else 1 for v in selected.values())
            if entry.at_least is not None and entry.at_least > points:
                raise ValueError(f"claim {i}: at_least: {entry.at_least} is more than the {points} matrix "
                                 "point(s) it selects")
            repetitions = info.data.get("repetitions")
            if entry.at_least_runs is not None and repetitions is not None and entry.at_least_runs > repetitions:
                raise ValueError(f"claim {i}: at_least_runs: {entry.at_least_runs} is more than the scenario's "
                                 f"{repetitions} repetitions")
            duration = info.data.get("duration_s")
            if entry.steady_from_s is not None and duration is not None and entry.steady_from_s >= duration:
                raise ValueError(f"claim {i}: steady_from_s: {entry.steady_from_s:g} s is not before the "
                                 f"scenario's end (duration_s = {duration:g} s)")
            unknown = sorted(parse_claim(entry.claim).ccs - ccs)
            if unknown and info.data.get("flows") is not None:
                raise ValueError(f"claim {i}: {entry.claim!r} names {', '.join(unknown)}, which no flow runs; "
                                 f"this scenario runs: {', '.join(sorted(ccs))}")
        return expect

    @property
    def flow_count(self) -> int:
        return sum(flow.count for flow in self.flows)


def _deep_merge(base: dict, override: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict) and key != "matrix":
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _model_at(loc: tuple) -> type[BaseModel] | None:
    """The model whose mapping holds the key at `loc` (a pydantic error location), or None."""
    model: type[BaseModel] = Scenario
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        if field is None:
            return None
        inner = [t for t in (field.annotation, *getattr(field.annotation, "__args__", ()))
                 if isinstance(t, type) and issubclass(t, BaseModel)]
        if not inner:
            return None
        model = inner[0]
    return model


def unknown_key_message(key: str, allowed: list[str]) -> str:
    """'unknown key; did you mean X? allowed: ...', the suggestion when one is close enough."""
    close = difflib.get_close_matches(key, allowed, n=1)
    return "unknown key" + (f"; did you mean {close[0]}?" if close else "") + f" (allowed: {', '.join(allowed)})"


def _describe(error: ValidationError) -> tuple[str, str]:
    # An unknown key first: a typo (bufer_bdp) also makes its real key missing, and the typo is the news.
    errors = error.errors()
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    key = ".".join(str(part) for part in first["loc"]) or "(scenario)"
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        model = _model_at(first["loc"])
        allowed = [k for k in (model.model_fields if model else ()) if not (model is Scenario and k == "name")]
        message = unknown_key_message(str(first["loc"][-1]), allowed) if allowed else "unknown key"
    elif "params" in first["loc"] and first["type"].startswith("int"):
        message = f"{message}: a module parameter is a whole number from 0 to {MAX_PARAM}"
    named = re.match(r"([a-z_]+(?:\.\w+)*): (.*)", message)
    if named and first["type"] == "value_error":  # a model check that names its key itself
        key = named.group(1) if key == "(scenario)" else f"{key}.{named.group(1)}"
        message = named.group(2)
    return key, message


def validate_scenario(raw: dict, name: str, source: str) -> Scenario:
    """Validate one scenario's merged mapping; raise ScenarioError with a one-line message."""
    if not isinstance(raw, dict):
        raise ScenarioError(f"{source}: scenario {name}: must be a mapping of keys, got {type(raw).__name__}")
    try:
        scenario = Scenario.model_validate({**raw, "name": name})
    except ValidationError as error:
        key, message = _describe(error)
        raise ScenarioError(f"{source}: scenario {name}: key {key}: {message}") from None
    return scenario


class Experiments(BaseModel):
    """All scenarios of an experiments file and the suite files it includes, validated and with the
    experiments file's defaults applied."""

    source: str
    scenarios: dict[str, Scenario]
    raw: dict[str, dict]  # merged, unvalidated mappings: matrix expansion edits these
    suites: dict[str, Suite] = Field(default_factory=dict)  # suite tag -> its header, in include order
    files: dict[str, str] = Field(default_factory=dict)  # scenario -> the file it is written in
    includes: list[str] = Field(default_factory=list)  # as listed, relative to the experiments file

    def get(self, name: str) -> Scenario:
        if name not in self.scenarios:
            allowed = ", ".join(self.scenarios) or "(none)"
            close = difflib.get_close_matches(name, list(self.scenarios), n=3)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise ScenarioError(f"{self.source}: no scenario named {name!r}; defined: {allowed}{hint}")
        return self.scenarios[name]

    def file_of(self, name: str) -> str:
        """The file scenario `name` is written in, as errors name it."""
        return self.files.get(name, self.source)


TOP_KEYS = ("defaults", "scenarios", "include")
SUITE_FILE_KEYS = ("suite", "scenarios")


class SuiteFile(BaseModel):
    """One included file: where it is (as listed, and as messages name it), its header, its scenarios."""

    entry: str
    shown: str
    suite: Suite
    scenarios: dict[str, Any]


def parse_experiments(text: str, source: str) -> Experiments:
    """An experiments file's text with no file behind it: `include:` is refused (its paths are
    relative to the file's folder)."""
    try:
        document = safeload.load_yaml(text) or {}
    except safeload.Refused as error:
        raise ScenarioError(f"{source}: {error}") from None
    return _experiments(document, source, None, None)


def load_experiments(path: str | Path) -> Experiments:
    """The experiments file at `path` and the suite files it includes, read within one budget."""
    budget = safeload.Budget(MAX_FILE_BYTES)
    try:
        document = budget.load_file(path, "an experiments file") or {}
    except safeload.Refused as error:
        hint = "; name the experiments file with -f FILE" if not Path(path).exists() else ""
        raise ScenarioError(f"{error}{hint}") from None
    return _experiments(document, str(path), Path(path), budget)


def _experiments(document: Any, source: str, path: Path | None, budget: safeload.Budget | None) -> Experiments:
    if not isinstance(document, dict):
        raise ScenarioError(f"{source}: top level must be a mapping with keys {', '.join(TOP_KEYS)}")
    if "suite" in document:
        raise ScenarioError(f"{source}: a suite file (it has suite:); name the experiments file that includes it "
                            "with -f (its defaults apply to the suite's scenarios)")
    unknown = set(document) - set(TOP_KEYS)
    if unknown:
        raise ScenarioError(f"{source}: unknown top-level key {sorted(unknown)[0]}; allowed: {', '.join(TOP_KEYS)}")
    defaults = document.get("defaults") or {}
    scenarios = document.get("scenarios") or {}
    if not isinstance(defaults, dict) or not isinstance(scenarios, dict):
        raise ScenarioError(f"{source}: defaults and scenarios must be mappings")
    included = _suite_files(document.get("include"), source, path, budget)
    if not scenarios and not included:
        raise ScenarioError(f"{source}: no scenarios defined under scenarios:")
    merged: dict[str, dict] = {}
    validated: dict[str, Scenario] = {}
    files: dict[str, str] = {}
    for file, bodies in [(source, scenarios), *((f.shown, f.scenarios) for f in included)]:
        for name, body in bodies.items():
            if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", name):
                raise ScenarioError(f"{file}: scenario {name}: name must be letters, digits and _.+-")
            if len(name) > MAX_NAME_CHARS:
                raise ScenarioError(f"{file}: scenario {name[:20]}...: a name of {len(name)} characters; at most "
                                    f"{MAX_NAME_CHARS} (it starts each run directory's name)")
            if name in files:
                raise ScenarioError(f"{file}: scenario {name}: defined already in {files[name]}; a name is one "
                                    "scenario across the experiments file and its suites")
            if not isinstance(body, dict):
                raise ScenarioError(f"{file}: scenario {name}: must be a mapping of keys")
            merged[name] = _deep_merge(defaults, body)
            validated[name] = validate_scenario(merged[name], name, file)
            files[name] = file
    _check_suites(included, validated, files)
    return Experiments(source=source, scenarios=validated, raw=merged, files=files,
                       suites={f.suite.tag: f.suite for f in included}, includes=[f.entry for f in included])


def include_entries(document: Any, source: str, path: Path | None) -> list[tuple[str, Path]]:
    """The suite files the experiments file's `include:` list names, each as named there and where
    it is (suites.include_path); a folder names every suite file in it (suites.folder_entries)."""
    entries = document.get("include") if isinstance(document, dict) else None
    if entries is None:
        return []
    if not isinstance(entries, list) or not entries:
        raise ScenarioError(f"{source}: key include: a list of suite files relative to this file, "
                            "e.g. [suites/paper-000.yaml]")
    if path is None:
        raise ScenarioError(f"{source}: key include: its paths are relative to the experiments file; read it from "
                            "a file (-f FILE)")
    if len(entries) > MAX_INCLUDES:
        raise ScenarioError(f"{source}: key include: {len(entries)} files; at most {MAX_INCLUDES}")
    itself = path.resolve()
    seen: dict[Path, int] = {}  # file -> the entry that names it
    out = []
    for i, entry in enumerate(entries):
        try:
            target = include_path(entry, path.parent)
            named = folder_entries(entry, target) if target.is_dir() else [entry]
            files = [(name, target if name == entry else include_path(name, path.parent)) for name in named]
        except ValueError as error:
            raise ScenarioError(f"{source}: key include.{i}: {error}") from None
        for name, file in files:
            if file == itself:
                raise ScenarioError(f"{source}: key include.{i}: {name}: the experiments file includes itself; "
                                    "include lists suite files")
            if file in seen:
                raise ScenarioError(f"{source}: key include.{i}: {name}: the file include.{seen[file]} names already")
            seen[file] = i
            out.append((name, file))
    if len(out) > MAX_INCLUDES:
        raise ScenarioError(f"{source}: key include: {len(out)} files; at most {MAX_INCLUDES}")
    return out


def experiment_files(path: str | Path) -> list[tuple[str, Path]]:
    """The experiments file and the suite files it includes, each as named relative to the file's
    folder and where it is, without validating a scenario (a VM guest's copy needs every file)."""
    path = Path(path)
    try:
        document = safeload.load_yaml_file(path, MAX_FILE_BYTES, "an experiments file")
    except safeload.Refused as error:
        raise ScenarioError(str(error)) from None
    return [(path.name, path), *include_entries(document, str(path), path)]


def _suite_files(entries: Any, source: str, path: Path | None, budget: safeload.Budget | None) -> list[SuiteFile]:
    files = []
    for i, (entry, target) in enumerate(include_entries({"include": entries}, source, path)):
        assert path is not None and budget is not None  # include_entries refuses a text with no file
        shown = str(path.parent / entry)
        if not target.exists():
            raise ScenarioError(f"{source}: key include.{i}: {entry}: no such file")
        try:
            document = budget.load_file(target, f"a suite file (with the experiments file, at most {MAX_FILE_BYTES} "
                                        "bytes in all)", shown=shown)
        except safeload.Refused as error:
            raise ScenarioError(str(error)) from None
        files.append(_suite_file(document, entry, shown))
    return files


def _suite_file(document: Any, entry: str, shown: str) -> SuiteFile:
    if not isinstance(document, dict) or "suite" not in document:
        raise ScenarioError(f"{shown}: key suite: missing; a suite file opens with suite: {{tag: paper-NNN, "
                            "title: ...}, then its scenarios:")
    unknown = set(document) - set(SUITE_FILE_KEYS)
    if unknown:
        raise ScenarioError(f"{shown}: unknown top-level key {sorted(unknown)[0]}; allowed in a suite file: "
                            f"{', '.join(SUITE_FILE_KEYS)} (defaults and include are the experiments file's)")
    try:
        suite = Suite.model_validate(document["suite"])
    except ValidationError as error:
        first = error.errors()[0]
        key = ".".join(["suite", *map(str, first["loc"])])
        message = (unknown_key_message(str(first["loc"][-1]), list(Suite.model_fields))
                   if first["type"] == "extra_forbidden" else first["msg"].removeprefix("Value error, "))
        raise ScenarioError(f"{shown}: key {key}: {message}") from None
    try:
        check_file_name(suite, entry)
    except ValueError as error:
        raise ScenarioError(f"{shown}: key {error}") from None
    scenarios = document.get("scenarios")
    if not isinstance(scenarios, dict) or not scenarios:
        raise ScenarioError(f"{shown}: key scenarios: a suite file holds its scenarios, a mapping of name to "
                            "scenario")
    return SuiteFile(entry=entry, shown=shown, suite=suite, scenarios=scenarios)


def _check_readings(f: SuiteFile, scenarios: dict[str, Scenario]) -> None:
    """A readings table names its file's scenarios, and points (the column's and the row's `where`)
    that each column's scenario has: a typo would show an empty column, not a refusal."""
    for t, table in enumerate(f.suite.readings):
        for c, column in enumerate(table.columns):
            at = f"{f.shown}: key suite.readings[{t}].columns[{c}]"
            if column.scenario not in f.scenarios:
                raise ScenarioError(f"{at}.scenario: {column.scenario} is no scenario of this file; allowed: "
                                    f"{', '.join(f.scenarios)}")
            matrix = scenarios[column.scenario].matrix
            rows_at = f"{f.shown}: key suite.readings[{t}].rows"
            wheres = [(f"{at}.where", column.where),
                      *((f"{rows_at}[{r}].where", row.where) for r, row in enumerate(table.rows))]
            for key_at, where in wheres:
                for key, wanted in where.items():
                    if key not in matrix:
                        raise ScenarioError(f"{key_at}: {key} is no matrix key of {column.scenario}; allowed: "
                                            f"{', '.join(matrix) or 'none (it has no matrix)'}")
                    for value in wanted if isinstance(wanted, list) else [wanted]:
                        if not any(same_value(value, v) for v in matrix[key]):
                            raise ScenarioError(f"{key_at}: {key}={value} is not a point of {column.scenario}; "
                                                f"allowed: {', '.join(map(str, matrix[key]))}")


def _check_suites(included: list[SuiteFile], scenarios: dict[str, Scenario], files: dict[str, str]) -> None:
    """Each suite tag is one file's, carried by a scenario of it; its paper-NNN and quick-NNN tags
    are on that file's scenarios only (the reproduction page groups a paper's claims by them)."""
    home: dict[str, str] = {}
    for f in included:
        if f.suite.tag in home:
            raise ScenarioError(f"{f.shown}: key suite.tag: {f.suite.tag} is the suite of {home[f.suite.tag]} "
                                "already; one file per suite")
        home[f.suite.tag] = f.shown
        try:
            check_suite_tags(f.suite, {name: scenarios[name].tags for name in f.scenarios})
        except ValueError as error:
            raise ScenarioError(f"{f.shown}: key {error}") from None
        _check_readings(f, scenarios)
    for name, scenario in scenarios.items():
        for tag in scenario.tags:
            owner = suite_tag_of(tag)
            if owner in home and files[name] != home[owner]:
                raise ScenarioError(f"{files[name]}: scenario {name}: key tags: {tag} is the suite of {home[owner]}; "
                                    "write the scenario there")
