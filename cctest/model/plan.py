"""Scenarios -> concrete runs: matrix expansion, repetitions, per-flow schedule. Pure code.

A matrix key is a dotted path into the scenario (`link.buffer_bdp`, `flows.1.cc`, `duration_s`;
`flows.*.cc` sets it on every flow);
a bare link field (`buffer_bdp`, `rate_mbps`, `rtt_ms`, `loss_pct`, ...) means `link.<field>`.
The cartesian product of all matrix lists gives one variant per combination; each variant runs
`repetitions` times.
"""

from __future__ import annotations

import copy
import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .aqm import Queue, aqm_settings
from .scenario import Experiments, Link, Scenario, ScenarioError, same_value, validate_scenario
from .wire import ETHERNET_FRAME_BYTES

LINK_FIELDS = tuple(Link.model_fields)


@dataclass(frozen=True)
class FlowRun:
    index: int
    cc: str
    rtt_ms: float
    start_s: float
    duration_s: float
    params: dict[str, int]

    @property
    def sender(self) -> str:
        return f"ccsnd{self.index}"

    @property
    def receiver(self) -> str:
        return f"ccrcv{self.index}"

    @property
    def sender_ip(self) -> str:
        return f"10.0.1.{self.index + 1}"

    @property
    def receiver_ip(self) -> str:
        return f"10.0.2.{self.index + 1}"

    @property
    def server_port(self) -> int:
        return 5201 + self.index


@dataclass(frozen=True)
class LinkRun:
    rate_mbps: float
    rtt_ms: float
    bdp_rtt_ms: float
    bdp_bytes: int
    buffer_bytes: int
    buffer_bdp: float
    loss_pct: float
    netem_limit_pkts: int
    aqm: str = "fifo"
    aqm_params: dict = field(default_factory=dict)  # every parameter, defaults filled in
    ecn: bool = False
    rate_schedule: tuple[tuple[float, float], ...] = ()  # (at_s, rate_mbps) steps
    outages: tuple[tuple[float, float], ...] = ()  # (at_s, duration_s): nothing delivered

    @property
    def rate_bps(self) -> int:
        return int(self.rate_mbps * 1e6)

    @property
    def buffer_pkts(self) -> int:
        return self.queue.buffer_pkts

    @property
    def queue_limit_pkts(self) -> int:
        """The bottleneck netem's limit: the buffer plus the frame being serialised."""
        return self.buffer_pkts + 1

    @property
    def queue(self) -> Queue:
        return Queue(self.buffer_bytes, self.rate_mbps, self.ecn)


@dataclass(frozen=True)
class RunSpec:
    scenario: Scenario
    matrix: dict[str, Any]
    repetition: int
    link: LinkRun
    flows: tuple[FlowRun, ...]
    seed: int
    resolved: dict = field(repr=False)

    @property
    def label(self) -> str:
        return run_label(self.matrix)

    @property
    def modules(self) -> dict[str, dict[str, int]]:
        """Congestion controls this run needs, with their module parameters."""
        needed: dict[str, dict[str, int]] = {}
        for flow in self.flows:
            needed.setdefault(flow.cc, flow.params)
        return needed

    def params_key(self, cc: str) -> str:
        """Where the scenario sets `cc`'s module parameters, for a one-line error: scenario, flow key."""
        index = next((i for i, flow in enumerate(self.scenario.flows) if flow.cc == cc), 0)
        point = f" ({', '.join(f'{k}={v}' for k, v in self.matrix.items())})" if self.matrix else ""
        return f"scenario {self.scenario.name}{point}: key flows.{index}.params"


def run_label(matrix: dict[str, Any]) -> str:
    parts = [f"{_slug(key)}-{_slug(value)}" for key, value in matrix.items()]
    return "_".join(parts) if parts else "base"


def _slug(value: Any) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "", str(value).replace("link.", "").replace("flows.", "f"))


