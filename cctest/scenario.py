"""experiments.yaml -> validated scenario models.

The file has `defaults:` (merged under every scenario) and `scenarios:`. A scenario is plain data;
plan.py turns it into concrete runs. Every validation failure becomes one ScenarioError line that
names the file, the scenario, the key and what is allowed.
"""

from __future__ import annotations

import copy
import difflib
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (BaseModel, ConfigDict, Field, StrictInt, StringConstraints, ValidationError,
                      ValidationInfo, field_validator, model_validator)

from .claims import ClaimError
from .errors import BadInput
from .claims import parse as parse_claim
from .projectccs import project_ccs

# Congestion controls the kernel ships (built in or as tcp_<name>.ko) and the ones this project
# builds from modules/. Anything else is rejected before a run starts.
KERNEL_CCS = ("cubic", "reno", "bbr", "htcp", "vegas", "westwood", "dctcp", "bic", "illinois")
PROJECT_CCS = project_ccs()  # from modules/*/Kbuild
KNOWN_CCS = KERNEL_CCS + PROJECT_CCS

MAX_FLOWS = 253  # flow i's hosts are 10.0.1.(i+1) and 10.0.2.(i+1)
MAX_BUFFER_BYTES = 1 << 30  # 1 GiB: far beyond any emulated path, and netem's limit stays in range
MAX_PARAM = 2**32 - 1  # module parameters are uint
MAX_FILE_BYTES = 1 << 20
MAX_NESTING = 32  # an experiments file is a few levels deep; deeper is a mistake or an attack
ETHERNET_HEADER_BYTES = 14  # what the shaper counts on top of the IP packet
MTU_BYTES = 1500  # the interfaces' default, which the topology keeps
ETHERNET_FRAME_BYTES = MTU_BYTES + ETHERNET_HEADER_BYTES  # one MTU-sized packet on the wire, the smallest buffer


class ScenarioError(BadInput):
    """A one-line, user-facing description of what is wrong with experiments.yaml."""


class Strict(BaseModel):
    # allow_inf_nan: YAML's .inf and .nan are numbers to PyYAML, never a rate, delay or buffer.
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


ModuleParam = Annotated[StrictInt, Field(ge=0, le=MAX_PARAM)]


MIN_RATE_MBPS, MAX_RATE_MBPS = 0.01, 100_000
AQMS = ("fifo", "fq_codel", "codel", "pie", "red")


class RateStep(Strict):
    """From `at_s` seconds after time zero on, the bottleneck runs at `rate_mbps`."""

    at_s: float = Field(gt=0, le=3600)
    rate_mbps: float = Field(ge=MIN_RATE_MBPS, le=MAX_RATE_MBPS)


class Outage(Strict):
    """From `at_s` seconds after time zero, for `duration_s`, the link delivers nothing: every packet
    leaving the bottleneck towards a receiver is dropped (a route failure, a radio fade)."""

    at_s: float = Field(gt=0, le=3600)
    duration_s: float = Field(gt=0, le=3600)


class Link(Strict):
    # netem's rate is whole bit/s: below 10 kbit/s the rounding is the rate, and 0 means no shaping.
    rate_mbps: float = Field(ge=MIN_RATE_MBPS, le=MAX_RATE_MBPS)
    rtt_ms: float = Field(gt=0, le=10_000)
    buffer_bdp: float | None = Field(default=None, gt=0, le=1000)
    buffer_bytes: int | None = Field(default=None, gt=0, le=MAX_BUFFER_BYTES)
    loss_pct: float = Field(default=0.0, ge=0, lt=100)
    bdp_rtt_ms: float | None = Field(default=None, gt=0, le=10_000)
    aqm: Literal[AQMS] = "fifo"  # the bottleneck's queue discipline (cctest/net/bottleneck.py)
    aqm_params: dict[str, Any] = Field(default_factory=dict)  # checked against the aqm's own model
    ecn: bool = False  # senders and receivers negotiate ECN; the AQM marks instead of dropping
    rate_schedule: list[RateStep] = Field(default_factory=list)
    outages: list[Outage] = Field(default_factory=list)

    @model_validator(mode="after")
    def one_buffer_size(self) -> "Link":
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
    def composable_bottleneck(self) -> "Link":
        # Imported here: bottleneck.py builds on these models (the AQM parameter models live there).
        from .net.bottleneck import aqm_settings

        aqm_settings(self)  # raises "aqm_params.<key>: ..." naming what is allowed
        if self.ecn and self.aqm == "fifo":
            raise ValueError("ecn: a fifo only drops; set aqm to one of "
                             f"{', '.join(a for a in AQMS if a != 'fifo')} to mark packets")
        times = [step.at_s for step in self.rate_schedule]
        if times != sorted(set(times)):
            raise ValueError(f"rate_schedule: at_s must increase from step to step, got {times}")
        for i, (before, after) in enumerate(zip(self.outages, self.outages[1:]), start=1):
            if after.at_s < before.at_s + before.duration_s:
                raise ValueError(f"outages.{i}.at_s: {after.at_s:g} s is before the previous outage ends "
                                 f"({before.at_s + before.duration_s:g} s); list outages in time order, apart")
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
        return int(round(self.buffer_bdp * self.bdp_bytes))


