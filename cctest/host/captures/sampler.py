"""The machinery samplers run on: a thread that samples every interval, a tool run as its own
process, and entering a network namespace from one thread.

All timestamps are CLOCK_MONOTONIC nanoseconds, the clock bpftrace's `nsecs` also uses, so every
trace shares one time base without any clock conversion.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ..vmtime import stretch

if TYPE_CHECKING:
    from .base import Undo


class PeriodicSampler(threading.Thread):
    """Calls sample() every interval until stopped; sample() returns text to append to the log."""

    def __init__(self, name: str, interval_s: float, log: TextIO, lock: threading.Lock) -> None:
        super().__init__(name=name, daemon=True)
        self.interval_s = interval_s
        self.log = log
        self.lock = lock
        self._stop_event = threading.Event()
        self.samples = 0
        self.failures = 0
        self.error: str | None = None

    def setup(self) -> None:
        """Runs on the sampler's own thread before the first sample."""

    def teardown(self) -> None:
        """Runs on the sampler's own thread after the last sample."""

    def sample(self) -> str:
        raise NotImplementedError

    def run(self) -> None:
        try:
            self.setup()
            self._loop()
        except Exception as exc:  # noqa: BLE001 - a dead sampler must say why, in meta.json
            self.error = f"{self.name}: {type(exc).__name__}: {exc}"
        finally:
            self.teardown()

    def _loop(self) -> None:
        next_tick = time.monotonic()
        while not self._stop_event.is_set():
            try:
                text = self.sample()
            except (OSError, subprocess.SubprocessError, ValueError) as exc:
                text = ""
                self.failures += 1
                self.error = f"{self.name}: {type(exc).__name__}: {exc}"
            if text:
                with self.lock:
                    self.log.write(text)
                    self.log.flush()  # a SIGKILL keeps every sample taken (ss: the flows' bytes)
                self.samples += 1
            next_tick += self.interval_s
            # Never try to catch up a backlog: a late sample is better than a burst of them.
            next_tick = max(next_tick, time.monotonic())
            self._stop_event.wait(max(0.0, next_tick - time.monotonic()))

    def stop(self) -> None:
        self._stop_event.set()


CLONE_NEWNET = 0x40000000


def enter_netns(pid: int) -> None:
    """Move the calling thread into the network namespace of process `pid`."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into the network namespace of pid {pid}")
    finally:
        os.close(fd)


class ProcessCapture:
    """A capture tool run as its own process (bpftrace, tcpdump), stopped with SIGINT."""

    def __init__(self, name: str, cmd: list[str], log_path: Path):
        self.name = name
        self.log_path = log_path
        self._log = open(log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_for(self, marker: str, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if marker in self.log_path.read_text(errors="replace"):
                return True
            time.sleep(0.2)
        return False

    def stop(self, timeout_s: float = 20.0) -> None:
        timeout_s = stretch(timeout_s)
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGINT)
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            except ProcessLookupError:
                pass
        self._log.close()


def start_threads(samplers: list[PeriodicSampler], undo: Undo, warnings: list[str]) -> None:
    """Start the sampler threads and register their stop with `undo`: all are told to stop, then
    each is joined; one that failed says why in `warnings` (meta.json's)."""
    for sampler in samplers:
        sampler.start()

    def stop_all() -> None:
        for sampler in samplers:
            sampler.stop()
        for sampler in samplers:
            sampler.join(timeout=stretch(10))
            if sampler.error:
                warnings.append(f"sampler {sampler.error} ({sampler.samples} samples, "
                                f"{sampler.failures} failed)")

    undo.callback(stop_all)
