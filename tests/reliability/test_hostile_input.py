"""Every bad experiments file is one line naming the file and the key, exit 2, from `cctest run NAME
--dry-run` and from `cctest list` alike; nothing is expanded before the run count is known (a hang
guard catches one that is: expanding these files takes minutes or exhausts memory, refusing them a
fraction of a second; the guard is wide, since the fast tests share two cores with each other).
HOSTILE lists the review's findings one by one; the hypothesis tests throw mutated and random files
at the same entry points and allow only a validated file or that one line."""

import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

from cctest.cli.main import main
from cctest.model.plan import expand
from cctest.model.scenario import ScenarioError, parse_experiments
from tests import REPO
from tests.unit.test_scenario import GOOD  # the valid file both start from


def matrix(body: str) -> str:
    return GOOD + f"    matrix: {body}\n"


def numbers(n: int, scale: float = 1.0) -> str:
    return "[" + ",".join(f"{(i + 1) * scale:g}" for i in range(n)) + "]"


# name -> (file content, what the one line must contain)
HOSTILE: dict[str, tuple[str | bytes, str]] = {
    "buffer_bdp .inf": (GOOD.replace("buffer_bdp: 1", "buffer_bdp: .inf"), "link.buffer_bdp"),
    "bdp_rtt_ms .inf": (GOOD.replace("buffer_bdp: 1", "buffer_bdp: 1, bdp_rtt_ms: .inf"), "link.bdp_rtt_ms"),
    "rate .nan": (GOOD.replace("rate_mbps: 20", "rate_mbps: .nan"), "link.rate_mbps"),
    "rtt -.inf": (GOOD.replace("rtt_ms: 10,", "rtt_ms: -.inf,"), "link.rtt_ms"),
    "duration .inf": (GOOD.replace("duration_s: 10", "duration_s: .inf"), "duration_s"),
    "recursive anchor": ("scenarios: &s {one: *s}\n", "recursive"),
    "recursive list": (matrix("&m {rtt_ms: [*m]}"), "recursive"),
    "deep lists": ("scenarios: " + "[" * 5000 + "]" * 5000 + "\n", "nested"),
    "deep mappings": ("scenarios: " + "{a: " * 60 + "1" + "}" * 60 + "\n", "nested"),
    "latin-1": (GOOD.replace("scenarios:", "# caf\xe9\nscenarios:").encode("latin-1"), "not UTF-8"),
    "utf-16": (GOOD.encode("utf-16"), "not UTF-8"),
    "binary": (b"\x00\xff\xfe" * 100, "not UTF-8"),
    "start at end": (GOOD.replace("start_s: 2", "start_s: 10"), "flows.1.start_s"),
    "start after end": (GOOD.replace("start_s: 2", "start_s: 20"), "flows.1.start_s"),
    "sub-second flow": (GOOD.replace("start_s: 2", "start_s: 2, duration_s: 0.4"), "whole seconds"),
    "fractional flow": (GOOD.replace("start_s: 2", "start_s: 2.3"), "whole seconds"),
    "fractional scenario": (GOOD.replace("duration_s: 10", "duration_s: 10.5"), "whole seconds"),
    "tiny rate": (GOOD.replace("rate_mbps: 20", "rate_mbps: 1e-9"), "link.rate_mbps"),
    "huge buffer_bdp": (GOOD.replace("buffer_bdp: 1", "buffer_bdp: 1e300"), "link.buffer_bdp"),
    "huge buffer_bytes": (GOOD.replace("buffer_bdp: 1", "buffer_bytes: 1e300"), "link.buffer_bytes"),
    "buffer over 1 GiB": (GOOD.replace("rate_mbps: 20", "rate_mbps: 100000").replace(
        "buffer_bdp: 1", "buffer_bdp: 1000, bdp_rtt_ms: 1000"), "1 GiB"),
    "254 flows": (GOOD.replace("[{cc: cubic},", "[" + "{cc: cubic, count: 32}," * 8), "at most 253"),
    "params on a kernel cc": (GOOD.replace("{cc: cubic}", "{cc: cubic, params: {beta: 1}}"), "flows.0.params"),
    "param 1e38": (GOOD.replace("{cc: cubic}", "{cc: bbr1, params: {x: 1e38}}"), "flows.0.params.x"),
    "param 2**32": (GOOD.replace("{cc: cubic}", "{cc: bbr1, params: {x: 4294967296}}"), "flows.0.params.x"),
    "param -1": (GOOD.replace("{cc: cubic}", "{cc: bbr1, params: {x: -1}}"), "flows.0.params.x"),
    "param true": (GOOD.replace("{cc: cubic}", "{cc: bbr1, params: {x: true}}"), "flows.0.params.x"),
    "param 1.5": (GOOD.replace("{cc: cubic}", "{cc: bbr1, params: {x: 1.5}}"), "flows.0.params.x"),
    "param text": (GOOD.replace("{cc: cubic}", "{cc: bbr1, params: {x: '7'}}"), "flows.0.params.x"),
    "matrix of 10**6": (matrix(f"{{rtt_ms: {numbers(1000)}, loss_pct: {numbers(1000, 0.01)}}}"), "1000000 runs"),
    "matrix of 10**9": (matrix(f"{{rtt_ms: {numbers(1000)}, loss_pct: {numbers(1000, 0.01)}, "
                               f"buffer_bdp: {numbers(1000)}}}"), "1000000000 runs"),
    "repetitions x matrix": (matrix(f"{{rtt_ms: {numbers(100)}}}").replace("duration_s: 10", "duration_s: 10\n  "
                                                                           "repetitions: 1000"), "100000 runs"),
    "duplicate key": (GOOD.replace("duration_s: 10", "duration_s: 10\n  duration_s: 20"), "given twice"),
    "duplicate scenario": (GOOD + "  one:\n    flows: [{cc: reno}]\n", "'one' given twice"),
    "duplicate flow key": (GOOD.replace("{cc: cubic}", "{cc: cubic, cc: reno}"), "given twice"),
    "rate_mbps and link.rate_mbps": (matrix("{rate_mbps: [10], link.rate_mbps: [20]}"), "matrix.link.rate_mbps"),
    "both buffer notations": (matrix("{buffer_bdp: [1], link.buffer_bytes: [20000]}"), "matrix.link.buffer_bytes"),
    "flow and its field": (matrix("{flows.0: [{cc: reno}], flows.0.cc: [cubic]}"), "matrix.flows.0.cc"),
    "colliding labels": (matrix("{flows.0.cc: [cubic, 'cub ic']}"), "one label"),
    "overlong label": (matrix("{flows.0.cc: [" + "x" * 300 + "]}"), "characters"),
    "yes as a key": (GOOD.replace("duration_s: 10", "duration_s: 10\n  yes: 1"), "'yes'"),
    "on as a key": (GOOD.replace("{cc: cubic}", "{cc: cubic, on: 1}"), "'on'"),
    "null key": (GOOD.replace("duration_s: 10", "duration_s: 10\n  ~: 1"), "quote it"),
    "list as a key": (GOOD.replace("duration_s: 10", "duration_s: 10\n  ? [a]\n  : 1"), "must be text"),
    "empty matrix list": (matrix("{rtt_ms: []}"), "matrix.rtt_ms"),
    "matrix value not a list": (matrix("{rtt_ms: 5}"), "matrix.rtt_ms"),
    "matrix into nowhere": (matrix("{link.nope.x: [1]}"), "does not exist"),
    "matrix makes a bad variant": (matrix("{rtt_ms: [10, -1]}"), "link.rtt_ms"),
    "matrix flow start at end": (matrix("{flows.1.start_s: [2, 10]}"), "flows.1.start_s"),
    "top level a list": ("- 1\n- 2\n", "top level"),
    "not YAML": ("scenarios: [unclosed\n", "not valid YAML"),
    "tab indentation": ("scenarios:\n\tone: 1\n", "not valid YAML"),
    "scenario a string": ("scenarios: {one: hello}\n", "scenario one"),
    "flows empty": (GOOD.replace("[{cc: cubic}, {cc: bbr, count: 2, rtt_ms: 40, start_s: 2}]", "[]"), "flows"),
    "count 0": (GOOD.replace("count: 2", "count: 0"), "flows.1.count"),
    "unknown cc": (GOOD.replace("cc: cubic", "cc: cubic2"), "flows.0.cc"),
    "huge integer": (GOOD.replace("duration_s: 10", "duration_s: " + "9" * 5000), "line 4"),
    "rtt a list": (GOOD.replace("rtt_ms: 40", "rtt_ms: [40]"), "flows.1.rtt_ms"),
    "repetitions 0": (GOOD.replace("duration_s: 10", "duration_s: 10\n  repetitions: 0"), "repetitions"),
    "loss 100": (GOOD.replace("buffer_bdp: 1}", "buffer_bdp: 1, loss_pct: 100}"), "link.loss_pct"),
    "capture interval": (GOOD.replace("duration_s: 10", "duration_s: 10\n  capture: {ss_interval_ms: 1}"),
                         "capture.ss_interval_ms"),
    "scenario name with slash": (GOOD.replace("  one:", "  a/b:"), "name must be"),
    "empty file": ("", "no scenarios"),
    "over 1 MiB": (GOOD + "#" + "x" * (1 << 20) + "\n", "at most 1048576"),
    "control characters": (GOOD.replace("cubic}", "cu\x07bic}"), "not valid YAML"),
    "defaults a list": ("defaults: [1]\nscenarios: {one: {}}\n", "must be mappings"),
    # once accepted as nonsense
    "rate true": (GOOD.replace("rate_mbps: 20", "rate_mbps: true"), "link.rate_mbps: true is a yes/no value"),
    "loss yes": (GOOD.replace("buffer_bdp: 1}", "buffer_bdp: 1, loss_pct: yes}"), "link.loss_pct: true is a yes/no"),
    "count true": (GOOD.replace("count: 2", "count: true"), "flows.1.count: true is a yes/no"),
    "seed on": (GOOD.replace("duration_s: 10", "duration_s: 10\n  seed: on"), "key seed: true is a yes/no"),
    "aqm target true": (GOOD.replace("buffer_bdp: 1}", "buffer_bdp: 1, aqm: codel, aqm_params: {target_ms: true}}"),
                        "aqm_params.target_ms: true is a yes/no"),
    "octal rtt": (GOOD.replace("rtt_ms: 10,", "rtt_ms: 020,"), "020 reads as an octal number"),
    "sexagesimal duration": (GOOD.replace("duration_s: 10", "duration_s: 1:30"), "sexagesimal"),
    "sub-microsecond rtt": (GOOD.replace("rtt_ms: 10,", "rtt_ms: 1e-09,"), "link.rtt_ms"),
    "rtt finer than tc": (GOOD.replace("rtt_ms: 40", "rtt_ms: 40.0001"), "whole number of microseconds"),
    "rate steps 1 ns apart": (GOOD.replace("buffer_bdp: 1}", "buffer_bdp: 1, rate_schedule: [{at_s: 1, rate_mbps: 5}, "
                                                             "{at_s: 1.000000001, rate_mbps: 6}]}"),
                              "link.rate_schedule.1.at_s"),
    "rate step at 1 ns": (GOOD.replace("buffer_bdp: 1}", "buffer_bdp: 1, rate_schedule: [{at_s: 1e-9, rate_mbps: 5}]}"),
                          "link.rate_schedule.0.at_s"),
    "codel target above interval": (GOOD.replace("buffer_bdp: 1}", "buffer_bdp: 1, aqm: fq_codel, aqm_params: "
                                                                   "{target_ms: 200, interval_ms: 100}}"),
                                    "link.aqm_params.target_ms: 200 ms is not below interval_ms"),
    "numeric scenario name": (GOOD + "  123:\n    flows: [{cc: cubic}]\n", "key '123' reads as 123"),
    "1000-character name": (GOOD + "  " + "a" * 1000 + ":\n    flows: [{cc: cubic}]\n", "at most 64"),
    "matrix over repetitions": (matrix("{repetitions: [1, 2]}"), "matrix.repetitions: a run cannot vary"),
    "matrix over name": (matrix("{name: [a, b]}"), "matrix.name: a run cannot vary"),
    "matrix over expect": (matrix("{expect.0.claim: ['jain < 1']}"), "matrix.expect.0.claim: a run cannot vary"),
    "claim 1/0": (GOOD + "    expect: [{claim: 'jain < 1/0'}]\n", "divides by zero"),
    "claim 1 < 0": (GOOD + "    expect: [{claim: 'jain < 1 < 0'}]\n", "chain impossible"),
    "claim 0.6 < x < 0.4": (GOOD + "    expect: [{claim: '0.6 < share(bbr) < 0.4'}]\n", "chain impossible"),
    "startup_s of a kernel cc": (GOOD + "    expect: [{claim: 'startup_s(cubic) < 1'}]\n", "no Startup mode"),
    "1001-step schedule": (GOOD.replace("buffer_bdp: 1}", "buffer_bdp: 1, rate_schedule: [" + ", ".join(
        f"{{at_s: {0.001 * (i + 1):.3f}, rate_mbps: 5}}" for i in range(1001)) + "]}"), "link.rate_schedule"),
    "30 000 values": (matrix(numbers(30_000)), "more than 20000 values"),
}


