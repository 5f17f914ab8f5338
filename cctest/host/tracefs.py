"""tracefs: the mount the tracers need (mounted by cctest only if absent, and then unmounted
again), and a recorder of trace events through an instance of our own (the run's tracer where
bpftrace cannot run, e.g. on the UML engine: captures/tracer.py).

A mount cctest made is journaled before it is made, so `cctest clean` unmounts it after a SIGKILL;
one that was there before the run is never touched.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, Protocol

from ..base.errors import CctestError


class Journaling(Protocol):
    """What a Recorder tells the run's journal (host/journal.py)."""

    def add_tracefs_instance(self, name: str) -> None: ...

    def tracefs_instance_removed(self, name: str) -> None: ...

MOUNTPOINT = Path("/sys/kernel/tracing")
# Where a mounted tracefs is found: its own mountpoint, or debugfs's automount of it.
CANDIDATES = (MOUNTPOINT, Path("/sys/kernel/debug/tracing"))


class TracefsError(CctestError):
    pass


def mounted() -> Path | None:
    for path in CANDIDATES:
        if (path / "events").is_dir():
            return path
    return None


def is_tracefs_mount(path: Path, mounts: Path = Path("/proc/self/mounts")) -> bool:
    try:
        lines = mounts.read_text().splitlines()
    except OSError:
        return False
    return any(fields[1:3] == [str(path), "tracefs"] for fields in (line.split() for line in lines))


def mount_if_absent(journal_mount: Callable[[str], None] | None = None) -> Path | None:
    """Mount tracefs if none is reachable. Returns the mountpoint if this call mounted it (the caller
    unmounts it), None if one was there already or it cannot be mounted (bpftrace then says so).
    `journal_mount(path)` records the mount before it is made: a SIGKILL mid-mount leaves it named."""
    if mounted() is not None:
        return None
    if journal_mount is not None:
        journal_mount(str(MOUNTPOINT))
    if subprocess.run(["mount", "-t", "tracefs", "nodev", str(MOUNTPOINT)], capture_output=True).returncode != 0:
        return None
    return MOUNTPOINT


def unmount(path: Path) -> bool:
    """Unmount a tracefs mount cctest made. Returns whether there was one to unmount; TracefsError if
    it stays (busy: some tracer still holds it)."""
    if not is_tracefs_mount(path):
        return False
    result = subprocess.run(["umount", str(path)], capture_output=True, text=True)
    if result.returncode != 0:
        raise TracefsError(f"umount {path}: {result.stderr.strip() or 'failed'}")
    return True


# -- recording events through a tracefs instance (no bpftrace needed: the UML engine has none) --

INSTANCE_PREFIX = "cctest-"
TRACE_CLOCK = "mono"  # CLOCK_MONOTONIC, the run's time base; the default `local` ticks in jiffies on UML
BUFFER_KB = 8192  # per CPU: seconds of events at a few thousand a second between two reads
DRAIN_TIMEOUT_S = 10.0


def is_instance_name(name: str) -> bool:
    """Whether `name` is one of our instances' (cctest-<pid>-<n>): all `clean` may remove."""
    return re.fullmatch(rf"{INSTANCE_PREFIX}\d+-\d+", name) is not None


def remove_instance(root: Path, name: str) -> bool:
    """Remove one of our instances (its buffer and events go with it). Returns whether there was one;
    TracefsError if it stays (busy: a reader still holds it open)."""
    if not is_instance_name(name):
        raise TracefsError(f"{name}: not a cctest tracefs instance")
    path = root / "instances" / name
    if not path.is_dir():
        return False
    try:
        path.rmdir()
    except OSError as error:
        raise TracefsError(f"remove tracefs instance {path}: {error.strerror or error}") from None
    return True


