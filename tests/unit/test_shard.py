"""`cctest run --shard i/N` and `cctest list`'s tags and time estimates."""

from __future__ import annotations

import re

from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from cctest.cli.main import main
from cctest.model.plan import estimated_wall_s, expand, shard, split_for_vms
from cctest.model.scenario import parse_experiments


def sweep(buffers: int, variants: int, reps: int):
    text = f"""
scenarios:
  s:
    tags: [paper-000]
    link: {{rate_mbps: 20, rtt_ms: 20, buffer_bdp: 1}}
    flows: [{{cc: cubic}}, {{cc: bbr, count: 2}}]
    duration_s: 10
    repetitions: {reps}
    matrix:
      buffer_bdp: {[0.25 * (k + 1) for k in range(buffers)]}
      duration_s: {[10 + 5 * k for k in range(variants)]}
"""
    return text, expand(parse_experiments(text, "e.yaml"), "s")


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 4), st.integers(1, 3), st.integers(1, 12))
def test_shards_partition_the_runs_and_are_stable(buffers, variants, reps, n):
    _, specs = sweep(buffers, variants, reps)
    shards = [shard(specs, i, n) for i in range(1, n + 1)]
    flat = [i for part in shards for i in part]
    assert sorted(flat) == list(range(len(specs)))  # every run once: union is all, pairwise disjoint
    assert shards == [shard(specs, i, n) for i in range(1, n + 1)]  # the same on every machine
    _, again = sweep(buffers, variants, reps)  # and from a fresh parse of the same file
    assert shards == [shard(again, i, n) for i in range(1, n + 1)]


def test_shards_balance_the_time():
    _, specs = sweep(6, 4, 2)
    loads = [sum(specs[i].scenario.duration_s for i in shard(specs, k, 4)) for k in range(1, 5)]
    assert max(loads) - min(loads) <= max(s.scenario.duration_s for s in specs) + 20


def test_shards_balance_the_host_time_of_runs_at_different_rates():
    """Six flows at 100 Mbit/s for 60 s cost UML several times what one flow at 10 Mbit/s costs for
    120 s: shards are balanced in host time by its cost model, not in guest seconds."""
    text = """
scenarios:
  dear:
    link: {rate_mbps: 100, rtt_ms: 20, buffer_bdp: 1}
    flows: [{cc: cubic, count: 3}, {cc: bbr, count: 3}]
    duration_s: 60
    repetitions: 2
  cheap:
    link: {rate_mbps: 10, rtt_ms: 20, buffer_bdp: 1}
    flows: [{cc: cubic}]
    duration_s: 120
    repetitions: 8
"""
    experiments = parse_experiments(text, "e.yaml")
    specs = expand(experiments, "dear") + expand(experiments, "cheap")
    host_s = [estimated_wall_s(spec, vm=True, engine="uml") for spec in specs]
    assert min(host_s[:2]) > 3 * max(host_s[2:])  # dearer in host time, though shorter in guest time
    loads = [sum(host_s[i] for i in shard(specs, k, 4)) for k in range(1, 5)]
    assert max(loads) - min(loads) < min(host_s), loads  # within one cheap run
    # balanced in guest seconds, two shards get a dear run on top of two cheap ones
    by_guest_s = [sum(host_s[i] for i in part) for part in split_for_vms(specs, 4)]
    assert max(by_guest_s) - min(by_guest_s) > 0.9 * max(host_s), by_guest_s


def test_dry_run_shows_the_shard_and_only_its_runs(tmp_path):
    text, specs = sweep(3, 1, 2)
    f = tmp_path / "e.yaml"
    f.write_text(text)
    runner = CliRunner()
    listed = []
    for i in (1, 2, 3):
        out = runner.invoke(main, ["run", "s", "-f", str(f), "--shard", f"{i}/3", "--dry-run"]).output
        header = re.search(r"shard (\d)/3: (\d+) of 6 runs", out)
        assert header and header[1] == str(i)
        listed += re.findall(r"^# run s (\S+) repetition (\d)$", out, re.M)
    assert sorted(listed) == sorted((s.label, str(s.repetition)) for s in specs)


def test_a_bad_shard_is_one_line_and_exit_2(tmp_path):
    text, _ = sweep(1, 1, 1)
    f = tmp_path / "e.yaml"
    f.write_text(text)
    for bad in ("0/3", "4/3", "x", "1/0"):
        result = CliRunner().invoke(main, ["run", "s", "-f", str(f), "--shard", bad, "--dry-run"])
        assert result.exit_code == 2 and "--shard" in result.output and result.output.count("\n") == 1


def test_list_filters_by_tag_and_estimates_time(tmp_path):
    text, specs = sweep(2, 1, 1)
    f = tmp_path / "e.yaml"
    f.write_text(text + """  other:
    link: {rate_mbps: 20, rtt_ms: 20, buffer_bdp: 1}
    flows: [{cc: cubic}]
    duration_s: 10
""")
    out = CliRunner().invoke(main, ["list", "-f", str(f), "--tag", "paper-000"], env={"COLUMNS": "200"}).output
    assert " s " in out and "other" not in out
    # 2 runs of 10 s plus the per-run overhead, natively
    assert round(sum(estimated_wall_s(s, vm=False) for s in specs) / 60) == 1 and "1 min" in out
    # in the VM a run costs more host time than its guest time, and more with more flows
    assert estimated_wall_s(specs[0], vm=True, engine="qemu") > estimated_wall_s(specs[0], vm=False)
    assert estimated_wall_s(specs[0], vm=True, engine="uml") < estimated_wall_s(specs[0], vm=True, engine="qemu")
    bad = CliRunner().invoke(main, ["list", "-f", str(f), "--tag", "paper-999"])
    assert bad.exit_code == 2 and "tags: paper-000" in bad.output


def test_run_takes_scenarios_by_tag(tmp_path):
    text, specs = sweep(2, 1, 1)
    f = tmp_path / "e.yaml"
    f.write_text(text)
    out = CliRunner().invoke(main, ["run", "--tag", "paper-000", "-f", str(f), "--dry-run"]).output
    assert len(re.findall(r"^# run s ", out, re.M)) == len(specs)
    for args in (["--tag", "paper-9"], []):
        result = CliRunner().invoke(main, ["run", *args, "-f", str(f), "--dry-run"])
        assert result.exit_code == 2 and result.output.count("\n") == 1
