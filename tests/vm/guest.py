"""Runs inside the VM: real cctest runs for the integration tests, then what the host asserts on.

usage: guest.py OUT_DIR --facts FACTS [--plan PLAN JOB [JOB ...]] [SPECIAL_JOB ...]
FACTS: the host's commit and tool versions (guestplan.HostFacts), for the plans written here.
A job is a scenario name in tests/vm/scenarios.yaml: PLAN, the plan file the host wrote, holds this
VM's share of the jobs' runs, as `cctest run -j` gives each VM its share, and they run to completion
in one `cctest guest-run PLAN` process, as a user's sweep would. A special job is
`interrupt:<scenario>` (SIGINT once flows are running, then record what is left on the system), or
`kill9:<scenario>` (SIGKILL mid-flow, try a second run, then `cctest clean`), or
`kill9all:<scenario>` (SIGKILL the run's whole cgroup mid-flow, iperf3 included, then `cctest
clean`). They start with tracefs unmounted (virtme-ng and the UML engine's init mount it), so
that the run mounts it itself, and mount it back after.
Writes OUT_DIR/results.json and OUT_DIR/dmesg.txt. Tables are made on the host afterwards.
"""

from __future__ import annotations

import json
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

from cctest.host.vmtime import stretch

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "scenarios.yaml"
STATE_DIR = Path("/run/cctest")


def guest_run(plan: Path, **kw) -> subprocess.Popen:
    """cctest as a --vm session's guest runs: the runs in the plan file, natively, no tables."""
    return subprocess.Popen([sys.executable, "-m", "cctest", "guest-run", str(plan)], cwd=HERE.parent.parent, **kw)


def plan_of(scenario: str, out: Path, manifest: Path) -> Path:
    """A plan file of every run of `scenario`, written here, for a special job (the host splits only
    the plain jobs' runs)."""
    from cctest.host.rundir import host_facts
    from cctest.model import guestplan
    from cctest.model.plan import expand
    from cctest.model.scenario import load_experiments

    path = manifest.with_suffix(".plan.json")
    runs = expand(load_experiments(SCENARIOS), scenario)
    guestplan.write(path, runs, names=[scenario], out=str(out), manifest=str(manifest), facts=host_facts())
    return path


def run_dirs(manifest: Path) -> list[str]:
    return manifest.read_text().split() if manifest.exists() else []


def system_leftovers() -> dict:
    """Everything a run could leave behind, as the host test will check it."""
    def sh(cmd: str) -> str:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout

    return {
        "links": sh("ip -o link show | awk -F': ' '{print $2}' | grep '^cc' || true").split(),
        "netns_shells": sh("pgrep -f '[m]ininet:cc' || true").split(),
        "iperf3": sh("pgrep -x iperf3 || true").split(),
        "bpftrace": sh("pgrep -x bpftrace || true").split(),
        "tracefs_readers": sh("pgrep -f '^cat .*/trace_pipe$' || true").split(),  # the tracer where no bpftrace
        "tracefs_instances": tracefs_instances(),  # the tracer's buffers, which outlive the run
        "tcpdump": sh("pgrep -x tcpdump || true").split(),
        "qdiscs": [line for line in sh("tc qdisc show").splitlines() if " dev cc" in line],
        "journal_left": (STATE_DIR / "active.json").exists(),
        "lsmod": sh("lsmod"),
        "cgroups": run_cgroups(),
        "tracefs_mounts": [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
                           if line.split()[2] == "tracefs"],
    }


def tracefs_instances() -> list[str]:
    """cctest's tracefs instances, looked for through a mount made for the purpose where none is
    there (an instance outlives every unmount, and keeps tracing)."""
    from cctest.host import tracefs

    root = tracefs.mounted()
    made = None if root is not None else tracefs.mount_if_absent()
    root = root or made
    try:
        return sorted(p.name for p in root.glob(f"instances/{tracefs.INSTANCE_PREFIX}*")) if root else []
    finally:
        if made is not None:
            tracefs.unmount(made)


def run_cgroups() -> dict[str, dict]:
    """Each cctest run cgroup: the PIDs in it and their command names."""
    from cctest.host import cgroup

    mount = cgroup.cgroup2_mount()
    found = {}
    for path in sorted(mount.rglob(f"{cgroup.PREFIX}*")) if mount else []:
        pids = cgroup.procs(path)
        names = []
        for pid in pids:
            try:
                names.append(Path(f"/proc/{pid}/comm").read_text().strip())
            except OSError:
                pass
        found[str(path)] = {"pids": pids, "names": sorted(set(names))}
    return found


