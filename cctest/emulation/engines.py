"""The emulation engines `cctest run --vm` can boot, behind one small interface.

- qemu: a stock distro kernel in a virtme-ng VM on QEMU's instruction-counted clock (cctest/emulation/vm.py).
- uml: this project's User-Mode Linux build of the same 6.1 source in time-travel mode
  (cctest/emulation/uml.py, cctest/emulation/umlkernel.py): no hypervisor, boots in about a second, cheaper per guest
  second; not the stock kernel (HZ 100, one CPU, infinite CPU speed), and no bpftrace (captures
  read tracefs).

Each engine says which kernel release the guest runs and where the project's modules build for it,
boots a guest that runs one command (`cctest guest-run PLAN`) and stops it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from ..kernel.kmod import REPO_ROOT, release_of_kernel_image
from . import uml, umlkernel, umlshare, vm

ENGINES = ("qemu", "uml")
# `auto`: UML where its kernel is built (it agrees with QEMU within run-to-run spread and costs 3-5x
# less; docs/uml.md, "Equivalence with QEMU and cost"), else QEMU, which needs nothing built.
DEFAULT_ENGINE = "auto"
CHOICES = ("auto", *ENGINES)


@dataclass(frozen=True)
class Places:
    """Where one guest's cctest finds its interpreter and plan file and writes its runs and
    manifest, in the guest's own names; the host's names for the plan file (written before the
    guest boots) and the manifest, and for a run directory the manifest lists once the guest has
    ended."""

    python: str
    src: str
    plan: str
    out: str
    manifest: str
    host_plan: Path
    host_manifest: Path
    to_host: Callable[[str], Path]
    home: umlshare.Home | None = None
    python_flags: tuple[str, ...] = ()  # the interpreter's options for the guest's cctest

    def release(self) -> None:
        """Once the host has read the manifest: the guest's files gone (its runs are in --out)."""
        if self.home is not None:
            shutil.rmtree(self.home.path, ignore_errors=True)
        else:
            self.host_plan.unlink(missing_ok=True)
            self.host_manifest.unlink(missing_ok=True)


class Guest(Protocol):
    """A booted guest: its command's exit code, as subprocess.Popen gives one."""

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...


G = TypeVar("G", bound=Guest)


class Engine(Protocol[G]):
    """An engine's guests are its own (a QEMU process, a UML instance): it is handed back what it started."""

    name: str
    boot_per_run: bool  # a fresh guest, seeded with the run's seed, for every run

    def describe(self) -> str: ...
    def release(self) -> str: ...
    def module_build(self) -> tuple[Path | None, tuple[str, ...]]: ...
    def meta(self) -> dict: ...
    def places(self, out: Path, index: int) -> Places: ...
    def start(self, guest_cmd: list[str], places: Places, index: int, log: Path | None,
              seed: int | None = None, slot: int | None = None) -> G: ...
    def stop_all(self, guests: list[G]) -> None: ...
    def problems(self, guests: list[G]) -> list[str]: ...


