"""The link's timed changes (rate steps, outages), written to tc at their times while flows run.

What changes when is planned, purely, by `cctest/model/bottleneck.py` (`timed_changes`); this is the one
live process of the bottleneck.
"""

from __future__ import annotations

import subprocess
import threading
import time

from ...model.bottleneck import TimedChange


class LinkSchedule:
    """Writes the link's timed changes (rate steps, outages) at their times after time zero.

    Times are this machine's CLOCK_MONOTONIC, the clock time zero is taken on, so in a VM they are
    guest seconds like the flows'. One `tc -b -` process, started before time zero, reads the lines
    of each change: a process start at the change itself would take a second or more under
    emulation.
    """

    def __init__(self, changes: list[TimedChange]):
        self.changes = changes
        self.applied: list[dict] = []  # each change's `what`, its at_s and applied_s
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.proc = subprocess.Popen(["tc", "-b", "-"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def start(self, t0_ns: int) -> None:
        self._thread = threading.Thread(target=self._run, args=(t0_ns,), name="link-schedule", daemon=True)
        self._thread.start()

    def _run(self, t0_ns: int) -> None:
        assert self.proc.stdin is not None  # a pipe (__init__)
        for change in self.changes:
            if self._stop.wait(max(0.0, t0_ns / 1e9 + change.at_s - time.monotonic())):
                return
            try:
                self.proc.stdin.write("".join(line + "\n" for line in change.lines))
                self.proc.stdin.flush()
            except OSError as exc:  # tc exited: a bad line; stop() reads why
                self.error = f"link change at {change.at_s:g} s: {exc}"
                return
            self.applied.append({"at_s": change.at_s, **change.what,
                                 "applied_s": round((time.monotonic_ns() - t0_ns) / 1e9, 4)})

    def stop(self, timeout_s: float = 10.0) -> None:
        """The undo: no further changes; tc ends with its input. (What it changed goes with the
        qdiscs.)"""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
        try:
            _, stderr = self.proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, stderr = self.proc.communicate()
        if self.proc.returncode != 0:
            self.error = f"tc -b - exited with {self.proc.returncode}: {stderr.strip()}"

    def rate_steps_applied(self) -> list[dict]:
        """meta.json rate_schedule_applied: [{at_s, rate_mbps, applied_s}]."""
        return [a for a in self.applied if "rate_mbps" in a]

    def outages_applied(self) -> list[dict]:
        """meta.json outages_applied: [{at_s, duration_s, started_s, ended_s}] (ended_s None when
        the run stopped first)."""
        out: dict[float, dict] = {}
        for a in self.applied:
            if "edge" not in a:
                continue
            entry = out.setdefault(a["outage_at_s"], {"at_s": a["outage_at_s"], "duration_s": a["duration_s"],
                                                      "started_s": None, "ended_s": None})
            entry["started_s" if a["edge"] == "start" else "ended_s"] = a["applied_s"]
        return list(out.values())