def unmount_tracing() -> list[str]:
    """Unmount tracefs and debugfs (whose automount would bring tracefs back); what was unmounted."""
    gone = []
    for _ in range(4):  # the automount under debugfs first, then debugfs, then tracefs itself
        for line in reversed(Path("/proc/mounts").read_text().splitlines()):
            _, where, kind = line.split()[:3]
            if kind in ("tracefs", "debugfs") and subprocess.run(["umount", where]).returncode == 0:
                gone.append(f"{kind} {where}")
    return gone


def remount_tracing(gone: list[str]) -> None:
    for entry in gone:
        kind, where = entry.split()
        if where != "/sys/kernel/debug/tracing":  # the automount comes back by itself
            subprocess.run(["mount", "-t", kind, "nodev", where])


def wait_for_flows(proc: subprocess.Popen, manifest: Path) -> tuple[bool, str]:
    """Until the newest run has all its flows running on a topology an earlier run left to it.
    Returns whether they were, and what was seen last (the test prints it when they were not)."""
    # In guest seconds, stretched: on the virtual clock, every 9p read this loop and cctest make
    # while the guest idles lets the clock jump to the next timer (the half-second poll here).
    started = time.monotonic()
    deadline = started + stretch(300)
    seen = "no run directory yet"
    while time.monotonic() < deadline and proc.poll() is None:
        dirs = run_dirs(manifest)
        if dirs:
            try:
                meta = json.loads((Path(dirs[-1]) / "meta.json").read_text())
            except (OSError, ValueError):
                meta = {}  # being rewritten: read it again next time
            launched = [f.get("launched_s") for f in meta.get("flows", [])]
            seen = f"{len(dirs)} run(s); newest: topology {meta.get('topology')!r}, flows launched at {launched}"
            if meta.get("topology", "").startswith("reused") and launched and None not in launched:
                time.sleep(5)  # mid-flow: let some samples accumulate
                return True, seen
        time.sleep(0.5)
    ended = "cctest still running" if proc.poll() is None else f"cctest exited {proc.returncode}"
    return False, f"{ended} after {time.monotonic() - started:.0f} guest s; {seen}"


def interrupt(scenario: str, out: Path, manifest: Path) -> dict:
    unmounted = unmount_tracing()
    proc = guest_run(plan_of(scenario, out, manifest))
    started, seen = wait_for_flows(proc, manifest)
    during = system_leftovers()
    proc.send_signal(signal.SIGINT)
    try:
        code = proc.wait(timeout=stretch(180))
    except subprocess.TimeoutExpired:
        proc.kill()
        code = "hung"
    left = system_leftovers()
    remount_tracing(unmounted)
    return {"exit_code": code, "flows_were_running": started, "seen": seen, "leftovers": left, "during": during,
            "pid": proc.pid, "unmounted": unmounted}


