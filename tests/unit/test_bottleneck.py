"""The composable bottleneck without a kernel: the link model's validation, the one chain function,
the rate over time and the AQM statistics parser (tests/vm/test_vm_bottleneck.py runs it for real)."""

from __future__ import annotations

import struct
from typing import get_args

import numpy as np
import pytest
from click.testing import CliRunner

from cctest.analysis import derived
from cctest.cli.main import main
from cctest.host.net.schedule import LinkSchedule
from cctest.host.rundir import base_record
from cctest.model import dumbbell
from cctest.model.aqm import AQMS, AqmKind, aqm_counters
from cctest.model.bottleneck import chain, rate_change, shaper_burst_bytes, timed_changes
from cctest.model.plan import expand
from cctest.model.record import Link
from cctest.model.scenario import ScenarioError, parse_experiments
from tests import REPO

BASE = """
defaults:
  link: {rate_mbps: 10, rtt_ms: 20, buffer_bdp: 5}
  duration_s: 12
scenarios:
  one:
    link: LINK
    flows: [{cc: cubic}]
"""


def runs(link: str, matrix: str = ""):
    text = BASE.replace("LINK", link) + (f"    matrix: {matrix}\n" if matrix else "")
    return expand(parse_experiments(text, "exp.yaml"), "one")


def error_of(link: str) -> str:
    with pytest.raises(ScenarioError) as caught:
        runs(link)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("exp.yaml: scenario one: key link.")
    return message


def test_fifo_is_todays_single_netem():
    (run,) = runs("{}")
    assert run.link.aqm == "fifo" and not run.link.ecn and run.link.rate_schedule == ()
    assert chain("ccs1-btl", run.link) == (f"qdisc replace dev ccs1-btl root handle 1: netem rate 10000000bit "
                                           f"limit {run.link.queue_limit_pkts}",)


@pytest.mark.parametrize("aqm, leaf", [
    ("fq_codel", "fq_codel limit 82 flows 1024 target 5ms interval 100ms noecn"),
    ("codel", "codel limit 82 target 5ms interval 100ms noecn"),
    ("pie", "pie limit 82 target 15ms tupdate 15ms alpha 2 beta 20 noecn"),
    ("red", "red limit 125000 min 6250 max 18750 avpkt 1514 burst 7 probability 0.1 bandwidth 10000000bit adaptive"),
])
def test_an_aqm_is_a_chain_netem_tbf_aqm_sized_to_the_buffer(aqm, leaf):
    (run,) = runs(f"{{aqm: {aqm}}}")
    assert run.link.buffer_pkts == 82  # 125000 B of full frames
    assert chain("ccs1-btl", run.link) == (
        f"qdisc replace dev ccs1-btl root handle 1: netem delay 10us limit {run.link.netem_limit_pkts}",
        "qdisc replace dev ccs1-btl parent 1:1 handle 2: tbf rate 10000000bit burst 5000 limit 125000",
        f"qdisc replace dev ccs1-btl parent 2:1 handle 3: {leaf}",
    )
    # the whole chain is the bottleneck's qdisc plan, installed and deleted as one (root) qdisc
    assert dumbbell.qdiscs(run)[0].tc == chain(dumbbell.BOTTLENECK_IFACE, run.link)


def test_parameters_and_ecn_reach_the_aqm():
    (run,) = runs("{aqm: codel, ecn: true, aqm_params: {target_ms: 2.5, interval_ms: 50}}")
    assert chain("x", run.link)[-1].endswith("codel limit 82 target 2.5ms interval 50ms ecn")
    (run,) = runs("{aqm: red, ecn: true, aqm_params: {adaptive: false, probability: 0.02}}")
    assert chain("x", run.link)[-1].endswith("probability 0.02 bandwidth 10000000bit ecn")