HANG_GUARD_S = 10  # not a speed target: the slowest refusal took 1.0 s beside two UML guests and a test worker


@pytest.mark.parametrize("name", HOSTILE)
def test_each_hostile_file_is_one_line_exit_2(tmp_path, name):
    content, expected = HOSTILE[name]
    path = tmp_path / "exp.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    runner = CliRunner()
    for args in (["run", "one", "-f", str(path), "--dry-run"], ["list", "-f", str(path)]):
        started = time.perf_counter()
        result = runner.invoke(main, args)
        elapsed = time.perf_counter() - started
        assert result.exit_code == 2, (args, result.output, result.exception)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, lines
        assert str(path) in lines[0] and expected in lines[0], lines[0]
        assert result.stdout == ""
        assert elapsed < HANG_GUARD_S, f"{args[0]}: {elapsed:.2f} s"


def test_the_run_count_is_capped_across_scenarios_and_with_n(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(GOOD)
    result = CliRunner().invoke(main, ["run", "one", "-f", str(path), "-n", "100000000", "--dry-run"])
    assert result.exit_code == 2 and "100000000 runs" in result.stderr and "--force" in result.stderr
    path.write_text(matrix(f"{{rtt_ms: {numbers(60)}}}").replace("duration_s: 10",
                                                                  "duration_s: 10\n  repetitions: 100"))
    result = CliRunner().invoke(main, ["run", "one", "one", "-f", str(path), "--dry-run"])
    assert result.exit_code == 2 and "12000 runs in one invocation" in result.stderr
    assert CliRunner().invoke(main, ["list", "-f", str(path)]).exit_code == 0  # 6000 for the one scenario


def test_what_is_accepted_still_runs_exactly():
    """The hardening refuses only what was wrong: merge keys, a UTF-8 byte-order mark, fractional
    scenario lengths with whole-second flows, and the buffer notations one at a time still work."""
    text = ("defaults: &d\n  link: {rate_mbps: 5, rtt_ms: 10, buffer_bytes: 3000}\n  duration_s: 10.5\n"
            "scenarios:\n  one:\n    <<: *d\n    duration_s: 10.5\n"
            "    flows: [{cc: bbr1, params: {x: 4294967295}, start_s: 0.5}, {cc: reno, duration_s: 3}]\n"
            "    matrix: {buffer_bdp: [1, 2], flows.1.cc: [reno, cubic]}\n")
    experiments = parse_experiments(text, "exp.yaml")
    runs = expand(experiments, "one")
    assert [r.label for r in runs] == ["bufferbdp-1_f1.cc-reno", "bufferbdp-1_f1.cc-cubic",
                                       "bufferbdp-2_f1.cc-reno", "bufferbdp-2_f1.cc-cubic"]
    assert [f.duration_s for f in runs[0].flows] == [10.0, 3.0]


def test_cli_subprocess_one_line(tmp_path):
    """The same through a real process: no traceback reaches the terminal."""
    path = tmp_path / "exp.yaml"
    path.write_text("scenarios: &s {one: *s}\n")
    result = subprocess.run([sys.executable, "-m", "cctest", "list", "-f", str(path)], capture_output=True,
                            text=True, cwd=REPO)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def _one_line_or_valid(text: str) -> None:
    """The property: parsing and expanding either succeed or raise one ScenarioError line."""
    try:
        experiments = parse_experiments(text, "fuzz.yaml")
        for name in experiments.scenarios:
            expand(experiments, name)
    except ScenarioError as error:
        message = str(error)
        assert message.startswith("fuzz.yaml") and "\n" not in message


# Values a hostile file might hold anywhere: every YAML scalar kind, the extremes, nesting.
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
    st.sampled_from(["cubic", "bbr1", "reno", "link.rate_mbps", "flows.0.cc", "1e-9", ".inf", "yes"]),
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=12)
KEYS = {
    "link": ["rate_mbps", "rtt_ms", "buffer_bdp", "buffer_bytes", "loss_pct", "bdp_rtt_ms"],
    "flow": ["cc", "count", "rtt_ms", "start_s", "duration_s", "params"],
    "scenario": ["duration_s", "repetitions", "seed", "matrix", "capture", "description"],
}