class Flow(Strict):
    cc: str
    count: int = Field(default=1, ge=1, le=32)
    rtt_ms: float | None = Field(default=None, gt=0, le=10_000)
    start_s: float = Field(default=0.0, ge=0)
    duration_s: float | None = Field(default=None, gt=0)
    params: dict[str, ModuleParam] = Field(default_factory=dict)

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
    def params_only_for_project_modules(self) -> "Flow":
        if self.params and self.cc not in PROJECT_CCS:
            raise ValueError(f"params: {self.cc} is the kernel's own congestion control and takes none; "
                             f"params are for this project's modules ({', '.join(PROJECT_CCS)})")
        return self


class Capture(Strict):
    ss_interval_ms: int = Field(default=100, ge=10, le=10_000)
    qdisc_interval_ms: int = Field(default=100, ge=10, le=10_000)
    tcp_probe: bool = True
    pcap: bool = False


class Expect(Strict):
    """One claim a scenario's results must bear out (cctest/claims.py has the language)."""

    claim: str
    where: dict[str, Any] = Field(default_factory=dict)  # matrix key -> value or list of values
    source: str = ""  # where the number comes from, e.g. "000 Fig. 13a"
    note: str = ""  # how our setting or implementation differs from the source's

    @field_validator("claim")
    @classmethod
    def parses(cls, text: str) -> str:
        try:
            parse_claim(text)
        except ClaimError as error:
            raise ValueError(f"{text!r}: {error}") from None
        return text


class Scenario(Strict):
    name: str = ""
    description: str = ""
    tags: list[Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_.-]*$")]] = Field(default_factory=list)
    link: Link
    flows: list[Flow] = Field(min_length=1)
    duration_s: float = Field(gt=0, le=3600)
    repetitions: int = Field(default=1, ge=1, le=1000)
    capture: Capture = Field(default_factory=Capture)
    seed: int = Field(default=1, ge=0)
    matrix: dict[str, list[Any]] = Field(default_factory=dict)
    expect: list[Expect] = Field(default_factory=list)  # after flows and matrix: its check reads them

    @model_validator(mode="after")
    def flows_fit(self) -> "Scenario":
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
    def link_schedule_within_run(self) -> "Scenario":
        for i, step in enumerate(self.link.rate_schedule):
            if step.at_s >= self.duration_s:
                raise ValueError(f"link.rate_schedule.{i}.at_s: {step.at_s:g} s is not before the scenario's end "
                                 f"(duration_s = {self.duration_s:g} s)")
        for i, outage in enumerate(self.link.outages):
            if outage.at_s + outage.duration_s > self.duration_s:
                raise ValueError(f"link.outages.{i}: it ends at {outage.at_s + outage.duration_s:g} s, after the "
                                 f"scenario's end (duration_s = {self.duration_s:g} s)")
        return self

    @field_validator("expect")
    @classmethod
    def expectations_name_what_runs(cls, expect: list[Expect], info: ValidationInfo) -> list[Expect]:
        """Claims' `where` keys and values must be the matrix's, their ccs ones that run."""
        matrix = info.data.get("matrix") or {}
        ccs = {flow.cc for flow in info.data.get("flows") or []}
        for key, values in matrix.items():
            if re.fullmatch(r"flows\.\d+\.cc", key):
                ccs.update(str(v) for v in values)
        for i, entry in enumerate(expect):
            for key, wanted in entry.where.items():
                if key not in matrix:
                    allowed = ", ".join(matrix) or "none (no matrix)"
                    raise ValueError(f"claim {i}: where {key!r} is not a matrix key; allowed: {allowed}")
                for value in wanted if isinstance(wanted, list) else [wanted]:
                    if value not in matrix[key]:
                        raise ValueError(f"claim {i}: where {key}: {value!r} is not among the matrix's values "
                                         f"{matrix[key]}")
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
    """All scenarios of one experiments.yaml, validated and with defaults applied."""

    source: str
    scenarios: dict[str, Scenario]
    raw: dict[str, dict]  # merged, unvalidated mappings: matrix expansion edits these

    def get(self, name: str) -> Scenario:
        if name not in self.scenarios:
            allowed = ", ".join(self.scenarios) or "(none)"
            close = difflib.get_close_matches(name, list(self.scenarios), n=3)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise ScenarioError(f"{self.source}: no scenario named {name!r}; defined: {allowed}{hint}")
        return self.scenarios[name]


FAST_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when present


