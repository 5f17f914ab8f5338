"""A throwaway single-node Slurm cluster on this machine, for tests/cluster/test_slurm.py: munged, slurmctld
and slurmd as this process's children, every file (key, config, state, spool, logs, sockets) in
one temporary directory, on a free port pair. No cgroup: SlurmUser root, proctrack/linuxproc,
select/cons_tres over the host's CPUs, and task/affinity (sched_setaffinity) so that a job's batch
step may use only the CPUs it was given: a UML guest pins itself to the first CPU it is allowed,
so under task/none every one-CPU array task's guest would share CPU 0. The clients (sbatch,
squeue, ...) find the cluster through the environment `env()` gives (SLURM_CONF)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "sinfo", "scontrol", "scancel")
NODE = "cctest-node"
PARTITION = "cctest"


def missing() -> list[str]:
    """The Slurm and munge programs this machine lacks (Debian: slurm-wlm, munge)."""
    return [name for name in (*DAEMONS, *CLIENTS) if _which(name) is None]


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def _free_ports(n: int) -> list[int]:
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class Cluster:
    """start() boots it and waits for the node to be idle (start_s: how long that took); stop()
    cancels what is still queued or running, stops the daemons and removes the directory."""

    def __init__(self, cpus: int | None = None) -> None:
        self.cpus = cpus or os.cpu_count() or 1
        self.dir = Path(tempfile.mkdtemp(prefix="cctest-slurm-"))
        self.conf = self.dir / "slurm.conf"
        self.procs: dict[str, subprocess.Popen] = {}
        self.start_s: float | None = None

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *args: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(list(args), env=self.env(), cwd=cwd, capture_output=True, text=True, check=check,
                              timeout=60)

    def start(self, timeout_s: float = 120) -> float:
        began = time.monotonic()
        d = self.dir
        for sub in ("munge", "state", "spool", "log"):
            (d / sub).mkdir(mode=0o700)
        key = d / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        sock = d / "munge" / "munge.socket"
        self._spawn("munged", [_which("munged"), "--foreground", "--force", f"--socket={sock}",
                               f"--key-file={key}", f"--pid-file={d / 'munge' / 'munged.pid'}",
                               f"--seed-file={d / 'munge' / 'munged.seed'}",
                               f"--log-file={d / 'log' / 'munged.log'}"])
        self._wait(lambda: sock.exists(), timeout_s, "munged's socket")
        ctld_port, slurmd_port = _free_ports(2)
        host = socket.gethostname().split(".")[0]
        self.conf.write_text("\n".join([
            "ClusterName=cctest",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            f"SlurmdPort={slurmd_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={sock}",
            f"StateSaveLocation={d / 'state'}",
            f"SlurmdSpoolDir={d / 'spool' / '%n'}",
            f"SlurmctldPidFile={d / 'slurmctld.pid'}",
            f"SlurmdPidFile={d / 'slurmd.pid'}",
            f"SlurmctldLogFile={d / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={d / 'log' / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/affinity",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "MailProg=/bin/true",
            "ReturnToService=2",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=60",
            "MinJobAge=600",
            f"NodeName={NODE} NodeHostname={host} NodeAddr=127.0.0.1 CPUs={self.cpus} State=UNKNOWN",
            f"PartitionName={PARTITION} Nodes={NODE} Default=YES MaxTime=INFINITE State=UP",
            "",
        ]))
        self._spawn("slurmctld", [_which("slurmctld"), "-D", "-i", "-f", str(self.conf)])
        self._spawn("slurmd", [_which("slurmd"), "-D", "-N", NODE, "-f", str(self.conf)])
        self._wait(self._node_idle, timeout_s, f"node {NODE} idle")
        self.start_s = time.monotonic() - began
        return self.start_s

    def _spawn(self, name: str, argv: list) -> None:
        with open(self.dir / "log" / f"{name}.out", "wb") as log:  # the daemon keeps its own copy
            self.procs[name] = subprocess.Popen([str(a) for a in argv], env=self.env(), stdout=log,
                                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                start_new_session=True)

    def _node_idle(self) -> bool:
        result = self.run("sinfo", "-h", "-N", "-n", NODE, "-o", "%T", check=False)
        return result.returncode == 0 and result.stdout.strip() == "idle"

    def _wait(self, ready, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited ({proc.returncode}) before {what}:\n{self.logs()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no {what} within {timeout_s:.0f} s:\n{self.logs()}")
            time.sleep(0.2)

    def jobs(self) -> list[str]:
        """squeue's lines for every job still known: `JOBID STATE REASON`."""
        result = self.run("squeue", "-h", "-o", "%i %T %r", check=False)
        return result.stdout.split("\n")[:-1] if result.returncode == 0 else []

    def wait_for_jobs(self, timeout_s: float) -> None:
        """Until no job is pending or running (the test's timeout: RuntimeError with the queue)."""
        deadline = time.monotonic() + timeout_s
        while jobs := self.jobs():
            if time.monotonic() > deadline:
                raise RuntimeError(f"jobs still queued after {timeout_s:.0f} s: {jobs}")
            time.sleep(2)

    def logs(self, tail: int = 30) -> str:
        parts = []
        for path in sorted((self.dir / "log").glob("*")):
            lines = path.read_text(errors="replace").splitlines()[-tail:]
            parts.append(f"--- {path.name}\n" + "\n".join(lines))
        return "\n".join(parts)

    def stop(self, keep_logs: Path | None = None) -> None:
        """Cancel every job (their shards' guests end with them), stop the daemons, copy their logs
        to `keep_logs`, remove the directory."""
        try:
            if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
                self.run("scancel", "--full", "--partition", PARTITION, check=False)
                deadline = time.monotonic() + 90
                while self.jobs() and time.monotonic() < deadline:
                    time.sleep(1)
            for name in reversed(DAEMONS):
                proc = self.procs.get(name)
                if proc is None or proc.poll() is not None:
                    continue
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)
            if keep_logs is not None:
                shutil.copytree(self.dir / "log", keep_logs, dirs_exist_ok=True)
                shutil.copy(self.conf, keep_logs / "slurm.conf")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
