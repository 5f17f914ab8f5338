"""Creating a run directory and the environment facts its meta.json records (cctest/model/record.py)."""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import yaml

from .. import __version__
from ..base import atomic
from ..kernel.kmod import REPO_ROOT
from ..model import bottleneck, record
from ..model.guestplan import HostFacts
from ..model.plan import FlowRun, LinkRun, RunSpec
from ..model.wire import MTU_BYTES
from .vmtime import calendar_now, stretch

TOOL_VERSION_COMMANDS = {
    "iperf3": ["iperf3", "--version"],
    "tc": ["tc", "-V"],
    "ss": ["ss", "-V"],
    "bpftrace": ["bpftrace", "--version"],
    "tcpdump": ["tcpdump", "--version"],
    "ping": ["ping", "-V"],
    "ethtool": ["ethtool", "--version"],
}


def new_run_dir(out_root: Path, run: RunSpec) -> Path:
    stamp = datetime.fromtimestamp(calendar_now()).strftime("%Y%m%d-%H%M%S")
    base = out_root / run.scenario.name / f"{stamp}-{run.label}-r{run.repetition}"
    base.parent.mkdir(parents=True, exist_ok=True)
    path, n = base, 1
    while True:
        try:
            path.mkdir()  # atomic: of two runs racing for one name, one gets it, the other the next
            break
        except FileExistsError:
            path = base.with_name(f"{base.name}.{n}")
            n += 1
    (path / "raw").mkdir()
    atomic.write_text(path / "scenario.yaml", scenario_text(run))
    return path


class _InFull(yaml.SafeDumper):
    def ignore_aliases(self, data: object) -> bool:
        return True


def scenario_text(run: RunSpec) -> str:
    """scenario.yaml: the run's resolved scenario with every value written in full, never as a YAML
    alias of another, so that a value the mapping holds twice (a matrix point that sets a mapping,
    an alias in the experiments file) reads the same whether the run was planned in this process
    or read from a guest's plan file, whose JSON shares no values."""
    return yaml.dump(run.resolved, Dumper=_InFull, sort_keys=False)


def now_iso() -> str:
    return datetime.fromtimestamp(calendar_now(), UTC).isoformat(timespec="milliseconds")


# A guest's answers, handed in by its host through the plan file (guestplan.HostFacts): a guest runs
# the host's checkout and binaries, which the host asks natively; under emulation `bpftrace
# --version` alone took a second of a guest's first run.
_handed: HostFacts | None = None


def take_host_facts(facts: HostFacts) -> None:
    """In a guest: record the host's commit and tool versions instead of asking for them."""
    global _handed
    _handed = facts


def host_facts() -> HostFacts:
    """What this host hands its guests to record (guestplan.HostFacts)."""
    return HostFacts(commit=git_commit(), tools=tool_versions())


def tool_versions() -> dict[str, str]:
    """Each tool's version line ("missing" where it cannot be run here)."""
    return dict(_handed.tools) if _handed is not None else _asked_tool_versions()


@functools.cache  # the same for every run of a session; each probe is a process start
def _asked_tool_versions() -> dict[str, str]:
    versions = {}
    for name, cmd in TOOL_VERSION_COMMANDS.items():
        try:
            result = subprocess.run(cmd, capture_output=True, text=True, timeout=stretch(10))
            text = (result.stdout or result.stderr).strip().splitlines()
            versions[name] = text[0] if text else "unknown"
        except (OSError, subprocess.TimeoutExpired):
            versions[name] = "missing"
    try:
        from mininet.net import VERSION

        versions["mininet"] = VERSION
    except ImportError:
        versions["mininet"] = "missing"
    return versions


def git_commit() -> str | None:
    """The checkout's commit ("-dirty" with uncommitted changes), or the one CCTEST_GIT_COMMIT names
    (a copy of the code without its .git, e.g. the project's image)."""
    if _handed is not None:
        return _handed.commit
    return os.environ.get("CCTEST_GIT_COMMIT") or _asked_git_commit()


@functools.cache
def _asked_git_commit() -> str | None:
    try:
        result = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=stretch(10))
    except OSError:
        return None
    if result.returncode != 0:
        return None
    dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, timeout=stretch(30)).stdout.strip()
    return result.stdout.strip() + ("-dirty" if dirty else "")


def engine_meta(mode: str) -> dict:
    """Which engine ran the run and on what kernel build: the host's record, handed to the guest
    (cctest/emulation/engines.py); a native run is its own engine."""
    text = os.environ.get("CCTEST_ENGINE_META")
    if mode == "vm" and text:
        try:
            return record.Engine.model_validate_json(text).model_dump(exclude_unset=True)
        except ValueError:  # not JSON, or not an engine's record
            return {"name": "unknown", "error": f"unreadable CCTEST_ENGINE_META: {text[:80]}"}
    return {"name": "qemu" if mode == "vm" else "native"}


ACK_PATH_DELAY = "netem on the ACK path (switch port towards each sender)"


def link_record(link: LinkRun) -> record.Link:
    """The planned link as meta.json records it, with how it is built."""
    return record.Link(
        **{name: getattr(link, name) for name in record.LINK_NUMBERS}, mtu=MTU_BYTES,
        buffer_pkts=link.buffer_pkts, queue_limit_pkts=link.queue_limit_pkts, netem_limit_pkts=link.netem_limit_pkts,
        shaper=bottleneck.describe(link), delay=ACK_PATH_DELAY, aqm=link.aqm, aqm_params=link.aqm_params,
        ecn=link.ecn, rate_schedule=[record.RateStep(**step) for step in bottleneck.planned_steps(link)],
        outages=[record.Outage(**outage) for outage in bottleneck.planned_outages(link)])


def flow_record(flow: FlowRun) -> record.Flow:
    return record.Flow(flow=flow.index, cc=flow.cc, rtt_ms=flow.rtt_ms, start_s=flow.start_s,
                       duration_s=flow.duration_s, sender=flow.sender, receiver=flow.receiver,
                       sender_ip=flow.sender_ip, receiver_ip=flow.receiver_ip, server_port=flow.server_port,
                       params=flow.params, launched_s=None, exit_code=None)


def base_record(run_dir: Path, run: RunSpec, mode: str) -> record.RunRecord:
    """The record of a run about to start, which the runner fills in."""
    uname = platform.uname()
    return record.RunRecord(
        schema_version=record.SCHEMA_VERSION, run_id=run_dir.name, scenario=run.scenario.name,
        description=run.scenario.description, repetition=run.repetition, matrix=run.matrix,
        status="running", error=None, start_time=now_iso(), end_time=None, duration_s=run.scenario.duration_s,
        t0_monotonic_ns=None, link=link_record(run.link), flows=[flow_record(f) for f in run.flows],
        seed=run.seed, kernel=record.Kernel(release=uname.release, uname=" ".join(uname)), mode=mode,
        engine=record.Engine.model_validate(engine_meta(mode)), host=record.Host(cpus=os.cpu_count()),
        cctest=record.Code(version=__version__, git_commit=git_commit()), tools=dict(tool_versions()),
        sysctls={}, qdiscs={}, offloads={}, modules=[], capture=run.scenario.capture.model_dump(), warnings=[],
    )


def write_meta(run_dir: Path, run: record.RunRecord) -> None:
    """meta.json from the record, checked anew (what the runner set is not validated when set): a
    value of the wrong type, or a key without a field, is a bug here."""
    atomic.write_text(run_dir / "meta.json", record.RunRecord.model_validate(run.dump()).to_json())
