"""The run record: meta.json as one typed model, the contract between measuring and analysing.

The run writes it (host/rundir.py) and the report reads it (analysis/load.py), both through RunRecord;
docs/run-directory.md describes each field. When read, any field may be absent or null: a run
that stopped early, or one recorded before a field existed, still reads; a field that is there
must have its type. Keys a model does not declare are kept when read (a record from newer or older
code) and refused when written: everything a run records has its typed home here.

`schema_version` names the format. A record without one is version 1, the format this code
writes; a version this code does not know is refused rather than misread.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any, get_args

from pydantic import BaseModel, ConfigDict, PlainValidator, StrictBool, StrictInt, StrictStr, ValidationError

from ..base.errors import BadInput

SCHEMA_VERSION = 1  # what this code writes
READABLE_VERSIONS = (1,)


def _shown(value: Any) -> str:
    if isinstance(value, (str, int, float, bool)) or value is None:
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."
    return "a list" if isinstance(value, list) else "an object" if isinstance(value, dict) else type(value).__name__


def _finite_number(value: Any) -> int | float:
    # JSON's number as written: an int stays an int (10 Mbit/s, not 10.0); true/false and NaN are no numbers
    finite = not isinstance(value, float) or math.isfinite(value)  # (isfinite overflows on a huge int)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not finite:
        raise ValueError(f"must be a finite number, not {_shown(value)}")
    return value


def _scalar(value: Any) -> bool | int | float | str | None:
    if value is None or isinstance(value, (bool, int, str)) or isinstance(value, float) and math.isfinite(value):
        return value
    raise ValueError(f"must be a number, text, true/false or null, not {_shown(value)}")


Number = Annotated[int | float, PlainValidator(_finite_number)]
Scalar = Annotated[bool | int | float | str | None, PlainValidator(_scalar)]
Text = StrictStr
Int = StrictInt
Bool = StrictBool


class Section(BaseModel):
    """A part of the record. Every field defaults to None: absent in the file."""

    model_config = ConfigDict(extra="allow")

    def given(self, name: str, default: Any) -> Any:
        """A field as meta.json gave it (a null stays None); `default` where it has no such key."""
        return getattr(self, name) if name in self.model_fields_set else default


class Setting:
    """Marks a link field the scenario sets, which the report shows for every run."""


SETTING = Setting()


class RateStep(Section):
    at_s: Number | None = None
    rate_mbps: Number | None = None


class Outage(Section):
    at_s: Number | None = None
    duration_s: Number | None = None  # nothing delivered from at_s for this long


class AppliedRateStep(RateStep):
    applied_s: Number | None = None  # when tc had made the change, after time zero


class AppliedOutage(Outage):
    started_s: Number | None = None
    ended_s: Number | None = None  # null when the run stopped first


class Link(Section):
    """The bottleneck as planned (plan.LinkRun) and how it is built."""

    rate_mbps: Annotated[Number | None, SETTING] = None
    rtt_ms: Annotated[Number | None, SETTING] = None
    bdp_rtt_ms: Number | None = None  # the RTT the BDP is computed for
    bdp_bytes: Number | None = None
    buffer_bytes: Number | None = None
    buffer_bdp: Annotated[Number | None, SETTING] = None
    loss_pct: Annotated[Number | None, SETTING] = None
    mtu: Int | None = None
    burst_bytes: Int | None = None  # the shaper's bucket, in records from before the netem shaper
    buffer_pkts: Int | None = None
    queue_limit_pkts: Int | None = None
    netem_limit_pkts: Int | None = None
    shaper: Text | None = None
    delay: Text | None = None
    aqm: Text | None = None
    aqm_params: dict[str, Scalar] | None = None
    ecn: Bool | None = None
    rate_schedule: list[RateStep] | None = None
    outages: list[Outage] | None = None


# The link's numbers (finite; text such as "10" is read as a number by the report) and the ones a
# scenario sets: the one list of link fields the readers of a record use.
LINK_NUMBERS: tuple[str, ...] = tuple(name for name, field in Link.model_fields.items()
                                      if Number in get_args(field.annotation))
LINK_SETTINGS: tuple[str, ...] = tuple(name for name, field in Link.model_fields.items() if SETTING in field.metadata)


class Flow(Section):
    flow: Int | None = None  # 0-based, in scenario order
    cc: Text | None = None
    rtt_ms: Number | None = None
    start_s: Number | None = None
    duration_s: Number | None = None
    sender: Text | None = None
    receiver: Text | None = None
    sender_ip: Text | None = None
    receiver_ip: Text | None = None
    server_port: Int | None = None
    params: dict[str, Int] | None = None  # the module's parameters for this flow
    launched_s: Number | None = None  # when its iperf3 client started, after time zero
    exit_code: Int | None = None


class Kernel(Section):
    release: Text | None = None
    uname: Text | None = None


class EngineKernel(Section):
    image: Text | None = None  # qemu: the stock kernel booted
    source: Text | None = None  # uml: the kernel source package it was built from
    release: Text | None = None
    inputs_sha256: Text | None = None
    config_fragment_sha256: Text | None = None  # uml builds that hashed the config fragment alone
    patches: list[Text] | None = None
    binary: Text | None = None


class Engine(Section):
    """What ran the run (cctest/emulation/engines.py): native, qemu or uml, and on what kernel build."""

    name: Text | None = None
    error: Text | None = None  # the host's record could not be read
    kernel: EngineKernel | None = None
    clock: Text | None = None
    icount_shift: Int | None = None
    time_travel: Text | None = None
    userspace: Text | None = None  # uml 7.2: how guest processes ran, ptrace or seccomp (absent: ptrace)
    host_cpu: Int | None = None
    rng_seed: Int | None = None  # the seed the guest's kernel booted with


class Host(Section):
    cpus: Int | None = None


class Code(Section):
    version: Text | None = None
    git_commit: Text | None = None  # "-dirty" appended when the tree had uncommitted changes


class Sysctl(Section):
    old: Text | None = None
    new: Text | None = None
    scope: Text | None = None


class Module(Section):
    """A congestion-control module the run used (kmod.LoadedModule)."""

    name: Text | None = None
    description: Text | None = None
    params: dict[str, Int] | None = None
    effective_params: dict[str, Text] | None = None  # as the module reports them after loading
    path: Text | None = None
    sha256: Text | None = None
    loaded_by_cctest: Bool | None = None
    fallbacks: Int | None = None  # sockets that ran its allocation-failure fallback


class PlannedQdisc(Section):
    role: Text | None = None
    node: Text | None = None
    tc: list[Text] | None = None


class Times(Section):
    guest_s: Number | None = None
    wall_s: Number | None = None  # host seconds, null when the host's clock could not be read


class Vm(Section):
    """The VM's clock and where its time went (host/vmtime.py); null for a native run."""

    clock: Text | None = None
    icount_shift: Int | None = None
    vcpus: Int | None = None
    kvm: Bool | None = None
    boot: Times | None = None
    phases: dict[str, Times] | None = None
    guest_s: Number | None = None
    wall_s: Number | None = None
    wall_per_guest: Number | None = None


