"""Inside a cctest VM: which clock the guest runs on, and both times of every phase.

On the virtual clock a guest second and a host second differ (wall ≈ 3-6× guest time), so
meta.json's `vm` object records each phase in both. The guest reads the host's wall clock as the
modification time the host's file system gives a file on the writable 9p share when the guest
touches it: one small host I/O per phase boundary, never on the data path.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..model import record


def in_vm_env() -> dict | None:
    """The VM's clock settings as the host passed them (vm.VMClock.env), or None outside a VM."""
    clock = os.environ.get("CCTEST_VM_CLOCK")
    if not clock:
        return None
    shift = os.environ.get("CCTEST_VM_ICOUNT_SHIFT", "")
    return {"clock": clock, "icount_shift": int(shift) if shift else None,
            "vcpus": int(os.environ.get("CCTEST_VM_VCPUS", "0") or 0) or os.cpu_count(),
            "kvm": os.environ.get("CCTEST_VM_KVM") == "1"}


def host_wall_time() -> float | None:
    """The host's time.time(), read through the shared directory; None where there is none."""
    path = os.environ.get("CCTEST_HOST_CLOCK_FILE")
    if not path:
        return None
    try:
        if os.environ.get("CCTEST_VM_ENGINE") == "uml":
            # hostfs sets the times touch() asks for from the guest's clock; a file it creates gets
            # the host's (the host's open(O_CREAT) stamps it)
            fresh = Path(f"{path}.{os.getpid()}.{time.monotonic_ns()}")
            fresh.touch(exist_ok=False)
            try:
                return os.stat(fresh).st_mtime
            finally:
                fresh.unlink(missing_ok=True)
        # touch() sets the times to "now", which the file server takes from its own (the host's) clock
        Path(path).touch()
        return os.stat(path).st_mtime
    except OSError:
        return None


def guest_uptime() -> float:
    with open("/proc/uptime") as f:
        return float(f.read().split()[0])


def boot_times() -> dict | None:
    """How long the VM took to get here: guest seconds since its boot and host seconds since vng started."""
    started = os.environ.get("CCTEST_VM_BOOT_STARTED")
    host_now = host_wall_time()
    wall = round(host_now - float(started), 2) if started and host_now is not None else None
    return {"guest_s": round(guest_uptime(), 2), "wall_s": wall}


def vm_record(boot: dict | None) -> record.Vm | None:
    """The record's `vm`: the VM's clock settings as the host passed them and how long its boot
    took, or None outside a VM."""
    env = in_vm_env()
    if env is None:
        return None
    return record.Vm(**env, boot=record.Times(**boot) if boot is not None else None)


class PhaseClock:
    """Guest seconds of every phase (meta.json `phase_s`) and, in a VM, host seconds too."""

    def __init__(self, phase_s: dict[str, float], vm: record.Vm | None):
        self.phase_s = phase_s
        if vm is not None:
            vm.phases = {}
        self.vm_phases = vm.phases if vm is not None else None
        self.name: str | None = None
        self._guest0 = 0.0
        self._wall0: float | None = None

    def switch(self, name: str | None) -> None:
        """End the current phase (if any) and start `name` (None: just end it)."""
        guest = time.monotonic()
        wall = host_wall_time() if self.vm_phases is not None else None
        if self.name is not None:
            self.phase_s[self.name] = round(guest - self._guest0, 2)
            if self.vm_phases is not None:
                self.vm_phases[self.name] = record.Times(
                    guest_s=round(guest - self._guest0, 2),
                    wall_s=round(wall - self._wall0, 2) if wall is not None and self._wall0 is not None else None,
                )
        self.name, self._guest0, self._wall0 = name, guest, wall

    def rename(self, name: str) -> None:
        """The current phase turned out to be another (a reused topology is reshaped, not built)."""
        self.name = name


def add_totals(vm: record.Vm | None) -> None:
    """The run's guest and host seconds over all its phases, and how many host seconds a guest
    second cost (the price of the virtual clock; about 1 on the wall clock)."""
    if vm is None or not vm.phases:
        return
    phases = vm.phases.values()
    guest = sum(p.guest_s or 0.0 for p in phases)
    walls = [p.wall_s for p in phases]
    wall = sum(w for w in walls if w is not None) if all(w is not None for w in walls) else None
    vm.guest_s = round(guest, 2)
    vm.wall_s = round(wall, 2) if wall is not None else None
    vm.wall_per_guest = round(wall / guest, 2) if wall is not None and guest > 0 else None


# On the virtual clock with sleep=off, while the guest waits idle for a read or write on the 9p
# share, QEMU jumps guest time to the next timer: a process start from the shared root file system
# or bpftrace loading LLVM can take tens of guest seconds for one of host time (`git rev-parse`
# hit a 10 s timeout). Network timers are unaffected, and while flows run the next timer is always
# near. Guards against hangs therefore get this much more guest time there.
HOST_IO_TIMEOUT_SCALE = 20


def stretch(timeout_s: float) -> float:
    """A timeout on work that reads or writes host files, in this machine's seconds."""
    env = in_vm_env()
    return timeout_s * HOST_IO_TIMEOUT_SCALE if env and env["clock"] == "virtual" else timeout_s


def fixed_calendar() -> bool:
    """A seeded UML guest: its calendar starts at a fixed date and must stay a function of the seed
    (setting the clock mixes the time into the kernel's random number generator)."""
    return os.environ.get("CCTEST_VM_FIXED_CALENDAR") == "1"


def calendar_now() -> float:
    """Now, for run ids and timestamps: the host's time where the guest's calendar is fixed."""
    host = host_wall_time() if fixed_calendar() else None
    return time.time() if host is None else host


def sync_realtime() -> None:
    """Set the guest's calendar clock from the host's, so run ids and timestamps read as host time
    (the virtual clock's idle jumps put a guest minutes ahead during boot alone); not where the
    calendar is fixed (calendar_now reads the host's instead)."""
    if fixed_calendar():
        return
    host = host_wall_time()
    if host is not None:
        try:
            time.clock_settime(time.CLOCK_REALTIME, host)
        except (OSError, PermissionError):
            pass