def link_run(link: Link, max_flow_rtt_ms: float) -> LinkRun:
    bdp = link.bdp_bytes
    buffer = link.buffer_size_bytes
    # netem must hold everything in flight on its path (BDP at the longest RTT + the bottleneck
    # buffer) with room to spare, or netem itself becomes a second bottleneck buffer.
    in_flight = int(link.rate_mbps * 1e6 / 8 * max_flow_rtt_ms / 1e3) + buffer
    netem_limit = max(1000, 2 * in_flight // ETHERNET_FRAME_BYTES + 100)
    return LinkRun(
        rate_mbps=link.rate_mbps,
        rtt_ms=link.rtt_ms,
        bdp_rtt_ms=link.bdp_rtt_ms or link.rtt_ms,
        bdp_bytes=bdp,
        buffer_bytes=buffer,
        buffer_bdp=round(buffer / bdp, 4) if bdp else 0.0,
        loss_pct=link.loss_pct,
        netem_limit_pkts=netem_limit,
        aqm=link.aqm,
        aqm_params=aqm_settings(link.aqm, link.aqm_params, link.queue).model_dump(),
        ecn=link.ecn,
        rate_schedule=tuple((step.at_s, step.rate_mbps) for step in link.rate_schedule),
        outages=tuple((outage.at_s, outage.duration_s) for outage in link.outages),
    )


def flow_runs(scenario: Scenario) -> tuple[FlowRun, ...]:
    runs: list[FlowRun] = []
    for flow in scenario.flows:
        for _ in range(flow.count):
            runs.append(
                FlowRun(
                    index=len(runs),
                    cc=flow.cc,
                    rtt_ms=flow.rtt_ms or scenario.link.rtt_ms,
                    start_s=flow.start_s,
                    duration_s=flow.duration_s or scenario.duration_s - flow.start_s,
                    params=dict(flow.params),
                )
            )
    return tuple(runs)


def _set_path(mapping: dict, key: str, value: Any, source: str, name: str) -> None:
    if key.startswith("flows.*."):
        # Every flow at once (`flows.*.cc: [bbr, bbr_acw]`: all flows run one cc per variant).
        for i in range(len(mapping.get("flows") or [])):
            _set_path(mapping, f"flows.{i}.{key[len('flows.*.'):]}", value, source, name)
        return
    path = key.split(".")
    if len(path) == 1 and path[0] in LINK_FIELDS:
        path = ["link", path[0]]
    node: Any = mapping
    for depth, part in enumerate(path[:-1]):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node and isinstance(node[part], (dict, list)):
            node = node[part]
        else:
            where = ".".join(path[: depth + 1])
            raise ScenarioError(
                f"{source}: scenario {name}: key matrix.{key}: {where} does not exist; use a link "
                f"field ({', '.join(LINK_FIELDS)}), a dotted path like link.buffer_bdp or flows.0.cc, "
                "or a top-level key like duration_s"
            )
    leaf = path[-1]
    if isinstance(node, dict):
        link: object = mapping.get("link")
        if node is link:
            # Switching between the two buffer notations replaces the other one.
            other = {"buffer_bdp": "buffer_bytes", "buffer_bytes": "buffer_bdp"}.get(leaf)
            if other:
                node.pop(other, None)
        node[leaf] = value
    elif isinstance(node, list) and leaf.isdigit() and int(leaf) < len(node):
        node[int(leaf)] = value
    else:
        raise ScenarioError(f"{source}: scenario {name}: key matrix.{key}: cannot set {leaf} there")


from ..base.limits import MAX_RUNS  # noqa: E402 (kept in a module `cctest --help` can import cheaply)

MAX_LABEL_CHARS = 200  # a run directory is <stamp>-<label>-r<n>: file names stop at 255 bytes


def _canonical(key: str) -> tuple[str, ...]:
    path = tuple(key.split("."))
    return ("link", path[0]) if len(path) == 1 and path[0] in LINK_FIELDS else path


def _check_matrix_keys(matrix: dict, where: str) -> None:
    """Two keys that set the same thing (`rate_mbps` and `link.rate_mbps`, `flows.0` and
    `flows.0.cc`, the two buffer notations) would make meta.json disagree with what ran."""
    seen: dict[tuple[str, ...], str] = {}

    def same(a: str, b: str) -> bool:
        return a == b or (a == "*" and b.isdigit()) or (b == "*" and a.isdigit())

    for key in matrix:
        path = _canonical(key)
        if path[:1] == ("link",) and path[1:] in (("buffer_bytes",), ("buffer_bdp",)):
            path = ("link", "buffer")
        for other_path, other in seen.items():
            shorter = min(len(path), len(other_path))
            if all(same(a, b) for a, b in zip(path[:shorter], other_path[:shorter], strict=True)):
                raise ScenarioError(f"{where}: key matrix.{key}: sets what matrix.{other} sets; keep one of them")
        seen[path] = key


def run_count(experiments: Experiments, name: str, repetitions: int | None = None) -> int:
    """How many runs `expand` would make, without making them."""
    base = experiments.get(name)
    reps = repetitions if repetitions is not None else base.repetitions
    return math.prod(len(values) for values in base.matrix.values()) * reps


# Values `expand` builds in all (each variant copies and validates its scenario, rate steps and
# outages included) without --force: a 9 900-step schedule x 100 variants took 8.5 s and 0.9 GB
# to list; a 999-step one x 101 variants (303 000 values) 4.4 s and 200 MB.
MAX_EXPANDED_VALUES = 500_000


def _values(node: Any) -> int:
    if isinstance(node, dict):
        return 1 + sum(_values(v) for v in node.values())
    if isinstance(node, list):
        return 1 + sum(_values(v) for v in node)
    return 1


def expansion_size(experiments: Experiments, name: str) -> int:
    """Values `expand` builds for one scenario (variants x the scenario's values), without building them."""
    variants = math.prod(len(values) for values in experiments.get(name).matrix.values())
    return variants * _values(experiments.raw[name])


def expand(experiments: Experiments, name: str, repetitions: int | None = None, force: bool = False,
           first_repetition: int = 0) -> list[RunSpec]:
    """All concrete runs of one scenario, in order: variants (matrix product) x repetitions, numbered
    (and seeded) from `first_repetition`, so that a set already run can be extended."""
    base = experiments.get(name)
    raw = experiments.raw[name]
    matrix = base.matrix
    where = f"{experiments.file_of(name)}: scenario {name}"
    for key, values in matrix.items():
        if not values:
            raise ScenarioError(f"{where}: key matrix.{key}: empty list")
    _check_matrix_keys(matrix, where)
    keys = list(matrix)
    reps = repetitions if repetitions is not None else base.repetitions
    if reps < 1:
        raise ScenarioError(f"{where}: repetitions must be >= 1")
    count = run_count(experiments, name, repetitions)
    if count > MAX_RUNS and not force:
        raise ScenarioError(f"{where}: key matrix: {count} runs (variants x repetitions); at most {MAX_RUNS} "
                            "without --force")
    size = expansion_size(experiments, name)
    if size > MAX_EXPANDED_VALUES and not force:
        raise ScenarioError(f"{where}: key matrix: its variants hold {size} values in all (each variant's rate "
                            f"steps, outages and flows); at most {MAX_EXPANDED_VALUES} without --force")
    runs: list[RunSpec] = []
    labels: dict[str, dict] = {}
    for combination in itertools.product(*(matrix[key] for key in keys)) if keys else [()]:
        variant_raw = copy.deepcopy(raw)
        variant_raw.pop("matrix", None)
        # Claims are about the whole matrix: checked on the scenario, recorded with each run.
        expect = variant_raw.pop("expect", None)
        chosen = dict(zip(keys, combination, strict=True))
        label = run_label(chosen)
        if label in labels:
            raise ScenarioError(f"{where}: key matrix: the variants {labels[label]} and {chosen} get one label "
                                f"{label!r} (labels keep letters, digits and '.'); make the values differ there")
        if len(label) > MAX_LABEL_CHARS:
            raise ScenarioError(f"{where}: key matrix: the label of {chosen} is {len(label)} characters; at most "
                                f"{MAX_LABEL_CHARS} (it names the run directory): use shorter keys or values")
        labels[label] = chosen
        for key, value in chosen.items():
            _set_path(variant_raw, key, value, experiments.file_of(name), name)
        scenario = validate_scenario(variant_raw, name, experiments.file_of(name))
        last_seed = scenario.seed + first_repetition + reps - 1
        if last_seed > MAX_SEED:
            raise ScenarioError(f"{where}: seed {scenario.seed} + repetition {first_repetition + reps - 1} = "
                                f"{last_seed}; a run's seed is at most 2**64 - 1 (the guest's rng-seed is 64 bits): "
                                "lower --first-repetition or the seed")
        flows = flow_runs(scenario)
        link = link_run(scenario.link, max(flow.rtt_ms for flow in flows))
        for repetition in range(first_repetition, first_repetition + reps):
            runs.append(
                RunSpec(
                    scenario=scenario,
                    matrix=chosen,
                    repetition=repetition,
                    link=link,
                    flows=flows,
                    seed=scenario.seed + repetition,
                    resolved={**variant_raw, "name": name, "matrix_point": chosen, "repetition": repetition,
                              **({"expect": expect} if expect else {})},
                )
            )
    return runs


MAX_SEED = 2**64 - 1  # a run's seed: UML's rng-seed= and the guest's generators take 64 bits


def among(value: Any, values: list) -> bool:
    return any(same_value(value, v) for v in values)


def check_point_filter(experiments: Experiments, names: list[str], only: dict[str, list]) -> None:
    """`only` (matrix key -> values kept) must name, for every scenario, one of its matrix keys and
    values that key takes: a filter that keeps nothing by a typo is bad input, not an empty run."""
    for name in dict.fromkeys(names):
        matrix = experiments.get(name).matrix
        where = f"{experiments.file_of(name)}: scenario {name}"
        for key, values in only.items():
            if key not in matrix:
                raise ScenarioError(f"{where}: --only {key}: not a key of its matrix; allowed: "
                                    f"{', '.join(matrix) or 'none (it has no matrix)'}")
            for value in values:
                if not among(value, matrix[key]):
                    raise ScenarioError(f"{where}: --only {key}={value}: not one of its values; allowed: "
                                        f"{', '.join(map(str, matrix[key]))}")


def in_points(spec: RunSpec, only: dict[str, list]) -> bool:
    """Whether a run's matrix point passes the filter: each key one of its values."""
    return all(among(spec.matrix.get(key), values) for key, values in only.items())


# Rough guest seconds a run costs beyond its flows (tracing, warm-up, teardown), and a topology
# build on top (docs/emulation.md): only for balancing runs over VMs, never for results.
RUN_OVERHEAD_S = 15.0
TOPOLOGY_BUILD_S = 20.0


def split_for_vms(specs: list[RunSpec], vms: int, price: Callable[[RunSpec], float] | None = None) -> list[list[int]]:
    """Indices of `specs` for each of up to `vms` VMs: about equal guest time each, longest runs
    placed first, and within a VM runs with the same hosts and links (the same number of flows)
    kept next to each other so that they share one topology. Every run in exactly one VM; no VM
    without runs. Pure and deterministic: the host and each guest compute the same split.

    `price`: what a run costs in the balance instead of its guest seconds, set-up included (then no
    topology is counted as shared: an engine that prices runs boots a guest for each)."""
    vms = max(1, min(vms, len(specs)))
    loads = [0.0] * vms
    shapes: list[set[int]] = [set() for _ in range(vms)]
    parts: list[list[int]] = [[] for _ in range(vms)]
    cost_of = price or (lambda spec: spec.scenario.duration_s + RUN_OVERHEAD_S)
    topology_s = 0.0 if price else TOPOLOGY_BUILD_S
    costs = [cost_of(spec) for spec in specs]
    order = sorted(range(len(specs)), key=lambda i: (-costs[i], i))
    for i in order:
        shape = len(specs[i].flows)

        def cost(vm: int, shape: int = shape) -> float:
            return loads[vm] + (0.0 if shape in shapes[vm] else topology_s)

        vm = min(range(vms), key=lambda v: (cost(v), v))
        loads[vm] = cost(vm) + costs[i]
        shapes[vm].add(shape)
        parts[vm].append(i)
    return [sorted(part, key=lambda i: (len(specs[i].flows), i)) for part in parts]


def shard(specs: list[RunSpec], index: int, count: int) -> list[int]:
    """Indices of the runs in shard `index` (1-based) of `count`: about equal host time each by UML's
    cost model (the engine a suite's shards run on: a run at 100 Mbit/s costs several of one at 10
    with the same guest seconds), computed from the invocation alone, so every shard of one command
    line agrees on the assignment whatever the machine. Every run is in exactly one shard; a shard
    may be empty when there are fewer runs than shards."""
    if not 1 <= index <= count:
        raise ValueError(f"shard {index}/{count}: needs 1 <= i <= N")
    # split_for_vms makes at most len(specs) parts: the shards beyond them are empty, never built
    parts = split_for_vms(specs, min(count, len(specs)), price=uml_host_s) if specs else []
    return parts[index - 1] if index <= len(parts) else []


def uml_host_s(spec: RunSpec) -> float:
    """A run's host seconds in one UML guest by the cost model (unscaled: the same on every host)."""
    return estimated_wall_s(spec, vm=True, engine="uml")


@dataclass(frozen=True)
class VMCost:
    """Host seconds per guest second of one VM on one core: a linear fit in the rate times a
    per-extra-flow factor; for the estimates `cctest list`, `show` and `run --dry-run` give, never
    for results."""

    base: float
    per_mbps: float
    per_extra_flow: float

    def per_guest_s(self, rate_mbps: float, flows: int) -> float:
        return (self.base + self.per_mbps * rate_mbps) * (1 + self.per_extra_flow * (flows - 1))


VM_COSTS = {
    # QEMU's instruction-counted clock (bench/vm_clock.py, 2 VMs on 2 cores): 2.0 for one flow at
    # 20 Mbit/s, 3.0 at 50; six flows at 50 Mbit/s with tcp_probe, 9.3.
    "qemu": VMCost(base=1.33, per_mbps=0.033, per_extra_flow=0.42),
    # UML's time travel: fitted to the paper-scale campaign's cost lines (docs/papers.md, "What the
    # campaigns cost": two guests on 2 cores, all captures on, boot and per-run set-up included):
    # two flows 0.26 at 20 Mbit/s, 0.36 at 50, 0.44 at 100; five flows at 20 Mbit/s 0.58.
    "uml": VMCost(base=0.133, per_mbps=0.00136, per_extra_flow=0.65),
}


def estimated_wall_s(spec: RunSpec, vm: bool, engine: str = "uml") -> float:
    """Rough wall seconds one run takes natively, or in one single-vCPU VM of `engine`."""
    guest_s = spec.scenario.duration_s + RUN_OVERHEAD_S
    if not vm:
        return guest_s
    return guest_s * VM_COSTS[engine].per_guest_s(spec.link.rate_mbps, len(spec.flows))