class _StrictLoader(FAST_SAFE_LOADER):
    """SafeLoader that refuses what YAML would silently accept: a key given twice (the last would
    win) and keys that are not text (YAML 1.1 reads `yes:`, `on:`, `no:` as booleans)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *defaults`: the keys given here override the merged ones, as meant
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if isinstance(key, bool) or key is None:
                raise ScenarioError(
                    f"line {line}: key {key_node.value!r} reads as {key!r} in YAML, not as text; quote it "
                    f"('{key_node.value}':)")
            if not isinstance(key, (str, int, float)):
                raise ScenarioError(f"line {line}: a key must be text, got a {type(key).__name__}")
            if key in seen:
                raise ScenarioError(f"line {line}: key {key!r} given twice (first on line {seen[key]}); "
                                    "keep one")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node):
        try:
            return super().construct_yaml_int(node)
        except ValueError:  # more digits than Python converts
            raise ScenarioError(f"line {node.start_mark.line + 1}: a number of {len(node.value)} digits; "
                                "not a value any key takes") from None


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)


def _nesting_problem(node, depth: int = 0, path: tuple = ()) -> str | None:
    """Depth beyond MAX_NESTING, or a cycle (a recursive YAML anchor), as a message; else None."""
    if not isinstance(node, (dict, list)):
        return None
    if depth > MAX_NESTING:
        return f"nested more than {MAX_NESTING} levels deep"
    if any(node is outer for outer in path):
        return "a recursive YAML anchor (a value contains itself)"
    children = node.values() if isinstance(node, dict) else node
    for child in children:
        problem = _nesting_problem(child, depth + 1, path + (node,))
        if problem:
            return problem
    return None


def _check_depth(text: str) -> None:
    """Refuse deep nesting from the parser's event stream, before the (recursive) composer would
    take seconds to reach Python's recursion limit."""
    depth = 0
    # libyaml's scanner when present: the pure-Python one takes time quadratic in flow nesting.
    for event in yaml.parse(text, Loader=FAST_SAFE_LOADER):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_NESTING:
                raise ScenarioError(f"line {event.start_mark.line + 1}: nested more than {MAX_NESTING} levels deep; "
                                    "not an experiments file")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


def parse_experiments(text: str, source: str) -> Experiments:
    try:
        _check_depth(text)
        document = yaml.load(text, Loader=_StrictLoader) or {}
    except ScenarioError as error:
        raise ScenarioError(f"{source}: {error}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ScenarioError(f"{source}:{where}: not valid YAML ({getattr(error, 'problem', error)})") from None
    except ValueError as error:  # e.g. an integer of more than 4300 digits
        raise ScenarioError(f"{source}: a value cannot be read ({error})") from None
    except RecursionError:
        raise ScenarioError(f"{source}: nested more than {MAX_NESTING} levels deep; not an experiments file") from None
    problem = _nesting_problem(document)
    if problem:
        raise ScenarioError(f"{source}: {problem}; not an experiments file")
    if not isinstance(document, dict):
        raise ScenarioError(f"{source}: top level must be a mapping with keys defaults, scenarios")
    unknown = set(document) - {"defaults", "scenarios"}
    if unknown:
        raise ScenarioError(f"{source}: unknown top-level key {sorted(unknown)[0]}; allowed: defaults, scenarios")
    defaults = document.get("defaults") or {}
    scenarios = document.get("scenarios") or {}
    if not isinstance(defaults, dict) or not isinstance(scenarios, dict):
        raise ScenarioError(f"{source}: defaults and scenarios must be mappings")
    if not scenarios:
        raise ScenarioError(f"{source}: no scenarios defined under scenarios:")
    merged: dict[str, dict] = {}
    validated: dict[str, Scenario] = {}
    for name, body in scenarios.items():
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", str(name)):
            raise ScenarioError(f"{source}: scenario {name}: name must be letters, digits and _.+-")
        if not isinstance(body, dict):
            raise ScenarioError(f"{source}: scenario {name}: must be a mapping of keys")
        merged[name] = _deep_merge(defaults, body)
        validated[name] = validate_scenario(merged[name], name, source)
    return Experiments(source=source, scenarios=validated, raw=merged)


def load_experiments(path: str | Path) -> Experiments:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        hint = "; name the experiments file with -f FILE" if not path.exists() else ""
        raise ScenarioError(f"{path}: cannot read ({error.strerror}){hint}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ScenarioError(f"{path}: {len(data)} bytes; an experiments file is at most {MAX_FILE_BYTES} "
                            "(matrices are lists of values, not generated data)")
    try:
        text = data.decode("utf-8-sig")  # UTF-8 only (a UTF-8 byte-order mark is fine)
    except UnicodeDecodeError as error:
        raise ScenarioError(f"{path}: not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start}); "
                            "save it as UTF-8") from None
    return parse_experiments(text, str(path))