class RunRecord(Section):
    """meta.json: one run, everything needed to interpret and reproduce it."""

    schema_version: Int = SCHEMA_VERSION
    run_id: Text | None = None
    scenario: Text | None = None
    description: Text | None = None
    repetition: Int | None = None
    matrix: dict[str, Any] | None = None  # the matrix point: key -> any JSON value
    status: Text | None = None  # running, ok, failed, interrupted
    error: Text | None = None
    start_time: Text | None = None
    end_time: Text | None = None
    duration_s: Number | None = None
    t0_monotonic_ns: Int | None = None
    link: Link | None = None
    flows: list[Flow] | None = None
    seed: Int | None = None
    kernel: Kernel | None = None
    mode: Text | None = None  # native or vm
    engine: Engine | None = None
    host: Host | None = None
    cctest: Code | None = None
    tools: dict[str, Text] | None = None
    sysctls: dict[str, Sysctl] | None = None
    qdiscs: dict[str, Text] | None = None  # `tc -s qdisc show` per interface, after the flows
    offloads: dict[str, dict[str, Text]] | None = None
    modules: list[Module] | None = None
    capture: dict[str, Scalar] | None = None  # the scenario's capture options
    warnings: list[Text] | None = None
    phase_s: dict[str, Number] | None = None
    vm: Vm | None = None
    topology: Text | None = None  # built, or reused from the previous run
    tracefs: Text | None = None  # mounted for this run
    qdisc_plan: dict[str, PlannedQdisc] | None = None
    flows_started_at: Text | None = None
    rate_schedule_applied: list[AppliedRateStep] | None = None
    outages_applied: list[AppliedOutage] | None = None
    fallback_sockets: Int | None = None

    def dump(self) -> dict:
        """The record as plain data, with exactly the keys it was given."""
        return self.model_dump(exclude_unset=True)

    def to_json(self) -> str:
        """meta.json's text. A key no model declares is a bug in what wrote it: refused."""
        extra = undeclared(self)
        if extra:
            raise TypeError(f"meta.json keys without a field in cctest/model/record.py: {', '.join(extra)}")
        # json's ASCII escapes: the file reads the same under any locale's encoding
        return json.dumps(self.model_dump(mode="json", exclude_unset=True), indent=2)