class Recorder:
    """Events of our own tracefs instance (instances/cctest-<pid>-<n>: its own buffer, clock and
    filters; nothing global is changed) copied by `cat trace_pipe` into a log as they come.

    events: (system, event, filter) triples; a filter is tracefs's own expression ("" for none).
    journal: told an instance's name before it is made and after it is removed (a run killed in
    between leaves it tracing until `cctest clean` removes it).
    """

    _count = 0

    def __init__(self, root: Path, events: list[tuple[str, str, str]], log: Path,
                 journal: Journaling | None = None):
        Recorder._count += 1
        self.name = f"{INSTANCE_PREFIX}{os.getpid()}-{Recorder._count}"
        self.dir = root / "instances" / self.name
        self.events = events
        self.log = log
        self.journal = journal
        self.reader: subprocess.Popen | None = None
        self._sink: BinaryIO | None = None

    def start(self) -> None:
        if self.journal is not None:
            self.journal.add_tracefs_instance(self.name)
        try:
            self.dir.mkdir()
            (self.dir / "trace_clock").write_text(TRACE_CLOCK)
            (self.dir / "buffer_size_kb").write_text(str(BUFFER_KB))
            for system, event, expression in self.events:
                event_dir = self.dir / "events" / system / event
                if expression:
                    (event_dir / "filter").write_text(expression)
                (event_dir / "enable").write_text("1")
        except OSError as error:
            self.close()
            raise TracefsError(f"tracefs instance {self.dir}: {error.strerror or error}") from None
        self._sink = open(self.log, "wb")
        self.reader = subprocess.Popen(["cat", str(self.dir / "trace_pipe")], stdout=self._sink,
                                       stderr=subprocess.DEVNULL, start_new_session=True)

    @property
    def pid(self) -> int | None:
        return self.reader.pid if self.reader else None

    def alive(self) -> bool:
        return self.reader is not None and self.reader.poll() is None

    def _stats_total(self, field: str) -> int:
        """A counter of the instance's per-CPU stats files, summed over the CPUs."""
        total = 0
        for stats in self.dir.glob("per_cpu/cpu*/stats"):
            match = re.search(rf"^{field}:\s*(\d+)", stats.read_text(), re.M)
            total += int(match[1]) if match else 0
        return total

    def unread_entries(self) -> int:
        return self._stats_total("entries")

    def overruns(self) -> int:
        """Events lost because the buffer filled before the reader took them."""
        return self._stats_total("overrun")

    def stop(self, timeout_s: float = DRAIN_TIMEOUT_S) -> int:
        """Stop recording, let the reader take what is still buffered, end it and remove the
        instance. Returns the events lost to overruns."""
        lost = 0
        try:
            if self.dir.is_dir():
                (self.dir / "tracing_on").write_text("0")
                deadline = time.monotonic() + timeout_s
                while self.alive() and self.unread_entries() > 0 and time.monotonic() < deadline:
                    time.sleep(0.05)
                lost = self.overruns()
        finally:
            self.close()
        return lost

    def close(self) -> None:
        if self.reader is not None and self.reader.poll() is None:
            self.reader.terminate()
            try:
                self.reader.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.reader.kill()
                self.reader.wait()
        if self._sink is not None:
            self._sink.close()
            self._sink = None
        if self.dir.is_dir():
            for system, event, _ in self.events:
                with contextlib.suppress(OSError):
                    (self.dir / "events" / system / event / "enable").write_text("0")
            with contextlib.suppress(OSError):
                self.dir.rmdir()
        if self.journal is not None and not self.dir.is_dir():
            self.journal.tracefs_instance_removed(self.name)


# `<task>-<pid> [<cpu>] <flags> <seconds>.<micro>: <event>: <fields>`; the flags column may be
# absent (trace_options noirq-info), and a task name may hold spaces and dashes.
_LINE = re.compile(r"^\s*(?P<task>.*?)-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?"
                   r"(?P<sec>\d+)\.(?P<frac>\d+):\s+(?P<event>\w+):\s+(?P<body>.*)$")


def parse_line(line: str) -> tuple[int, str, str] | None:
    """(t_ns, event name, the event's text) of one trace line, or None for anything else
    (comments, lost-event notes, a torn last line)."""
    match = _LINE.match(line)
    if match is None:
        return None
    frac = match["frac"][:9].ljust(9, "0")
    return int(match["sec"]) * 1_000_000_000 + int(frac), match["event"], match["body"]


def fields(body: str) -> dict[str, str]:
    """key=value words of an event's text (tcp_probe's and the modules' own print that way)."""
    out = {}
    for word in body.split():
        key, sep, value = word.partition("=")
        if sep and key:
            out[key] = value
    return out


def events(text: str, name: str) -> Iterator[tuple[int, dict[str, str]]]:
    """(t_ns, fields) of each `name` event in a trace log, in order."""
    for line in text.splitlines():
        parsed = parse_line(line)
        if parsed is not None and parsed[1] == name:
            yield parsed[0], fields(parsed[2])