def test_meta_records_the_aqm_with_its_defaults_and_the_schedule(tmp_path):
    (run,) = runs("{aqm: pie, aqm_params: {beta: 10}, rate_schedule: [{at_s: 6, rate_mbps: 5}]}")
    link = base_record(tmp_path, run, "vm").dump()["link"]
    assert link["aqm"] == "pie" and link["ecn"] is False
    assert link["aqm_params"] == {"target_ms": 15.0, "tupdate_ms": 15.0, "alpha": 2, "beta": 10}
    assert link["rate_schedule"] == [{"at_s": 6.0, "rate_mbps": 5.0}]
    assert "tbf" in link["shaper"] and "pie" in link["shaper"]


def test_link_aqm_accepts_exactly_the_registry_s_kinds():
    assert get_args(AqmKind) == AQMS


def test_a_matrix_sweeps_the_aqm_by_its_bare_name():
    got = [(r.label, r.link.aqm) for r in runs("{}", "{aqm: [fifo, codel]}")]
    assert got == [("aqm-fifo", "fifo"), ("aqm-codel", "codel")]


def test_rate_steps_change_the_shaper_that_holds_the_rate():
    (fifo,) = runs("{rate_schedule: [{at_s: 6, rate_mbps: 5}]}")
    assert rate_change("b", fifo.link, 5) == ("qdisc change dev b root handle 1: netem rate 5000000bit "
                                              f"limit {fifo.link.queue_limit_pkts}")
    (aqm,) = runs("{aqm: fq_codel, rate_schedule: [{at_s: 6, rate_mbps: 5}]}")
    assert rate_change("b", aqm.link, 5) == ("qdisc change dev b parent 1:1 handle 2: tbf rate 5000000bit burst 3028 "
                                             "limit 125000")
    assert "t=6s [root] tc qdisc change dev ccs1-btl parent 1:1 handle 2: tbf" in dumbbell.describe(aqm)


def test_an_outage_sets_each_receiver_ports_loss_to_100_and_back(tmp_path):
    (run,) = runs("{loss_pct: 1, outages: [{at_s: 5, duration_s: 1.5}]}")
    text = dumbbell.describe(run)
    limit = run.link.netem_limit_pkts
    change = "tc qdisc change dev ccs2-rcv0 root handle 1: netem loss random"
    assert f"t=5s [root] {change} 100% limit {limit}    # outage start" in text
    assert f"t=6.5s [root] {change} 1% limit {limit}    # outage end" in text
    # without random loss the receiver port still gets its loss qdisc, at 0 % until the outage
    (clean,) = runs("{outages: [{at_s: 5, duration_s: 1}]}")
    assert [q.tc for q in dumbbell.qdiscs(clean) if q.role == "loss"] == [
        (f"qdisc replace dev ccs2-rcv0 root handle 1: netem loss random 0% limit {clean.link.netem_limit_pkts}",)]
    assert base_record(tmp_path, clean, "vm").dump()["link"]["outages"] == [{"at_s": 5.0, "duration_s": 1.0}]
    (none,) = runs("{}")
    assert not [q for q in dumbbell.qdiscs(none) if q.role == "loss"]
    assert base_record(tmp_path, none, "vm").dump()["link"]["outages"] == []


def test_the_shaper_burst_is_4_ms_and_never_below_two_frames():
    assert shaper_burst_bytes(20_000_000) == 10_000
    assert shaper_burst_bytes(1_000_000) == 2 * 1514


