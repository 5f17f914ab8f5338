"""Matrix expansion, BDP/buffer arithmetic and the generated shaping commands (pure, no root)."""

import subprocess
import sys

import pytest

from cctest.model import dumbbell
from cctest.model.plan import expand
from cctest.model.scenario import ScenarioError, parse_experiments
from tests import REPO

SWEEP = """
defaults:
  link: {rate_mbps: 50, rtt_ms: 10, buffer_bdp: 1}
  duration_s: 30
  repetitions: 2
scenarios:
  sweep:
    flows: [{cc: cubic}, {cc: bbr, rtt_ms: 40}]
    matrix:
      buffer_bdp: [0.5, 5]
      flows.1.cc: [bbr, bbr_cws]
"""


def runs(text=SWEEP, name="sweep", repetitions=None):
    return expand(parse_experiments(text, "exp.yaml"), name, repetitions)


def test_matrix_is_a_cartesian_product_times_repetitions():
    result = runs()
    assert len(result) == 2 * 2 * 2
    points = {(r.matrix["buffer_bdp"], r.matrix["flows.1.cc"]) for r in result}
    assert points == {(0.5, "bbr"), (0.5, "bbr_cws"), (5, "bbr"), (5, "bbr_cws")}
    assert [r.repetition for r in result[:2]] == [0, 1]
    assert {r.flows[1].cc for r in result} == {"bbr", "bbr_cws"}
    assert all(r.flows[0].cc == "cubic" for r in result)


def test_repetitions_override_and_seed_per_repetition():
    result = runs(repetitions=3)
    assert len(result) == 12
    assert [r.seed for r in result[:3]] == [1, 2, 3]


def test_bdp_and_buffer_arithmetic():
    shallow = next(r for r in runs() if r.matrix["buffer_bdp"] == 0.5)
    # 50 Mbit/s x 10 ms = 62 500 bytes; half of it is the buffer.
    assert shallow.link.bdp_bytes == 62_500
    assert shallow.link.buffer_bytes == 31_250
    # the buffer in full frames, as a 31 250-byte FIFO holds them: 20 x 1514 = 30 280
    assert shallow.link.buffer_pkts == 20
    assert shallow.link.queue_limit_pkts == 21  # and the frame on the wire
    # netem must hold the 40 ms flow's BDP plus the buffer, twice over, in packets
    assert shallow.link.netem_limit_pkts >= 2 * (250_000 + 31_250) // 1514


def test_bdp_reference_rtt_and_buffer_bytes():
    text = SWEEP.replace("buffer_bdp: 1}", "buffer_bytes: 100000, bdp_rtt_ms: 20}").replace(
        "    matrix:\n      buffer_bdp: [0.5, 5]\n      flows.1.cc: [bbr, bbr_cws]\n", "")
    run = runs(text)[0]
    assert run.link.bdp_bytes == 125_000
    assert run.link.buffer_bytes == 100_000
    assert run.link.buffer_bdp == pytest.approx(0.8)


def test_flow_count_expands_to_hosts_with_own_rtt():
    text = SWEEP.replace("[{cc: cubic}, {cc: bbr, rtt_ms: 40}]",
                         "[{cc: cubic, count: 3}, {cc: bbr, count: 3, start_s: 5}]")
    run = runs(text.replace("      flows.1.cc: [bbr, bbr_cws]\n", ""))[0]
    assert [f.cc for f in run.flows] == ["cubic"] * 3 + ["bbr"] * 3
    assert [f.sender for f in run.flows][:2] == ["ccsnd0", "ccsnd1"]
    assert run.flows[3].start_s == 5 and run.flows[3].duration_s == 25
    assert run.flows[0].rtt_ms == 10
    assert len({f.server_port for f in run.flows}) == 6


def test_matrix_values_are_validated():
    with pytest.raises(ScenarioError, match=r"flows\.1\.cc.*unknown congestion control 'bbr9'"):
        runs(SWEEP.replace("[bbr, bbr_cws]", "[bbr, bbr9]"))