class QemuEngine:
    name = "qemu"
    boot_per_run = False  # a boot costs tens of seconds, and the stock kernel takes no seed

    def __init__(self, kernel: Path, clock: vm.VMClock):
        self.kernel = kernel
        self.clock = clock

    def describe(self) -> str:
        return f"{self.kernel.name} in virtme-ng VM(s), {self.clock.describe()}"

    def release(self) -> str:
        return release_of_kernel_image(self.kernel)

    def module_build(self) -> tuple[Path | None, tuple[str, ...]]:
        return None, ()  # the distro's headers for the release (cctest/kernel/kmod.py)

    def meta(self) -> dict:
        return {"name": self.name, "kernel": {"image": str(self.kernel), "release": self.release()},
                "clock": self.clock.kind, "icount_shift": self.clock.shift if self.clock.kind == "virtual" else None}

    def places(self, out: Path, index: int) -> Places:
        """virtme-ng shares the host's root and --out at their own paths."""
        tag = f"{self.name}-{os.getpid()}-{index}"
        plan, manifest = out / f".plan-{tag}.json", out / f".manifest-{tag}.txt"
        manifest.unlink(missing_ok=True)
        return Places(python=sys.executable, src=str(REPO_ROOT), plan=str(plan), out=str(out), manifest=str(manifest),
                      host_plan=plan, host_manifest=manifest, to_host=Path)

    def start(self, guest_cmd: list[str], places: Places, index: int, log: Path | None,
              seed: int | None = None, slot: int | None = None) -> subprocess.Popen:
        # `seed` and `slot` are not used: QEMU guests are not pinned, and the stock kernel takes its
        # randomness from the VM's devices and CPU.
        # vm.start hands the guest its clock settings; the engine's own record comes as one more variable.
        return vm.start(self.kernel, guest_cmd, [Path(places.out)], self.clock, log=log,
                        extra_env={"CCTEST_ENGINE_META": json.dumps(self.meta())})

    def stop_all(self, guests: list[subprocess.Popen]) -> None:
        for guest in guests:  # Ctrl-C reached each VM's guest through the terminal or the signal
            vm.stop(guest)

    def problems(self, guests: list[subprocess.Popen]) -> list[str]:
        return []  # vng keeps no guest kernel log; the VM tests read the guest's dmesg themselves


class UmlEngine:
    name = "uml"
    boot_per_run = True  # a boot costs about a host second

    def __init__(self, build: umlkernel.KernelBuild, userspace: str | None = None):
        self.build = build
        self.userspace = userspace or umlkernel.SERIES[build.series].userspaces[0]  # ptrace or seccomp

    def describe(self) -> str:
        return (f"User-Mode Linux {self.build.release} (time-travel={uml.TIME_TRAVEL}: guest time advances only "
                f"through timers; one CPU; guest processes under {self.userspace}; each instance pinned to its own "
                "host CPU)")

    def release(self) -> str:
        return self.build.release

    def module_build(self) -> tuple[Path | None, tuple[str, ...]]:
        return self.build.tree, ("ARCH=um",)

    def meta(self) -> dict:
        # the mode only where the series has a choice: 6.1's record stays as it was (ptrace)
        mode = {"userspace": self.userspace} if len(umlkernel.SERIES[self.build.series].userspaces) > 1 else {}
        return {"name": self.name, "kernel": self.build.meta(), "time_travel": uml.TIME_TRAVEL, **mode}

    def guest_env(self, cpu: int | None = None, seed: int | None = None) -> dict[str, str]:
        """What the guest's cctest is told. `rng_seed`: the seed the guest's kernel booted with
        (None: the host's entropy); a seeded guest's calendar stays at its fixed start
        (CCTEST_VM_FIXED_CALENDAR: vmtime.sync_realtime)."""
        meta = {**self.meta(), "host_cpu": cpu, "rng_seed": seed}
        env = {"CCTEST_VM_CLOCK": "virtual", "CCTEST_VM_ICOUNT_SHIFT": "", "CCTEST_VM_VCPUS": "1",
               "CCTEST_VM_KVM": "0", "CCTEST_VM_ENGINE": self.name, "CCTEST_ENGINE_META": json.dumps(meta)}
        if seed is not None:
            env["CCTEST_VM_FIXED_CALENDAR"] = "1"
        return env

    def places(self, out: Path, index: int) -> Places:
        """A fresh home under --out (umlshare): the guest sees fixed paths only, and writes into an
        empty directory that the host merges into --out when the guest has ended."""
        home = umlshare.prepare(out.resolve(), index)
        return Places(python=umlshare.guest_python(), src=str(umlshare.GUEST_SRC), plan=home.guest(home.plan),
                      out=str(umlshare.GUEST_OUT), manifest=home.guest(home.manifest), host_plan=home.plan,
                      host_manifest=home.manifest, to_host=home.to_host, home=home,
                      python_flags=umlshare.GUEST_PYTHON_FLAGS)

    def start(self, guest_cmd: list[str], places: Places, index: int, log: Path | None,
              seed: int | None = None, slot: int | None = None) -> uml.Instance:
        home = places.home
        assert home is not None, "UML guests boot in a home made by places()"
        cpu = uml.cpu_for(index if slot is None else slot)
        # cctest imported from the checkout's fixed place, never through the venv's own record of it;
        # then the site directories, which the guest's `python -S` does not add itself (umlshare)
        python_path = ":".join([str(umlshare.GUEST_SRC), *umlshare.guest_site_dirs()])
        env = {"PATH": umlshare.guest_path(), "PYTHONPATH": python_path, **self.guest_env(cpu=cpu, seed=seed),
               **vm.host_clock_env(umlshare.GUEST_HOME), **vm.GUEST_PYTHON_ENV, **umlshare.guest_python_env()}
        return uml.start(self.build, guest_cmd, home, env, index=index, cpu=cpu,
                         log=log, echo=log is None, seed=seed, userspace=self.userspace)


    def stop_all(self, guests: list[uml.Instance]) -> None:
        for guest in guests:  # all asked first: they tear down in parallel
            guest.request_stop()
        for guest in guests:
            guest.stop()

    def problems(self, guests: list[uml.Instance]) -> list[str]:
        """Each guest's kernel log (kept as out/.uml-dmesg-<k>.txt) checked for warnings and oopses."""
        said = []
        for guest in guests:
            bad = guest.dmesg_problems()
            if bad is None:
                said.append(f"guest {guest.index} left no kernel log ({guest.dmesg_file})")
            elif bad:
                said.append(f"guest {guest.index}'s kernel log has {len(bad)} bad line(s), e.g. {bad[0].strip()!r} "
                            f"({guest.dmesg_file})")
        return said