def kill9(scenario: str, out: Path, manifest: Path) -> dict:
    """SIGKILL mid-flow (no teardown possible), then `cctest clean` must remove the leftovers."""
    unmounted = unmount_tracing()
    proc = guest_run(plan_of(scenario, out, manifest))
    started, seen = wait_for_flows(proc, manifest)
    during = system_leftovers()
    proc.kill()
    proc.wait()
    before = system_leftovers()
    refused = guest_run(plan_of(scenario, out / "refused", out / "refused.manifest"), stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
    refused_stderr = refused.communicate()[1]
    clean = subprocess.run([sys.executable, "-m", "cctest", "clean"], capture_output=True, text=True)
    left = system_leftovers()
    remount_tracing(unmounted)
    return {"flows_were_running": started, "seen": seen, "before_clean": before, "leftovers": left,
            "during": during, "pid": proc.pid, "unmounted": unmounted,
            "clean_exit_code": clean.returncode, "clean_output": clean.stdout,
            "second_run_exit_code": refused.returncode, "second_run_stderr": refused_stderr}


def kill9_all(scenario: str, out: Path, manifest: Path) -> dict:
    """SIGKILL the run and everything it started at once, mid-flow, as the OOM killer or a dying VM
    would (the run's cgroup.kill): iperf3 -J writes nothing, yet the run directory must still yield
    each flow's bytes, from ss. Then `cctest clean`."""
    unmounted = unmount_tracing()
    proc = guest_run(plan_of(scenario, out, manifest))
    started, seen = wait_for_flows(proc, manifest)
    groups = list(run_cgroups())
    if groups:
        Path(groups[0], "cgroup.kill").write_text("1\n")
    else:
        proc.kill()
    proc.wait()
    dirs = run_dirs(manifest)
    sizes = {p.name: p.stat().st_size for p in sorted(Path(dirs[-1], "raw").glob("iperf3-[0-9]*.json"))} if dirs else {}
    clean = subprocess.run([sys.executable, "-m", "cctest", "clean"], capture_output=True, text=True)
    left = system_leftovers()
    remount_tracing(unmounted)
    return {"flows_were_running": started, "seen": seen, "killed_cgroups": groups, "iperf3_sizes": sizes,
            "clean_exit_code": clean.returncode, "clean_output": clean.stdout + clean.stderr, "leftovers": left}


# Values found harmful to the kernel and one just outside each end of a range; each
# module's first one is also given to cctest's loader alone.
BBR3_BAD_PARAMS = {"bw_probe_wait_rand_ms": 4294967295, "probe_rtt_interval_ms": 0, "probe_up_pacing_gain_x1000": 0,
                   "startup_gamma": 9, "cwnd_gain_x1000": 10001, "force_fallback": 2}
# The v1 family's: refused when set (they were once clamped where they were read).
BAD_PARAMS = {
    "bbr3": BBR3_BAD_PARAMS, "bbr3plus": BBR3_BAD_PARAMS, "bbr2": BBR3_BAD_PARAMS,
    "bbr1": {"cwnd_gain_x1000": 0},
    "bbr_shallow": {"cwnd_gain_x1000": 7997, "ack_aggregation": 2},
    "bbr_cws": {"recovery_div": 0, "beta_x1000": 1001, "usf_floor_x1000": 0, "wait_rtts": -1,
                "hold_in_recovery": 2},
    "bbr_acw": {"enter_share_pct": 49, "queue_thresh_x1000": 999, "decide": 3, "rate_rounds": 0,
                "leave_share_pct": 0,  # 0 let a round hold a case with no vote for it: 0/0
                "cut_needs_loss": 2},
    "bbr_modest": {"smin_pkts": 0, "wmin_x1000": 1001, "wmax_x1000": 4001, "scale_pacing": 2},
    "bbr_histmin": {"agree_probes": 0, "tolerance_pct": 1001, "drastic_x1000": -1},
}


def kparams(cc: str, out: Path, manifest: Path) -> dict:
    """The module's own range check, in the kernel: insmod and sysfs writes of bad values are
    refused, the defaults lie in the ranges modinfo states, and cctest's loader turns the
    kernel's -EINVAL into its one-line bad-input error."""
    from cctest.kernel import kmod

    ko = kmod.built_modules(platform.release())[cc]
    specs = kmod.param_specs(ko)
    bad = BAD_PARAMS[cc]
    insmod_codes = {}
    for name, value in bad.items():
        insmod_codes[name] = subprocess.run(["insmod", str(ko), f"{name}={value}"], capture_output=True).returncode
        if kmod.is_loaded(cc):  # accepted: unload for the next attempt
            subprocess.run(["rmmod", cc])
    try:  # the loader alone, without cctest's own range check in front of it
        kmod.insmod(ko, cc, dict([next(iter(bad.items()))]), "exp.yaml: scenario s: key flows.0.params")
        loader_error = None
    except kmod.ModuleError as error:
        loader_error = {"type": type(error).__name__, "message": str(error)}
    if kmod.is_loaded(cc):
        subprocess.run(["rmmod", cc])
    subprocess.run(["insmod", str(ko)], check=True)
    defaults = kmod.read_params(cc)
    sysfs = {}
    for name, value in bad.items():
        try:
            Path(f"/sys/module/{cc}/parameters/{name}").write_text(f"{value}\n")
            sysfs[name] = "accepted"
        except OSError as error:
            sysfs[name] = error.strerror
    after = kmod.read_params(cc)
    subprocess.run(["rmmod", cc], check=True)
    return {"insmod_codes": insmod_codes, "loader_error": loader_error, "sysfs": sysfs, "defaults": defaults,
            "after_bad_writes": after, "ranges": {n: [s.lo, s.hi, s.zero_ok, s.read_only] for n, s in specs.items()},
            "run_dirs": []}


def diag_churn(cc: str, out: Path, manifest: Path, seconds: float = 15) -> dict:
    """inet_diag (ss -ti) reads the module's state while sockets of it close on the other CPU path:
    connections on loopback open, send, close in a loop while `ss -tin` polls them."""
    import socket
    import threading

    from cctest.kernel import kmod

    ko = kmod.built_modules(platform.release())[cc]
    subprocess.run(["insmod", str(ko)], check=True)
    stop = threading.Event()
    counts = {"connections": 0, "ss_runs": 0, "bbr_blocks": 0, "socket_errors": 0}
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    port = server.getsockname()[1]

    def accept():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=drain, args=(conn,), daemon=True).start()

    def drain(conn):
        with conn:
            try:
                while conn.recv(1 << 16):
                    pass
            except OSError:
                pass

    def poll():
        while not stop.is_set():
            text = subprocess.run(["ss", "-tin", "state", "all", f"sport = :{port} or dport = :{port}"],
                                  capture_output=True, text=True).stdout
            counts["ss_runs"] += 1
            counts["bbr_blocks"] += text.count("bbr:(")

    threading.Thread(target=accept, daemon=True).start()
    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    deadline = time.monotonic() + seconds  # guest seconds of busy CPU: no stretch (that is for host I/O)
    payload = b"x" * 65536
    while time.monotonic() < deadline:
        try:
            with socket.socket() as client:
                client.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
                client.settimeout(stretch(10))
                client.connect(("127.0.0.1", port))
                client.sendall(payload)
            counts["connections"] += 1
        except OSError:
            counts["socket_errors"] += 1
    stop.set()
    server.close()
    poller.join(timeout=stretch(10))
    time.sleep(1)
    unloaded = kmod.is_loaded(cc) and subprocess.run(["rmmod", cc]).returncode == 0
    for _ in range(20):  # sockets in TIME_WAIT/closing hold the module a little longer
        if unloaded or not kmod.is_loaded(cc):
            break
        time.sleep(0.5)
        unloaded = subprocess.run(["rmmod", cc]).returncode == 0
    return {**counts, "unloaded": unloaded or not kmod.is_loaded(cc), "run_dirs": []}