def test_matrix_key_that_does_not_exist():
    with pytest.raises(ScenarioError, match=r"matrix.flows.7.cc: flows.7 does not exist"):
        runs(SWEEP.replace("flows.1.cc", "flows.7.cc"))


def test_bottleneck_commands():
    run = next(r for r in runs() if r.matrix["buffer_bdp"] == 5)
    commands = dumbbell.bottleneck_tc("ccs1-btl", run.link)
    # one netem: the link's rate and its buffer (312 500 bytes = 206 frames, + 1 on the wire)
    assert commands == ("qdisc replace dev ccs1-btl root handle 1: netem rate 50000000bit limit 207",)


def test_delay_loss_and_fq_live_on_separate_interfaces():
    text = SWEEP.replace("buffer_bdp: 1}", "buffer_bdp: 1, loss_pct: 1.5}")
    run = runs(text)[0]
    plan = dumbbell.qdiscs(run)
    by_iface = {q.iface: q for q in plan}
    assert by_iface["ccs1-btl"].role == "bottleneck"
    assert by_iface["ccs1-snd0"].tc == ("qdisc replace dev ccs1-snd0 root handle 1: netem delay 10ms limit "
                                        f"{run.link.netem_limit_pkts}",)
    assert "delay 40ms" in by_iface["ccs1-snd1"].tc[0]
    assert by_iface["ccs2-rcv1"].tc[0].startswith("qdisc replace dev ccs2-rcv1 root handle 1: netem loss random 1.5%")
    assert by_iface["ccsnd0-eth0"].node == "ccsnd0" and "fq" in by_iface["ccsnd0-eth0"].tc[0]
    # the bottleneck shapes and queues only: no propagation delay or loss there
    assert "delay" not in by_iface["ccs1-btl"].tc[0] and "loss" not in by_iface["ccs1-btl"].tc[0]
    assert "ccs2-rcv0" not in {q.iface for q in dumbbell.qdiscs(runs()[0])}  # no loss -> no loss netem
    assert all(q.role != "access" for q in dumbbell.qdiscs(run, with_fq=False))


def test_every_interface_gets_offloads_off():
    run = runs()[0]
    ifaces = dumbbell.all_ifaces(run)
    assert len(ifaces) == 2 + 4 * len(run.flows)
    assert dumbbell.offload_cmd("ccs1-btl") == "ethtool -K ccs1-btl tso off gso off gro off"
    assert all(len(iface) <= 15 for _, iface in ifaces)