def resolve(name: str, kernel: str | None, clock: vm.VMClock) -> str:
    """The engine `--engine auto` stands for: uml when its kernel is built and no QEMU-only option
    (--kernel, --clock wall, --kvm, --icount-shift) asks for QEMU; else qemu."""
    if name != "auto":
        return name
    qemu_asked = kernel or clock.kind != "virtual" or clock.kvm or clock.shift != vm.DEFAULT_ICOUNT_SHIFT
    return "uml" if not qemu_asked and umlkernel.find() is not None else "qemu"


def auto_reason(kernel: str | None, clock: vm.VMClock) -> str:
    """Why `--engine auto` stands for what `resolve` says, in words a user can act on."""
    if kernel or clock.kind != "virtual" or clock.kvm or clock.shift != vm.DEFAULT_ICOUNT_SHIFT:
        return "a QEMU option (--kernel, --clock wall, --kvm or --icount-shift) was given"
    if umlkernel.find() is not None:
        return "the UML kernel is built"
    return (f"no UML kernel is built for this checkout ({umlkernel.BUILD_SCRIPT.relative_to(umlkernel.REPO_ROOT)} "
            "builds it, about 10 min; UML costs 3-5x less host time)")


def choose(name: str, kernel: str | None, clock: vm.VMClock) -> Engine:
    """The engine `--engine` names (auto: as `resolve` says), ready to boot (its kernel found), or bad input."""
    name = resolve(name, kernel, clock)
    if name == "uml":
        if kernel:
            raise vm.VMOptionError("--kernel is for --engine qemu; the UML engine boots its own build "
                                   "(scripts/uml-kernel.sh)")
        if clock.kind != "virtual" or clock.kvm or clock.shift != vm.DEFAULT_ICOUNT_SHIFT:
            raise vm.VMOptionError("--clock, --icount-shift and --kvm are QEMU's; the UML engine always runs on "
                                   "its time-travel clock")
        build = umlkernel.require()
        problems = uml.host_problems()
        if problems:
            raise uml.UMLError("the UML engine cannot boot a guest here: " + "; ".join(problems))
        return UmlEngine(build, umlkernel.userspace(umlkernel.SERIES[build.series]))
    if name == "qemu":
        return QemuEngine(vm.pick_kernel(kernel), clock)
    raise vm.VMOptionError(f"--engine {name}: allowed values are {', '.join(CHOICES)}")