def undeclared(model: BaseModel, where: str = "") -> list[str]:
    """The keys in `model` and the models inside it that no field declares, as dotted paths."""
    found = [f"{where}{key}" for key in model.model_extra or {}]
    for name in model.model_fields_set & set(type(model).model_fields):
        value = getattr(model, name)
        children = (value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list)
                    else [(None, value)])
        for key, child in children:
            if isinstance(child, BaseModel):
                found += undeclared(child, f"{where}{name}." if key is None else f"{where}{name}.{key}.")
    return found


class RecordError(BadInput):
    """A meta.json this code cannot read: the message names the file."""


def _problem(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    if first["type"] == "value_error":
        return f"{where} {first['ctx']['error']}"
    expected = {"string_type": "text", "int_type": "an integer", "bool_type": "true or false",
                "dict_type": "an object", "model_type": "an object", "list_type": "a list"}
    return f"{where} must be {expected.get(first['type'], first['msg'])}, not {_shown(first['input'])}"


def check_version(data: dict, source: Path | str) -> None:
    """A RecordError naming `source` unless this code reads meta.json's format version."""
    version = data.get("schema_version", 1) if isinstance(data, dict) else None
    if type(version) is not int or version not in READABLE_VERSIONS:
        raise RecordError(f"{source}: schema_version {_shown(version)}, which this cctest does not read "
                          f"(it reads {', '.join(map(str, READABLE_VERSIONS))})")


def read_record(data: dict, source: Path | str) -> RunRecord:
    """meta.json's object as a RunRecord, or a RecordError naming `source` and what is wrong."""
    check_version(data, source)
    try:
        return RunRecord.model_validate(data)
    except ValidationError as e:
        raise RecordError(f"{source}: unreadable ({_problem(e)})") from None


# ---------------------------------------------------------------------------------------------
# The door's steps for readers that must take a meta.json this code would refuse as a whole.


def link_numbers_from_text(data: dict) -> tuple[dict, list[str]]:
    """meta.json's object with link values written as numeric text ("10") read as numbers, and a note
    for each: the step before validation. Text that is no finite number stays, for validation to refuse."""
    link = data.get("link")
    notes: list[str] = []
    if not isinstance(link, dict):
        return data, notes
    link = dict(link)
    for key in LINK_NUMBERS:
        text = link.get(key)
        if not isinstance(text, str):
            continue
        try:
            value = float(text)
        except ValueError:
            continue
        if math.isfinite(value):
            link[key] = int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value
            notes.append(f"meta.json link.{key} is text ({text!r}); read as the number {link[key]}")
    return {**data, "link": link}, notes


def read_parts(data: dict, names: tuple[str, ...], source: Path | str) -> RunRecord:
    """Only the named fields of meta.json's object, typed (numeric link text read as numbers), or a
    RecordError naming `source`: for a reader that must take a run whatever its other fields hold
    (ingest remakes the tables of a run whose matrix the report refuses)."""
    picked, _ = link_numbers_from_text({name: data[name] for name in names if name in data})
    return read_record(picked, source)


def as_interrupted(data: dict) -> RunRecord | None:
    """The record of a run whose process (or VM) died without a word while its status was still
    "running": now interrupted, whatever it measured kept. None for any other run."""
    if data.get("status") != "running":
        return None
    error = data.get("error") or "the run's process ended before finishing"
    return RunRecord.model_validate({**data, "status": "interrupted", "error": error})


def status_as_written(data: dict) -> Any:
    """meta.json's status whatever it holds: finalize names it for a run the report may refuse."""
    return data["status"]


RUN_NAMES = ("scenario", "run_id")  # what names a run outside its directory (an archive's members)


def names_as_written(data: dict) -> dict[str, Any]:
    """The run's scenario and run id as meta.json holds them, whatever their type: the archive checks
    them as names and packs a run whatever else its record holds."""
    return {key: data.get(key) for key in RUN_NAMES}
