"""Errors carry their exit code: every command turns a cctest error into one line on stderr and
the code its class stands for (2 bad input, 1 a failed run or environment, 3 failed claims), in
one place (cctest.base.errors). A --kernel that is no kernel image is bad input, found before anything
is set up."""

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cctest.analysis.load import ReportInputError
from cctest.base import errors
from cctest.cli.main import main
from cctest.emulation import vm
from cctest.host import journal
from cctest.host.net.topology import TopologyError
from cctest.host.net.traffic import TrafficError
from cctest.kernel import kmod
from cctest.model.scenario import ScenarioError
from cctest.run import cleanup, runner, session
from tests import REPO
from tests.unit.test_claims import recorded_with_claims  # noqa: F401 (a fixture)
from tests.unit.test_scenario import GOOD


@pytest.fixture
def experiments(tmp_path) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(GOOD)
    return path


def one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_the_classes_carry_the_codes():
    bad_input = (ScenarioError, kmod.BadParameter, vm.VMOptionError, session.NativeUnavailable,
                 journal.RunLockedError, journal.JournalError, cleanup.CleanRefused, ReportInputError)
    failed = (kmod.ModuleError, vm.VMError, session.SessionError, runner.RunFailed, TopologyError, TrafficError)
    assert {cls.__name__: cls("x").exit_code for cls in bad_input} == {cls.__name__: 2 for cls in bad_input}
    assert {cls.__name__: cls("x").exit_code for cls in failed} == {cls.__name__: 1 for cls in failed}
    assert errors.ClaimsFailed("x").exit_code == 3
    # tool output quoted into a message cannot break the one line
    assert str(errors.CctestError("tc failed:\nRTNETLINK answers: File exists\r\n")) == \
        "tc failed:\\nRTNETLINK answers: File exists\\r\\n"


def _kernel_like(path: Path, magic: bool) -> Path:
    data = bytearray(4096)
    if magic:
        data[0x202:0x206] = b"HdrS"
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("case, expected", [
    ("missing", "no such file or directory"),
    ("directory", "is a directory"),
    ("not a kernel", "not a bootable kernel image"),
    ("release unknown", "its kernel release cannot be told"),
])
def test_a_bad_kernel_path_is_one_line_exit_2(tmp_path, experiments, case, expected):
    kernel = {"missing": lambda: tmp_path / "vmlinuz-nope",
              "directory": lambda: tmp_path,
              "not a kernel": lambda: experiments,
              "release unknown": lambda: _kernel_like(tmp_path / "image", magic=True)}[case]()
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", "one", "-f", str(experiments), "--vm", "--kernel", str(kernel),
                                       "--out", str(out), "--dry-run"])
    assert result.exit_code == 2, (result.output, result.exception)
    line = one_error_line(result)
    assert f"--kernel {kernel}" in line and expected in line, line
    assert result.stdout == "" and not out.exists()


def test_a_real_kernel_image_passes_and_a_bad_one_fails_in_a_real_process(tmp_path, experiments):
    """Through a real process: one line and no traceback; a stock image (when /boot has one) is accepted."""
    bad = _kernel_like(tmp_path / "vmlinuz-6.1.0-1-amd64", magic=False)
    result = subprocess.run([sys.executable, "-m", "cctest", "run", "one", "-f", str(experiments), "--vm",
                             "--kernel", str(bad), "--dry-run"], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "not a bootable kernel image" in result.stderr
    stock = sorted(Path("/boot").glob("vmlinuz-*"))
    if stock:
        assert vm.checked_kernel(str(stock[0])) == stock[0]


@pytest.mark.parametrize("args, code, expected", [
    (["run", "one", "--shard", "3/2", "--dry-run"], 2, "--shard 3/2"),
    (["run", "one", "-n", "0", "--dry-run"], 2, "'-n'"),  # Click's own check, one line too
    (["run", "--dry-run"], 2, "name at least one scenario"),
    (["run", "one", "--tag", "nosuch", "--dry-run"], 2, "no scenario tagged nosuch"),
    (["list", "--tag", "nosuch"], 2, "no scenario tagged nosuch"),
    (["nosuch"], 2, "No such command"),
    (["modules", "load", "bbr1", "x"], 2, "key=integer"),
    (["modules", "build", "-r", "0.0.0-none"], 1, "kernel headers for 0.0.0-none not found"),
    (["report", "{tmp}/missing"], 2, "missing: no such file or directory"),
    (["report"], 2, "give at least one run"),
    (["check", "{tmp}"], 2, "no run directories"),
])
def test_every_command_fails_in_one_line_with_its_code(tmp_path, experiments, args, code, expected):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    if args[0] in ("run", "list"):
        args += ["-f", str(experiments)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == code, (result.output, result.exception)
    assert expected in one_error_line(result)
    assert result.stdout == ""


def test_failed_claims_end_in_one_error_line_exit_3(recorded_with_claims, tmp_path):  # noqa: F811
    result = CliRunner().invoke(main, ["check", str(recorded_with_claims), "--recorded-claims",
                                       "-o", str(tmp_path / "c.json")])
    assert result.exit_code == 3, result.output
    assert result.stderr.strip().splitlines()[-1] == ("error: claims: 1 pass, 1 fail, 0 known-fail, 0 unexpected-pass, "
                                                      "0 inconclusive, 0 incomplete, 0 not-run")


def test_an_unexpected_exception_keeps_its_traceback(tmp_path, experiments):
    """Only cctest's own errors become one line: anything else escaping a run is a bug, and Python
    itself reports it (its traceback on stderr, exit 1), never a one-line "run failed"."""
    script = (
        "import sys\n"
        "from cctest.run import session\n"
        "from cctest.cli.main import main\n"
        "def bug(specs, opts, console):\n"
        "    raise ZeroDivisionError('a bug in the session')\n"
        "session.run_in_vm = bug\n"
        f"sys.argv = ['cctest', 'run', 'one', '-f', {str(experiments)!r}, '--vm', '--out', {str(tmp_path / 'out')!r}]\n"
        "main()\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("Traceback (most recent call last):"), result.stderr
    assert "in _execute" in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "ZeroDivisionError: a bug in the session"
    assert "run failed" not in result.stderr and "error: " not in result.stderr