JOB_KINDS = {"interrupt": interrupt, "kill9": kill9, "kill9all": kill9_all, "kparams": kparams,
             "diagchurn": diag_churn}


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    jobs = sys.argv[2:]
    if jobs[:1] == ["--facts"]:
        from cctest.host.rundir import take_host_facts
        from cctest.model.guestplan import HostFacts

        take_host_facts(HostFacts.model_validate_json(Path(jobs[1]).read_text()))
        jobs = jobs[2:]
    plan = None
    if jobs[:1] == ["--plan"]:
        plan, jobs = Path(jobs[1]), jobs[2:]
    plain = [job for job in jobs if ":" not in job]
    special = [job for job in jobs if ":" in job]
    if plan is not None:
        from cctest.model import guestplan

        manifest = Path(guestplan.read(plan).manifest)
        manifest.unlink(missing_ok=True)
        started = time.monotonic()
        code = guest_run(plan).wait()
        batch = {"exit_code": code, "leftovers": system_leftovers(), "wall_s": round(time.monotonic() - started, 1)}
        dirs = run_dirs(manifest)
        for job in plain:  # run dirs are <out>/<scenario>/<run id>
            results[job] = {**batch, "run_dirs": [d for d in dirs if Path(d).parent.name == job]}
        (out / "results.json").write_text(json.dumps(results, indent=1))
    for job in special:
        kind, _, scenario = job.rpartition(":")
        manifest = out / f"{job.replace(':', '_')}.manifest"
        manifest.unlink(missing_ok=True)
        started = time.monotonic()
        result = JOB_KINDS[kind](scenario, out, manifest)
        result["run_dirs"] = run_dirs(manifest)
        result["wall_s"] = round(time.monotonic() - started, 1)
        results[job] = result
        (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "dmesg.txt").write_text(subprocess.run(["dmesg"], capture_output=True, text=True).stdout)


if __name__ == "__main__":
    main()