@st.composite
def mutated_experiments(draw) -> str:
    """The good file with keys set to random values, dropped or added (schema-aware mutations)."""
    doc = yaml.safe_load(GOOD)
    scenario = doc["scenarios"]["one"]
    link = doc["defaults"]["link"]
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.sampled_from(["link", "flow", "scenario", "matrix"]))
        if where == "link":
            link[draw(st.sampled_from(KEYS["link"]))] = draw(values)
        elif where == "flow":
            flows = scenario["flows"]
            flows[draw(st.integers(0, len(flows) - 1))][draw(st.sampled_from(KEYS["flow"]))] = draw(values)
        elif where == "scenario":
            scenario[draw(st.sampled_from(KEYS["scenario"]))] = draw(values)
        else:
            key = draw(st.sampled_from(["rate_mbps", "link.rtt_ms", "buffer_bdp", "flows.0.cc", "flows.1.start_s",
                                        "duration_s", "flows.0", "nope"]))
            if not isinstance(scenario.get("matrix"), dict):
                scenario["matrix"] = {}
            scenario["matrix"][key] = draw(st.lists(values, max_size=4) | values)
    return yaml.safe_dump(doc, allow_unicode=True)


@settings(max_examples=300, deadline=HANG_GUARD_S * 1000, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_experiments())
def test_property_mutated_files_validate_or_fail_in_one_line(text):
    _one_line_or_valid(text)