def test_dry_run_prints_commands_without_root():
    result = subprocess.run([sys.executable, "-m", "cctest", "run", "demo", "--dry-run"],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "tc qdisc replace dev ccs1-btl root handle 1: netem rate 20000000bit limit 67" in out
    assert "iperf3 -c 10.0.2.2 -p 5202 -C bbr -t 20" in out
    assert "ethtool -K ccsnd0-eth0 tso off gso off gro off" in out


def test_runs_with_the_same_hosts_and_links_can_share_a_topology():
    from cctest.host.net.topology import Dumbbell

    shallow, deep = (next(r for r in runs() if r.matrix["buffer_bdp"] == bdp) for bdp in (0.5, 5))
    held = Dumbbell(shallow, with_fq=True)
    assert held.fits(deep, with_fq=True)  # other shaping, same hosts and links
    assert not held.fits(deep, with_fq=False)
    three = runs(SWEEP.replace("[{cc: cubic}, {cc: bbr, rtt_ms: 40}]", "[{cc: cubic, count: 2}, {cc: bbr}]"))[0]
    assert not held.fits(three, with_fq=True)


MIXED = """
scenarios:
  one:
    link: {rate_mbps: 20, rtt_ms: 20, buffer_bdp: 1}
    flows: [{cc: cubic}]
    duration_s: 10
    matrix: {buffer_bdp: [0.5, 1, 2, 5]}
  two:
    link: {rate_mbps: 20, rtt_ms: 20, buffer_bdp: 1}
    flows: [{cc: cubic}, {cc: bbr}]
    duration_s: 40
    repetitions: 3
"""


def test_runs_are_split_over_vms_each_once_balanced_and_grouped_by_topology():
    from cctest.model.plan import split_for_vms

    experiments = parse_experiments(MIXED, "exp.yaml")
    specs = expand(experiments, "one") + expand(experiments, "two")
    parts = split_for_vms(specs, 2)
    assert sorted(i for part in parts for i in part) == list(range(len(specs)))
    # three 40 s runs and four 10 s runs: neither VM gets all the long ones
    long_runs = [sum(specs[i].scenario.duration_s == 40 for i in part) for part in parts]
    assert sorted(long_runs) == [1, 2]
    for part in parts:  # runs that share hosts and links follow each other
        shapes = [len(specs[i].flows) for i in part]
        assert shapes == sorted(shapes)
    # deterministic: the host and every guest compute the same split
    assert split_for_vms(specs, 2) == parts
    # never more VMs than runs, never an empty one
    assert split_for_vms(specs[:2], 8) == [[0], [1]]
    assert split_for_vms(specs, 1) == [sorted(range(len(specs)), key=lambda i: (len(specs[i].flows), i))]


def test_the_dry_run_names_every_hosts_tcp_buffers_and_the_root_backlog():
    (spec,) = expand(parse_experiments(
        "scenarios:\n  s:\n    link: {rate_mbps: 10, rtt_ms: 10, buffer_bdp: 1}\n    flows: [{cc: cubic}]\n"
        "    duration_s: 5\n",
        "exp.yaml"), "s")
    text = dumbbell.describe(spec)
    buffers = dumbbell.HOST_TCP_BUFFERS
    for flow in spec.flows:
        assert f"[{flow.receiver}] sysctl -qw 'net.ipv4.tcp_rmem={buffers}' 'net.ipv4.tcp_wmem={buffers}'" in text
        assert f"[{flow.sender}] sysctl -qw 'net.ipv4.tcp_rmem={buffers}'" in text
    assert "[root] sysctl -w net.core.netdev_max_backlog=5000   # if lower" in text


def test_the_cost_line_sets_the_measured_cost_beside_the_estimate():
    from cctest.model.plan import estimated_wall_s
    from cctest.run.session import cost_line

    specs = expand(parse_experiments(COST_SCENARIO, "x.yaml"), "c")
    line = cost_line(specs, [[0, 1], [2]], 150.0, "uml", 2)
    # three 50 s runs over two VMs for 150 host s: 300 VM-seconds, 2.00 host s per guest s per VM
    assert "150 host s for 150 guest s of flows in 2 uml VM(s), 2 at a time, 2.00 host s per guest s per VM" in line
    assert f"estimated {estimated_wall_s(specs[0], vm=True, engine='uml') * 2:.0f} host s" in line


def test_the_cost_line_of_a_guest_per_run_counts_the_slots_not_the_guests():
    from cctest.model.plan import estimated_wall_s
    from cctest.run.session import cost_line

    specs = expand(parse_experiments(COST_SCENARIO, "x.yaml"), "c")
    line = cost_line(specs, [[0], [1], [2]], 150.0, "uml", 2)
    # three guests, two at a time: the third waits for a free slot, so two runs' time on one slot
    assert "in 3 uml VM(s), 2 at a time, 2.00 host s per guest s per VM" in line
    assert f"estimated {estimated_wall_s(specs[0], vm=True, engine='uml') * 2:.0f} host s" in line


COST_SCENARIO = """
scenarios:
  c:
    link: {rate_mbps: 20, rtt_ms: 10, buffer_bdp: 1}
    flows: [{cc: cubic}]
    duration_s: 50
    repetitions: 3
"""
