"""bench/engines.py's captures mode: each of its scenarios is a valid experiment that differs from
the all-captures one in exactly the captures its name takes away, and a flow count it has no shape
for is refused in one line before anything runs. No guest boots."""

import subprocess
import sys

import yaml

from cctest.model.scenario import load_experiments
from tests import REPO

sys.path.append(str(REPO / "bench"))  # after the packages: its scripts shadow none
import engines  # bench/ is not a package


def test_every_capture_set_loads_and_takes_away_only_what_it_names(tmp_path):
    experiments, sets = engines.captures_experiments(100, [1, 6], 60, 3)
    path = tmp_path / "captures.yaml"
    path.write_text(yaml.safe_dump(experiments))
    loaded = load_experiments(path)
    assert sorted(loaded.scenarios) == sorted(sets)
    every = engines.CAPTURE_SETS["all"]
    for name, label in sets.items():
        capture = loaded.get(name).capture.model_dump()
        changed = {key for key in every if capture[key] != every[key]}
        expected = {"all": set(), "no ss": {"ss_interval_ms"}, "no qdisc": {"qdisc_interval_ms"},
                    "no tcp_probe": {"tcp_probe"},
                    "none": {"ss_interval_ms", "qdisc_interval_ms", "tcp_probe"}}[label]
        assert changed == expected, name
        scenario = loaded.get(name)
        assert scenario.link.rate_mbps == 100 and scenario.duration_s == 60 and scenario.repetitions == 3


def test_a_flow_count_without_a_shape_is_refused_before_running(tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "bench" / "engines.py"), "captures", "--flows", "1,2",
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 2
    said = "bench/engines.py: --flows 1,2: the captures mode runs 1 and/or 6 flows"
    assert done.stderr.strip().splitlines() == [said]
    assert not (tmp_path / "out").exists()