@settings(max_examples=300, deadline=HANG_GUARD_S * 1000)
@given(st.lists(st.sampled_from(list("{}[]:,-&*!|>'\"#%@`?\n\t ab1.eE+~<") + ["yes", "<<", ".inf", "&a ", "*a"]),
                max_size=120).map("".join))
def test_property_random_yaml_text_fails_in_one_line(text):
    _one_line_or_valid(text)


def test_the_values_expansion_builds_are_capped_before_it_builds_them(tmp_path, monkeypatch):
    """A 1000-step schedule x 200 variants is 600 000 values to copy and validate: refused in one
    line before any variant is built (9 900 steps x 100 variants once took 8.5 s and 0.9 GB)."""
    import cctest.model.plan as plan

    steps = ", ".join(f"{{at_s: {0.001 * (i + 1):.3f}, rate_mbps: 5}}" for i in range(1000))
    path = tmp_path / "exp.yaml"
    path.write_text(GOOD.replace("buffer_bdp: 1}", f"buffer_bdp: 1, rate_schedule: [{steps}]}}")
                    + f"    matrix: {{rtt_ms: {numbers(200)}}}\n")
    monkeypatch.setattr(plan, "validate_scenario", lambda *a: pytest.fail("a variant was built"))
    for args in (["list", "-f", str(path)], ["run", "one", "-f", str(path), "--dry-run"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, result.output
        assert "values in all" in result.stderr and "--force" in result.stderr
        assert len(result.stderr.splitlines()) == 1


def test_a_shard_count_of_a_billion_answers_at_once(tmp_path, monkeypatch):
    """`--shard 1/1000000000` built a billion empty lists; the shards beyond the runs are never built."""
    import cctest.model.plan as plan

    built = []
    real = plan.split_for_vms
    monkeypatch.setattr(plan, "split_for_vms", lambda specs, vms, **kw: built.append(vms) or real(specs, vms, **kw))
    path = tmp_path / "exp.yaml"
    path.write_text(matrix("{rtt_ms: [10, 20, 30]}"))
    result = CliRunner().invoke(main, ["run", "one", "-f", str(path), "--shard", "1/1000000000", "--dry-run"])
    assert result.exit_code == 0 and "shard 1/1000000000: 1 of 3 runs" in result.output, result.output
    result = CliRunner().invoke(main, ["run", "one", "-f", str(path), "--shard", "1000000000/1000000000", "--dry-run"])
    assert result.exit_code == 0 and "0 of 3 runs" in result.output
    assert built == [3, 3]
    result = CliRunner().invoke(main, ["run", "one", "-f", str(path), "--shard", "1/" + "9" * 5000, "--dry-run"])
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1 and "Traceback" not in result.output


# --- text from the file reaches the terminal as written: never markup, never an escape -------------

MARKUP = r'[/] [see fig.3] [bold]x\e[2J\u202e'


def test_show_prints_the_files_text_as_written(tmp_path):
    """`[/]` gave a traceback, `[see fig.3]` vanished, escapes and bidi overrides reached the terminal."""
    exp = tmp_path / "exp.yaml"
    exp.write_text(GOOD.replace("  one:\n", f'  one:\n    description: "{MARKUP}"\n')
                   + f'    expect: [{{claim: "jain > 0.5", note: "{MARKUP}"}}]\n')
    result = CliRunner().invoke(main, ["show", "one", "-f", str(exp)], color=True)
    assert result.exit_code == 0, result.output
    assert result.output.count("[/] [see fig.3] [bold]x\\x1b[2J\\u202e") == 2, result.output
    assert "\x1b[2J" not in result.output and "\u202e" not in result.output


MATRIX = GOOD + "    matrix: {buffer_bdp: [1, 2]}\n"


@pytest.mark.parametrize("args, message", [
    (["--only", "buffer_bdp=true"], "--only buffer_bdp=True: not one of its values; allowed: 1, 2"),
    (["--first-repetition", str(2**64)], "--first-repetition"),
    (["--first-repetition", str(2**64 - 1)], "a run's seed is at most 2**64 - 1"),  # seed 1 + 2**64 - 1
])
def test_run_refuses_booleans_for_numbers_and_seeds_beyond_64_bits(tmp_path, args, message):
    exp = tmp_path / "exp.yaml"
    exp.write_text(MATRIX)
    result = CliRunner().invoke(main, ["run", "one", "-f", str(exp), "--dry-run", "--json", *args])
    assert result.exit_code == 2, result.output
    assert len(result.stderr.splitlines()) == 1 and message in result.stderr, result.stderr


def test_a_claim_where_boolean_is_refused_for_a_numeric_matrix_key(tmp_path):
    with pytest.raises(ScenarioError, match="where buffer_bdp: True is not among the matrix's values"):
        parse_experiments(MATRIX + "    expect: [{claim: 'jain > 0', where: {buffer_bdp: true}}]\n", "x.yaml")


# --- include: and suite files ------------------------------------------------------------------

SUITE = ('suite: {tag: paper-005, title: "005: A paper"}\n'
         "scenarios:\n  five:\n    tags: [paper-005]\n    flows: [{cc: cubic}]\n")
WITH_SUITE = GOOD + "include: [suites/paper-005.yaml]\n"


def including(*entries: str) -> str:
    return GOOD + f"include: [{', '.join(entries)}]\n"


def suite(tag: str = "paper-005", header: str = "", scenarios: str = "", **keys: str) -> str:
    head = header or f'suite: {{tag: {tag}, title: "A paper"}}\n'
    body = scenarios or f"  five:\n    tags: [{tag}]\n    flows: [{{cc: cubic}}]\n"
    return head + "".join(f"{k}: {v}\n" for k, v in keys.items()) + "scenarios:\n" + body


BIG_COMMENT = "# " + "x" * 600_000 + "\n"  # two of these are more than one file may hold in all
# name -> (files under the experiments file's folder, the file the line names, what it must contain)
HOSTILE_SUITES: dict[str, tuple[dict[str, str], str, str]] = {
    "includes itself": ({"exp.yaml": including("exp.yaml")}, "exp.yaml", "includes itself"),
    "includes itself by another name": ({"exp.yaml": including("./sub/../exp.yaml"), "sub/x": ""}, "exp.yaml",
                                        "includes itself"),
    "a cycle through a suite file": ({"exp.yaml": WITH_SUITE,
                                      "suites/paper-005.yaml": suite(include="[../exp.yaml]")},
                                     "suites/paper-005.yaml", "unknown top-level key include"),
    "the same suite twice": ({"exp.yaml": including("suites/paper-005.yaml", "suites/./paper-005.yaml"),
                              "suites/paper-005.yaml": SUITE}, "exp.yaml", "include.1"),
    "a missing include": ({"exp.yaml": WITH_SUITE}, "exp.yaml", "include.0: suites/paper-005.yaml: no such file"),
    "an absolute include": ({"exp.yaml": including("/etc/hostname")}, "exp.yaml", "an absolute path"),
    "an include outside the folder": ({"exp.yaml": including("../outside.yaml"), "../outside.yaml": SUITE},
                                      "exp.yaml", "outside the experiments file's folder"),
    "a folder without suite files": ({"exp.yaml": including("suites"), "suites/x": ""}, "exp.yaml",
                                     "include.0: suites: a folder without a suite file"),
    "a folder of 33 suite files": ({"exp.yaml": including("suites/"), **{f"suites/paper-{i:03}.yaml": SUITE
                                                                         for i in range(33)}},
                                   "exp.yaml", "a folder of more than 32 suite files"),
    "a file and its folder": ({"exp.yaml": including("suites/paper-005.yaml", "suites/"),
                               "suites/paper-005.yaml": SUITE}, "exp.yaml",
                              "include.1: suites/paper-005.yaml: the file include.0 names already"),
    "a suite file named after another tag": ({"exp.yaml": WITH_SUITE, "suites/paper-005.yaml": suite("paper-006")},
                                             "suites/paper-005.yaml", "a suite file is named after its tag"),
    "include not a list": ({"exp.yaml": GOOD + "include: suites/paper-005.yaml\n"}, "exp.yaml",
                           "key include: a list of suite files"),
    "include a number": ({"exp.yaml": including("5")}, "exp.yaml", "include.0: 5: an entry is a file's path"),
    "33 includes": ({"exp.yaml": including(*[f"s{i}.yaml" for i in range(33)])}, "exp.yaml", "at most 32"),
    "a scenario in two files": ({"exp.yaml": WITH_SUITE, "suites/paper-005.yaml": suite(
        scenarios="  one:\n    tags: [paper-005]\n    flows: [{cc: cubic}]\n")}, "suites/paper-005.yaml",
        "scenario one: defined already in"),
    "a scenario in two suites": ({"exp.yaml": including("suites/paper-005.yaml", "suites/paper-006.yaml"),
                                  "suites/paper-005.yaml": SUITE,
                                  "suites/paper-006.yaml": suite("paper-006", scenarios=(
                                      "  five:\n    tags: [paper-006]\n    flows: [{cc: cubic}]\n"))},
                                 "suites/paper-006.yaml", "scenario five: defined already in"),
    "a suite tag no scenario carries": ({"exp.yaml": WITH_SUITE, "suites/paper-005.yaml": suite(
        scenarios="  five:\n    tags: [quick-005]\n    flows: [{cc: cubic}]\n")}, "suites/paper-005.yaml",
        "suite.tag: no scenario of the file carries paper-005"),
    "a suite tag that is no paper tag": ({"exp.yaml": WITH_SUITE, "suites/paper-005.yaml": suite("paper-5")},
                                         "suites/paper-005.yaml", "suite.tag: 'paper-5' is no suite tag"),
    "a suite without a title": ({"exp.yaml": WITH_SUITE,
                                 "suites/paper-005.yaml": suite(header="suite: {tag: paper-005}\n")},
                                "suites/paper-005.yaml", "suite.title"),
    "a two-line title": ({"exp.yaml": WITH_SUITE,
                          "suites/paper-005.yaml": suite(header='suite: {tag: paper-005, title: "a\\nb"}\n')},
                         "suites/paper-005.yaml", "suite.title"),
    "an unknown suite key": ({"exp.yaml": WITH_SUITE, "suites/paper-005.yaml": suite(
        header='suite: {tag: paper-005, title: "A", titel: "B"}\n')}, "suites/paper-005.yaml",
        "suite.titel: unknown key; did you mean title?"),
    "a suite file without its header": ({"exp.yaml": WITH_SUITE, "suites/paper-005.yaml": "scenarios: {}\n"},
                                        "suites/paper-005.yaml", "key suite: missing"),
    "a suite file with defaults": ({"exp.yaml": WITH_SUITE, "suites/paper-005.yaml": suite(defaults="{}")},
                                   "suites/paper-005.yaml", "unknown top-level key defaults"),
    "a suite file without scenarios": ({"exp.yaml": WITH_SUITE,
                                        "suites/paper-005.yaml": 'suite: {tag: paper-005, title: "A"}\n'},
                                       "suites/paper-005.yaml", "key scenarios"),
    "two suites of one tag": ({"exp.yaml": including("suites/paper-005.yaml", "again/paper-005.yaml"),
                               "suites/paper-005.yaml": SUITE, "again/paper-005.yaml": suite(scenarios=(
                                   "  again:\n    tags: [paper-005]\n    flows: [{cc: cubic}]\n"))},
                              "again/paper-005.yaml", "one file per suite"),
    "another suite's tag": ({"exp.yaml": including("suites/paper-005.yaml", "suites/paper-006.yaml"),
                             "suites/paper-005.yaml": suite(scenarios=(
                                 "  five:\n    tags: [paper-005]\n    flows: [{cc: cubic}]\n"
                                 "  six-copy:\n    tags: [quick-006]\n    flows: [{cc: cubic}]\n")),
                             "suites/paper-006.yaml": suite("paper-006", scenarios=(
                                 "  six:\n    tags: [paper-006]\n    flows: [{cc: cubic}]\n"))},
                            "suites/paper-005.yaml", "scenario six-copy: key tags: quick-006 is the suite of"),
    "a suite's tag outside its file": ({"exp.yaml": WITH_SUITE.replace("flows:", "tags: [paper-005]\n    flows:"),
                                        "suites/paper-005.yaml": SUITE}, "exp.yaml",
                                       "scenario one: key tags: paper-005 is the suite of"),
    "a bad scenario in a suite": ({"exp.yaml": WITH_SUITE, "suites/paper-005.yaml": SUITE.replace(
        "{cc: cubic}", "{cc: cubic, rtt_ms: .inf}")}, "suites/paper-005.yaml", "scenario five: key flows.0.rtt_ms"),
    "bad YAML in a suite": ({"exp.yaml": WITH_SUITE, "suites/paper-005.yaml": "suite: [\n"},
                            "suites/paper-005.yaml", "not valid YAML"),
    "bytes split over files": ({"exp.yaml": BIG_COMMENT + WITH_SUITE,
                                "suites/paper-005.yaml": BIG_COMMENT + SUITE}, "suites/paper-005.yaml",
                               "at most 1048576 bytes in all) is at most"),
    "values split over files": ({"exp.yaml": matrix(f"{{rtt_ms: {numbers(2_000)}}}") + WITH_SUITE.removeprefix(GOOD),
                                 "suites/paper-005.yaml": SUITE + f"    matrix: {{rtt_ms: {numbers(19_000)}}}\n"},
                                "suites/paper-005.yaml", "more than 17"),
}


@pytest.mark.parametrize("name", HOSTILE_SUITES)
def test_each_hostile_include_or_suite_is_one_line_exit_2_naming_its_file(tmp_path, name):
    files, named, expected = HOSTILE_SUITES[name]
    folder = tmp_path / "lab"
    for relative, text in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    path = folder / "exp.yaml"
    for args in (["run", "one", "-f", str(path), "--dry-run"], ["list", "-f", str(path)]):
        started = time.perf_counter()
        result = CliRunner().invoke(main, args)
        elapsed = time.perf_counter() - started
        assert result.exit_code == 2, (args, result.output, result.exception)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, lines
        assert lines[0].removeprefix("error: ").startswith(str(folder / named)) and expected in lines[0], lines[0]
        assert result.stdout == ""
        assert elapsed < HANG_GUARD_S, f"{args[0]}: {elapsed:.2f} s"


def test_an_escaping_symlink_is_refused_as_outside_the_folder(tmp_path):
    (tmp_path / "lab" / "suites").mkdir(parents=True)
    (tmp_path / "outside.yaml").write_text(SUITE)
    (tmp_path / "lab" / "suites" / "paper-005.yaml").symlink_to(tmp_path / "outside.yaml")
    (tmp_path / "lab" / "exp.yaml").write_text(WITH_SUITE)
    result = CliRunner().invoke(main, ["list", "-f", str(tmp_path / "lab" / "exp.yaml")])
    assert result.exit_code == 2 and "include.0: suites/paper-005.yaml: outside" in result.stderr


def test_a_suite_file_named_as_the_experiments_file_is_refused(tmp_path):
    (tmp_path / "paper-005.yaml").write_text(SUITE)
    result = CliRunner().invoke(main, ["list", "-f", str(tmp_path / "paper-005.yaml")])
    assert result.exit_code == 2 and "a suite file (it has suite:)" in result.stderr


def test_include_in_a_text_without_a_file_is_refused():
    with pytest.raises(ScenarioError, match=r"^x\.yaml: key include: its paths are relative"):
        parse_experiments(WITH_SUITE, "x.yaml")


def test_a_valid_suite_adds_its_scenarios_title_and_file(tmp_path):
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "paper-005.yaml").write_text(SUITE)
    (tmp_path / "exp.yaml").write_text(WITH_SUITE)
    from cctest.model.scenario import load_experiments

    experiments = load_experiments(tmp_path / "exp.yaml")
    assert list(experiments.scenarios) == ["one", "five"]  # the experiments file's first, then each suite's
    assert experiments.suites["paper-005"].title == "005: A paper"
    assert experiments.file_of("five") == str(tmp_path / "suites" / "paper-005.yaml")
    assert experiments.get("five").duration_s == 10  # the experiments file's defaults apply


def test_a_folder_includes_its_suite_files_in_name_order(tmp_path):
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "paper-006.yaml").write_text(suite("paper-006", scenarios=(
        "  six:\n    tags: [paper-006]\n    flows: [{cc: cubic}]\n")))
    (tmp_path / "suites" / "paper-005.yaml").write_text(SUITE)
    (tmp_path / "suites" / "notes.txt").write_text("not a suite")
    (tmp_path / "exp.yaml").write_text(including("suites/"))
    from cctest.cli.completion import complete_scenarios
    from cctest.model.scenario import load_experiments

    experiments = load_experiments(tmp_path / "exp.yaml")
    assert list(experiments.suites) == ["paper-005", "paper-006"]
    assert list(experiments.scenarios) == ["one", "five", "six"]
    assert experiments.file_of("six") == str(tmp_path / "suites" / "paper-006.yaml")
    context = SimpleNamespace(params={"experiments_file": str(tmp_path / "exp.yaml")})
    assert complete_scenarios(context, None, "") == ["one", "five", "six"]