@pytest.mark.parametrize("link, key, words", [
    ("{aqm: sfq}", "link.aqm", ["'fifo'", "'fq_codel'", "'codel'", "'pie'", "'red'"]),
    ("{aqm: codel, aqm_params: {tupdate_ms: 5}}", "link.aqm_params.tupdate_ms",
     ["not a parameter of codel", "allowed: target_ms, interval_ms"]),
    ("{aqm_params: {target_ms: 5}}", "link.aqm_params.target_ms",
     ["not a parameter of fifo", "fifo takes no parameters"]),
    ("{aqm: fq_codel, aqm_params: {target_ms: -1}}", "link.aqm_params.target_ms", ["greater than or equal to 0.001"]),
    # tc reads whole microseconds: 0.4 us would reach the kernel as a target of 0
    ("{aqm: codel, aqm_params: {target_ms: 0.0004}}", "link.aqm_params.target_ms", ["greater than or equal to 0.001"]),
    ("{aqm: pie, aqm_params: {tupdate_ms: 0.0009}}", "link.aqm_params.tupdate_ms", ["greater than or equal to 0.001"]),
    ("{aqm: pie, aqm_params: {alpha: 40}}", "link.aqm_params.alpha", ["less than or equal to 32"]),
    ("{aqm: red, aqm_params: {min_ms: 20, max_ms: 10}}", "link.aqm_params.min_ms", ["not below max_ms"]),
    ("{aqm: red, aqm_params: {max_ms: 200}}", "link.aqm_params.max_ms", ["250000 bytes", "buffer's 125000 bytes"]),
    ("{aqm: red, aqm_params: {min_ms: 0.5}}", "link.aqm_params.min_ms", ["less than one packet"]),
    ("{ecn: true}", "link.ecn", ["a fifo only drops", "fq_codel, codel, pie, red"]),
    ("{rate_schedule: [{at_s: 6, rate_mbps: 5}, {at_s: 3, rate_mbps: 8}]}", "link.rate_schedule", ["must increase"]),
    ("{rate_schedule: [{at_s: 6, rate_mbps: 5, mbps: 5}]}", "link.rate_schedule.0.mbps", ["unknown key"]),
    ("{rate_schedule: [{at_s: 0, rate_mbps: 5}]}", "link.rate_schedule.0.at_s", ["greater than 0"]),
    ("{rate_schedule: [{at_s: 12, rate_mbps: 5}]}", "link.rate_schedule.0.at_s", ["not before the scenario's end"]),
    ("{outages: [{at_s: 5, duration_s: 2}, {at_s: 6, duration_s: 1}]}", "link.outages.1.at_s",
     ["before the previous outage ends (7 s)"]),
    ("{outages: [{at_s: 11, duration_s: 2}]}", "link.outages.0", ["ends at 13 s", "duration_s = 12 s"]),
    ("{outages: [{at_s: 5, duration_s: 0}]}", "link.outages.0.duration_s", ["greater than 0"]),
    ("{outages: [{at_s: 5, duration_s: 1, for_s: 1}]}", "link.outages.0.for_s", ["unknown key"]),
])
def test_bad_bottleneck_keys_are_one_line_naming_key_and_allowed(link, key, words):
    message = error_of(link)
    assert f"key {key}:" in message, message
    for word in words:
        assert word in message, message


