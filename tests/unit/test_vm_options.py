"""--vm's clock options and the virtme-ng command line they make (pure: nothing is booted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cctest.emulation import vm
from tests import REPO


def test_virtual_clock_is_the_default_and_runs_one_vcpu_on_the_instruction_counter(monkeypatch):
    monkeypatch.setattr(vm, "vng_path", lambda: "vng")
    clock = vm.VMClock.choose(None, None, kvm=False)
    assert (clock.kind, clock.shift, clock.vcpus) == ("virtual", 0, 1)
    cmd = vm.vng_command(Path("/boot/vmlinuz-x"), ["true"], [Path("/out")], clock)
    assert cmd[cmd.index("--qemu-opts") + 1] == "-icount shift=0,sleep=off"
    assert cmd[cmd.index("--cpus") + 1] == "1" and "--disable-kvm" in cmd
    # the guest learns its clock, for meta.json's vm object
    assert "CCTEST_VM_CLOCK=virtual" in cmd[-1] and "CCTEST_VM_ICOUNT_SHIFT=0" in cmd[-1]


def test_wall_clock_and_kvm_keep_the_hosts_time(monkeypatch):
    monkeypatch.setattr(vm, "vng_path", lambda: "vng")
    wall = vm.VMClock.choose("wall", None, kvm=False)
    cmd = vm.vng_command(Path("/boot/vmlinuz-x"), ["true"], [Path("/out")], wall)
    assert "--qemu-opts" not in cmd and cmd[cmd.index("--cpus") + 1] == "2"
    kvm = vm.VMClock.choose(None, None, kvm=True)
    assert kvm.kind == "wall" and "--disable-kvm" not in vm.vng_command(Path("/k"), ["true"], [], kvm)
    shifted = vm.VMClock.choose(None, 2, kvm=False)
    assert shifted.qemu_opts() == "-icount shift=2,sleep=off"


def test_a_long_guest_command_goes_through_a_file_the_kernel_command_line_only_names(monkeypatch, tmp_path):
    """vng puts --exec base64-encoded on the kernel command line, which x86 cuts at 2048 bytes; a
    sweep of ~30 scenarios was cut and its guest idled until killed."""
    monkeypatch.setattr(vm, "vng_path", lambda: "vng")
    guest_cmd = ["python", "-m", "cctest", "run", *(f"scenario-{i:03d}" for i in range(200))]
    command_file = tmp_path / ".guest-command.sh"
    cmd = vm.vng_command(Path("/boot/vmlinuz-x"), guest_cmd, [tmp_path], vm.VMClock(), command_file=command_file)
    assert cmd[-2:] == ["--exec", f"sh {command_file}"]
    kernel_line = len(cmd[cmd.index("--append") + 1]) + len(cmd[-1]) * 4 // 3 + 400  # + virtme's own arguments
    assert kernel_line < 2048, kernel_line
    written = command_file.read_text()
    assert written.endswith(" ".join(guest_cmd) + "\n") and "CCTEST_VM_CLOCK=virtual" in written
    ran = subprocess.run(["sh", "-n", str(command_file)], capture_output=True, text=True)  # valid shell
    assert ran.returncode == 0, ran.stderr


@pytest.mark.parametrize("args, message", [
    (["--kvm", "--clock", "virtual"], "--kvm runs on the wall clock"),
    (["--icount-shift", "11"], "--icount-shift 11: allowed values are 0 to 10"),
    (["--icount-shift", "-1"], "--icount-shift -1: allowed values are 0 to 10"),
    (["--clock", "sundial"], "'sundial' is not one of 'virtual', 'wall'"),
])
def test_impossible_clock_options_are_bad_input(args, message):
    result = subprocess.run([sys.executable, "-m", "cctest", "run", "demo", "--vm", *args], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 2, result.stderr
    assert message in " ".join(result.stderr.split())