def test_bad_bottleneck_input_exits_2(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(BASE.replace("LINK", "{aqm: codel, aqm_params: {flows: 4}}"))
    result = CliRunner().invoke(main, ["run", "--dry-run", "-f", str(path), "one"])
    assert result.exit_code == 2
    assert "key link.aqm_params.flows: not a parameter of codel; allowed: target_ms, interval_ms" in result.output


def rate_at(link, t):
    return derived.link_rate_mbps_at(Link.model_validate(link), t)


def mean_rate(link, start_s, end_s):
    return derived.link_bytes_between(Link.model_validate(link), start_s, end_s) * 8 / 1e6 / (end_s - start_s)


def test_rate_at_follows_the_schedule():
    link = {"rate_mbps": 20, "rate_schedule": [{"at_s": 10, "rate_mbps": 5}, {"at_s": 6, "rate_mbps": 10}]}
    assert rate_at(link, 0) == 20 and rate_at(link, 5.99) == 20
    assert rate_at(link, 6) == 10 and rate_at(link, 9.9) == 10 and rate_at(link, 10) == 5 and rate_at(link, 99) == 5
    assert rate_at(link, np.array([-1, 6.5, 11])).tolist() == [20, 10, 5]
    assert rate_at({"rate_mbps": 20}, [1, 2]).tolist() == [20, 20]


def test_mean_rate_weights_each_step_by_its_time():
    link = {"rate_mbps": 20, "rate_schedule": [{"at_s": 6, "rate_mbps": 10}]}
    assert mean_rate(link, 0, 12) == pytest.approx(15)
    assert mean_rate(link, 3, 9) == pytest.approx(15) and mean_rate(link, 7, 9) == 10 and mean_rate(link, 0, 6) == 20
    assert mean_rate({"rate_mbps": 20}, 0, 10) == 20


def test_the_link_delivers_nothing_during_an_outage():
    link = {"rate_mbps": 20, "rate_schedule": [{"at_s": 6, "rate_mbps": 10}],
            "outages": [{"at_s": 2, "duration_s": 1}, {"at_s": 8, "duration_s": 2}]}
    assert mean_rate(link, 2, 3) == 0 and mean_rate(link, 8.5, 9.5) == 0
    assert mean_rate(link, 0, 4) == pytest.approx(15)  # 3 of 4 s at 20
    assert mean_rate(link, 5, 9) == pytest.approx((20 + 2 * 10) / 4)
    assert rate_at(link, 2.5) == 20  # the bottleneck still shapes at its rate; what it sends is lost after it


def test_aqm_counters_read_each_kinds_statistics():
    codel = struct.pack("<IIIIiIIII", 1514, 3, 2, 4000, -5, 7, 11, 1, 0)
    assert aqm_counters("codel", codel)["ecn_marks"] == 11 and aqm_counters("codel", codel)["limit_drops"] == 7
    fq = struct.pack("<IIIIIIIIII", 0, 1514, 9, 13, 2, 1, 0, 0, 4096, 0) + bytes(8)  # the kernel sends the union's size
    assert (aqm_counters("fq_codel", fq)["ecn_marks"], aqm_counters("fq_codel", fq)["limit_drops"]) == (13, 9)
    assert aqm_counters("fq_codel", struct.pack("<I", 1) + fq[4:]) == {}  # a flow's statistics, not the qdisc's
    pie = struct.pack("<QIIIIIIII", 1 << 40, 12, 0, 1, 5000, 30, 4, 80, 17)
    assert aqm_counters("pie", pie)["ecn_marks"] == 17 and aqm_counters("pie", pie)["xstats"]["dropped"] == 30
    red = struct.pack("<IIII", 5, 2, 0, 19)
    assert aqm_counters("red", red) == {"ecn_marks": 19, "limit_drops": 2,
                                        "xstats": {"early": 5, "pdrop": 2, "other": 0, "marked": 19}}
    assert aqm_counters("netem", b"") == {} and aqm_counters("codel", codel[:8]) == {}


def test_the_vm_suite_runs_every_aqm():
    """tests/vm/scenarios.yaml's aqm-vs-fifo sweeps the registry: a new AQM is run for real there."""
    from cctest.model.scenario import load_experiments

    suite = load_experiments(REPO / "tests" / "vm" / "scenarios.yaml")
    assert suite.get("aqm-vs-fifo").matrix["aqm"] == list(AQMS)


def test_each_aqm_reads_its_counters_itself_and_fq_codel_only_the_qdiscs():
    """Aqm.counters is the AQM's: fq_codel's union carries a flow's statistics too (type 1), which
    the qdisc's row must not take; a kind with no statistics reads none."""
    from cctest.model.aqm import REGISTRY

    fq = struct.pack("<IIIIIIIIII", 0, 1514, 9, 13, 2, 1, 0, 0, 4096, 0) + bytes(8)
    assert REGISTRY["fq_codel"].counters(fq)["limit_drops"] == 9
    assert REGISTRY["fq_codel"].counters(struct.pack("<I", 1) + fq[4:]) == {}
    assert REGISTRY["fifo"].counters(fq) == {}
    assert aqm_counters("fq_codel", fq) == REGISTRY["fq_codel"].counters(fq)


def nested(attributes: dict[int, bytes]) -> bytes:
    """Netlink attributes as the kernel nests them in TCA_STATS_APP for cake: length, type, value, padded to 4."""
    out = b""
    for kind, value in attributes.items():
        out += struct.pack("<HH", 4 + len(value), kind) + value + bytes(-len(value) % 4)
    return out


def test_an_aqm_with_nested_statistics_reads_them_through_the_same_entry_point(monkeypatch):
    """cake reports its statistics as nested attributes, not one struct: its class overrides
    `counters`, and the qdisc capture's one call (aqm_counters) reads it unchanged."""
    from cctest.model import aqm

    class NestedStats(aqm.Aqm):
        kind = "cake"
        DROPS, MARKS = 7, 8  # this AQM's attribute numbers

        @classmethod
        def counters(cls, app: bytes) -> dict:
            values, at = {}, 0
            while at + 4 <= len(app):
                length, kind = struct.unpack_from("<HH", app, at)
                if length < 4:
                    return {}
                values[kind] = int.from_bytes(app[at + 4:at + length], "little")
                at += (length + 3) & ~3
            if cls.DROPS not in values or cls.MARKS not in values:
                return {}
            return {"ecn_marks": values[cls.MARKS], "limit_drops": values[cls.DROPS], "xstats": values}

    monkeypatch.setitem(aqm.REGISTRY, "cake", NestedStats)
    app = nested({1: struct.pack("<I", 3), 7: struct.pack("<I", 41), 8: struct.pack("<Q", 5)})
    assert aqm_counters("cake", app) == {"ecn_marks": 5, "limit_drops": 41, "xstats": {1: 3, 7: 41, 8: 5}}
    assert aqm_counters("cake", nested({1: struct.pack("<I", 3)})) == {}


def test_outages_applied_pairs_each_start_with_its_end():
    (run,) = runs("{outages: [{at_s: 2, duration_s: 1}, {at_s: 5, duration_s: 0.5}], "
                  "rate_schedule: [{at_s: 4, rate_mbps: 5}]}")
    changes = timed_changes(run.link, "btl", ["p0"])
    assert [c.at_s for c in changes] == [2, 3, 4, 5, 5.5]
    schedule = LinkSchedule.__new__(LinkSchedule)  # the bookkeeping only: no tc process
    schedule.applied = [{"at_s": c.at_s, **c.what, "applied_s": c.at_s + 0.01} for c in changes[:4]]
    assert schedule.rate_steps_applied() == [{"at_s": 4, "rate_mbps": 5.0, "applied_s": 4.01}]
    assert schedule.outages_applied() == [
        {"at_s": 2, "duration_s": 1, "started_s": 2.01, "ended_s": 3.01},
        {"at_s": 5, "duration_s": 0.5, "started_s": 5.01, "ended_s": None},  # the run stopped first
    ]


def test_every_list_of_aqms_is_the_registry():
    """One class per AQM in cctest/model/aqm.py is the only list: what experiments.yaml accepts, what the
    doctor probes, which qdiscs hold the buffer and whose statistics are read all come from it."""
    import typing

    from cctest.analysis import derived
    from cctest.model import aqm, scenario
    from cctest.run import doctor

    kinds = tuple(aqm.REGISTRY)
    assert typing.get_args(scenario.Link.model_fields["aqm"].annotation) == kinds == aqm.AQMS
    probed = {need.module for need in doctor.QDISCS if need.needed_for == "aqm"}
    assert probed == {aqm.SHAPER_MODULE} | {a.module for a in aqm.REGISTRY.values() if a.module}
    shaped = [kind for kind in kinds if kind != "fifo"]
    assert set(shaped) <= set(derived.BUFFER_KINDS)
    assert all(aqm.REGISTRY[kind].counters(b"") == {} for kind in kinds)  # nothing read from nothing
    assert all(aqm.REGISTRY[kind].xstats is not None or aqm.REGISTRY[kind].counters is not aqm.Aqm.counters
               for kind in shaped)  # each AQM reads its own statistics
