"""The Dockerfile, built and used for real: the image is built once per session (layer cache makes a
rebuild after a source edit take seconds) and run with the flags of docs/docker.md: privileged for
native runs on the host's kernel, unprivileged for runs on the UML kernel the image carries (a seeded
demo in the container gives the host's bytes).

Engine: $CCTEST_CONTAINER_ENGINE, else podman, else a docker whose daemon answers. Skips only where
there is neither; CCTEST_REQUIRE_CONTAINER=1 (set by `make test`) turns that skip into a failure.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import resource
import shutil
import ssl
import subprocess
import sys
import sysconfig
import time
from importlib.metadata import version
from pathlib import Path

import pandas as pd
import pytest

from cctest.emulation import uml, umlkernel
from cctest.kernel import kmod
from tests import REPO

pytestmark = pytest.mark.container

RUNS = REPO / "tests" / "fixtures" / "runs"
TAG = "localhost/cctest:test"
# docs/docker.md's flags: the container drives the host kernel (qdiscs, namespaces, modules).
HOST_FLAGS = ["--privileged", "--network", "host", "--pid", "host",
              "-v", "/lib/modules:/lib/modules:ro", "-v", "/usr/src:/usr/src:ro", "-v", "/run/cctest:/run/cctest"]


def _engine() -> str | None:
    wanted = os.environ.get("CCTEST_CONTAINER_ENGINE")
    if wanted:
        return wanted
    if shutil.which("podman"):
        return "podman"
    if shutil.which("docker") and subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode == 0:
        return "docker"
    return None


def _limits() -> list[str]:
    # Engines set their own (high) rlimits, which fails where the engine may not raise limits (this
    # project's CI machines: "error setting rlimit ...: operation not permitted"). Keep ours instead.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return ["--ulimit", f"nofile={soft}:{hard}", "--ulimit", "nproc=4096:4096"]


def _secrets() -> list[str]:
    """docs/docker.md's optional build secrets, from what pip on this host uses: its CA bundle and pip.conf."""
    ca = next((p for p in (os.environ.get("PIP_CERT"), os.environ.get("SSL_CERT_FILE"),
                           os.environ.get("REQUESTS_CA_BUNDLE"), ssl.get_default_verify_paths().openssl_cafile)
               if p and Path(p).is_file()), None)
    conf = next((p for p in (os.environ.get("PIP_CONFIG_FILE"), "/etc/xdg/pip/pip.conf", "/etc/pip.conf",
                             str(Path.home() / ".config/pip/pip.conf"), str(Path.home() / ".pip/pip.conf"))
                 if p and Path(p).is_file()), None)
    flags = []
    if ca:
        flags += ["--secret", f"id=ca_bundle,src={ca}"]
    if conf:
        flags += ["--secret", f"id=pip_conf,src={conf}"]
    return flags


def _constraints(directory: Path) -> list[str]:
    """The Dockerfile's pip_constraints secret: the package versions of the venv these tests run in, so
    that the image's Python environment (a UML guest's, too) is this host's."""
    if sys.prefix == sys.base_prefix:
        return []
    frozen = subprocess.run([sys.executable, "-m", "pip", "freeze", "--exclude-editable", "--path",
                             sysconfig.get_paths()["purelib"]], capture_output=True, text=True)
    if frozen.returncode != 0 or not frozen.stdout.strip():
        return []
    constraints = directory / "constraints.txt"
    constraints.write_text(frozen.stdout)
    return ["--secret", f"id=pip_constraints,src={constraints}"]


@pytest.fixture(scope="session")
def engine() -> str:
    found = _engine()
    if found is None:
        unavailable("no container engine: neither podman nor a running docker")
    return found


def unavailable(reason: str) -> None:
    """Skip, except under `make test` (CCTEST_REQUIRE_CONTAINER=1), where a missing piece fails."""
    if os.environ.get("CCTEST_REQUIRE_CONTAINER") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def _uml_kernel(directory: Path) -> tuple[list[str], int]:
    """The build flags that give the image its UML kernel, and the build's timeout. By default the
    host's build, exported into a directory that replaces the Dockerfile's stage uml-kernel (nothing
    compiled: scripts/setup.sh built it; an empty stage where the host has none, and the UML tests
    then say so). CCTEST_CONTAINER_UML_KERNEL=source builds the stage from the host's source version
    instead (10-20 min of CPU; the mirror must still carry that version), as the nightly does: the
    image's kernel must then still be the host's."""
    if os.environ.get("CCTEST_CONTAINER_UML_KERNEL") == "source":
        source = umlkernel.source_version()
        return (["--build-arg", f"UML_SOURCE_VERSION={source}"] if source else []), 4 * 3600
    context = directory / "uml-kernel"
    context.mkdir()
    if umlkernel.find() is not None:
        exported = subprocess.run(["bash", str(REPO / "scripts" / "uml-kernel.sh"), "--export", str(context)],
                                  capture_output=True, text=True)
        assert exported.returncode == 0, exported.stdout + exported.stderr
    return ["--build-context", f"uml-kernel={context}"], 1800


@pytest.fixture(scope="session")
def image(engine, tmp_path_factory) -> str:
    """Build the Dockerfile once; return the image id (not the tag: another session may move it)."""
    made = tmp_path_factory.mktemp("image")
    iid = made / "iid"
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    kernel, timeout = _uml_kernel(made)
    cmd = [engine, "build", "-t", TAG, "--iidfile", str(iid), "--build-arg", f"CCTEST_GIT_COMMIT={commit}", *kernel,
           *_secrets(), *_constraints(made), str(REPO)]
    if engine == "podman":
        cmd[2:2] = _limits()
    started = time.monotonic()
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    print(f"\nimage built in {time.monotonic() - started:.0f} s")
    assert result.returncode == 0, (
        f"{' '.join(cmd)} failed (no debian:bookworm-slim and no registry? bash scripts/container-base.sh; "
        "CCTEST_CONTAINER_UML_KERNEL=source: the host's linux-source-6.1 no longer on the mirror? upgrade it and "
        "rebuild the host's UML kernel):\n" + (result.stdout + result.stderr)[-4000:])
    return iid.read_text().strip()


def run(engine: str, image: str, *args: str, flags: list[str] | None = None, entrypoint: str | None = None,
        timeout: int = 300) -> subprocess.CompletedProcess:
    Path("/run/cctest").mkdir(exist_ok=True)  # docs/docker.md: mkdir -p /run/cctest (podman needs the source)
    cmd = [engine, "run", "--rm", *_limits(), *(flags if flags is not None else HOST_FLAGS)]
    if entrypoint:
        cmd += ["--entrypoint", entrypoint]
    cmd += [image, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def words(text: str) -> str:
    """Output with rich's line wrapping undone (it wraps at spaces, to 80 columns without a TTY)."""
    return " ".join(text.split())


def test_version_is_the_checkout_s(engine, image):
    out = run(engine, image, "--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"cctest, version {version('cctest')}"


def test_runs_record_the_commit_the_image_was_built_from(engine, image):
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    out = run(engine, image, "-c", "from cctest.host.rundir import git_commit; print(git_commit())",
              entrypoint="python3")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == head


def test_doctor_inside_says_the_container_drives_the_host_kernel(engine, image):
    out = run(engine, image, "doctor")
    said = words(out.stdout)
    # doctor exits 1 exactly when no mode can run: inside a container on a host kernel
    # without netem or modules (this machine's) that is the case, and it must say so
    assert out.returncode == (1 if "mode: none" in said else 0), (out.returncode, said, out.stderr)
    assert f"Note: inside a {engine} container: it has no kernel of its own and drives the host's " \
           f"({platform.release()}), so native runs need a capable HOST kernel" in said, said


def test_the_image_carries_every_tool_a_native_run_and_its_capture_use(engine, image):
    probe = ("from cctest.run import doctor\n"
             "for c in doctor.checks():\n"
             "    if c.needed_for in ('native', 'capture') and c.name in"
             " ('mininet', 'iperf3', 'tc', 'ss', 'ethtool', 'ping', 'tcpdump', 'bpftrace', 'container'):\n"
             "        print(c.name, c.ok, c.detail)\n")
    out = run(engine, image, "-c", probe, entrypoint="python3")
    assert out.returncode == 0, out.stderr
    seen = {line.split()[0]: line.split()[1] == "True" for line in out.stdout.splitlines()}
    assert seen == dict.fromkeys(["container", "mininet", "iperf3", "tc", "ss", "ethtool", "ping", "tcpdump",
                                  "bpftrace"], True), out.stdout


def test_dry_run_of_the_demo_prints_its_plan(engine, image):
    out = run(engine, image, "run", "demo", "--dry-run")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("# run demo base repetition 0"), out.stdout[:500]
    assert re.search(r"^t=0s \[ccsnd0\] iperf3 -c 10\.0\.2\.1 .* -C cubic", out.stdout, re.M), out.stdout


def test_report_of_a_mounted_run_is_written_there_owned_by_the_user(engine, image, tmp_path):
    """docs/docker.md's report command: the recorded run mounted at /data, run as the host user (--user).
    As root, the test stands in a regular user's id (nobody) so a file left owned by root fails it."""
    uid, gid = (os.getuid(), os.getgid()) if os.getuid() != 0 else (65534, 65534)
    run_dir = next(p for p in sorted(RUNS.iterdir()) if (p / "meta.json").exists())
    data = tmp_path / "data"
    shutil.copytree(run_dir, data / run_dir.name)
    for path in [data, *data.rglob("*")]:
        os.chown(path, uid, gid)
    if engine == "podman" and os.getuid() != 0:
        user = ["--userns", "keep-id"]  # rootless podman: the host user is the container's, by id
    else:
        user = ["--user", f"{uid}:{gid}"]
    out = run(engine, image, "report", f"/data/{run_dir.name}", "-o", "/data/report.html",
              flags=[*user, "-v", f"{data}:/data"])
    assert out.returncode == 0, out.stdout + out.stderr
    for name in ("report.html", "report.summary.csv", "report.summary.json"):
        written = data / name
        assert written.is_file(), f"{name} not in the mounted directory: {sorted(p.name for p in data.iterdir())}"
        assert (written.stat().st_uid, written.stat().st_gid) == (uid, gid), name
    html = (data / "report.html").read_text()
    assert html.lstrip().lower().startswith("<!doctype html") and run_dir.name in html


def _release_with_headers() -> tuple[str, list[str]] | None:
    """A kernel release whose headers this host has, and the extra mount they need: Debian's
    headers link scripts/ and tools/ into /usr/lib/linux-kbuild-*, outside /usr/src."""
    releases = [platform.release()] + sorted(p.name for p in Path("/lib/modules").glob("*"))
    release = next((r for r in releases if (kmod.headers_dir(r) / "Makefile").exists()), None)
    if release is None:
        return None
    kbuild = (kmod.headers_dir(release) / "scripts").resolve().parent
    extra = [] if kbuild.is_relative_to("/usr/src") else ["-v", f"{kbuild}:{kbuild}:ro"]
    return release, extra


def test_modules_build_inside_against_the_host_s_headers(engine, image):
    found = _release_with_headers()
    if found is None:
        unavailable("no kernel headers under /lib/modules/*/build (apt-get install linux-headers-amd64)")
    release, extra = found
    out = run(engine, image, "modules", "build", "-r", release, flags=[*HOST_FLAGS, *extra, "-e", "COLUMNS=200"],
              timeout=900)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    built = re.findall(rf"^(\w+): /cctest/build/modules/{re.escape(release)}/(\w+)/\1\.ko$", out.stdout, re.M)
    assert {tree for _, tree in built} == {tree.name for tree in kmod.source_trees()}, out.stdout[-3000:]


# -- UML in the container, unprivileged --------------------------------------------------------------

ADDR_NO_RANDOMIZE = 0x0040000  # <linux/personality.h>; `setarch -R` asks for PER_LINUX | this
ENGINE_SECCOMP = Path("/usr/share/containers/seccomp.json")  # podman's default profile (containers-common)
# `cctest run` has no --seed: a run's seed is the scenario's (demo: 1) plus its repetition, so
# --first-repetition 2 runs the demo with seed 3, on the host and in the container alike.
FIRST_REPETITION = 2
DEMO = ["run", "demo", "--vm", "--engine", "uml", "--first-repetition", str(FIRST_REPETITION)]
SAME_COMMIT = "0" * 40  # recorded by both runs: the image has no .git, the host's checkout may be dirty
# What the guest runs, from the guest's root (the host's, or the image's): their versions on each side
# say where two runs' environments differ when their bytes do.
GUEST_PACKAGES = [line for line in (REPO / "scripts" / "guest-packages.txt").read_text().splitlines()
                  if line and not line.startswith("#")]
GUEST_PYTHON = ["click", "rich", "pydantic", "pydantic_core", "PyYAML", "pyroute2", "typing_extensions",
                "annotated-types", "markdown-it-py", "Pygments"]


def seccomp_profile(directory: Path) -> str:
    """The seccomp profile UML runs get: the engine's default with one more rule, personality with
    exactly ADDR_NO_RANDOMIZE, where the default is a file (podman's); docker's default is built into
    the daemon, so there: none (`unconfined`)."""
    if not ENGINE_SECCOMP.is_file():
        return "unconfined"
    profile = json.loads(ENGINE_SECCOMP.read_text())
    profile["syscalls"].append({"names": ["personality"], "action": "SCMP_ACT_ALLOW",
                                "args": [{"index": 0, "value": ADDR_NO_RANDOMIZE, "op": "SCMP_CMP_EQ"}]})
    path = directory / "seccomp-uml.json"
    path.write_text(json.dumps(profile))
    return str(path)


def uml_flags(directory: Path, guests: int = 1) -> list[str]:
    """docs/docker.md's flags for UML runs, and nothing more (no --privileged, no capability, no
    device): an exec tmpfs on /dev/shm for the guests' memory files, and the seccomp profile above."""
    shm_mb = guests * uml.MEMORY_MB + 512
    return ["--tmpfs", f"/dev/shm:rw,exec,size={shm_mb}m", "--security-opt", f"seccomp={seccomp_profile(directory)}"]


def _kernel_facts(build: umlkernel.KernelBuild) -> dict[str, str]:
    return {"dir": build.dir.name, "inputs_sha256": build.inputs_sha256, "release": build.release,
            "linux_sha256": hashlib.sha256(build.binary.read_bytes()).hexdigest()}


KERNEL_FACTS = """
import hashlib, json
from cctest.emulation import umlkernel
build = umlkernel.find()
print(json.dumps(None if build is None else {
    "dir": build.dir.name, "inputs_sha256": build.inputs_sha256, "release": build.release,
    "linux_sha256": hashlib.sha256(build.binary.read_bytes()).hexdigest()}))
"""


def host_uml_kernel() -> umlkernel.KernelBuild:
    build = umlkernel.find()
    if build is None:
        unavailable("the host has no UML kernel built (scripts/uml-kernel.sh): nothing to compare the image's with")
    assert build is not None
    return build


def test_the_image_carries_the_host_s_uml_kernel(engine, image, tmp_path):
    """cctest in the image finds the host's build without linux-source-6.1: the same cache directory
    (source version and inputs hash), release and binary. Built from source in the image
    (CCTEST_CONTAINER_UML_KERNEL=source), this shows the stage's build is the host's."""
    host = _kernel_facts(host_uml_kernel())
    out = run(engine, image, "-c", KERNEL_FACTS, entrypoint="python3", flags=uml_flags(tmp_path))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == host


def test_uml_needs_no_privileges_only_a_tmpfs_and_one_seccomp_rule(engine, image, tmp_path):
    """With docs/docker.md's two flags nothing keeps a guest from booting; with an engine's bare
    defaults the engine names both things missing (boots nothing either way)."""
    probe = "import json; from cctest.emulation import uml; print(json.dumps(uml.host_problems()))"
    out = run(engine, image, "-c", probe, entrypoint="python3", flags=uml_flags(tmp_path))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []
    bare = run(engine, image, "-c", probe, entrypoint="python3", flags=[])
    assert bare.returncode == 0, bare.stderr
    said = json.loads(bare.stdout)
    assert len(said) == 2 and "mounted noexec" in said[0] and "personality(ADDR_NO_RANDOMIZE)" in said[1], said


def _environment(prefix: list[str]) -> dict[str, str]:
    """The guest-side programs' and Python packages' versions, through `prefix` (the host's, or the image's)."""
    packages = subprocess.run([*prefix, "dpkg-query", "-W", "-f", "${Package} ${Version}\\n", *GUEST_PACKAGES],
                              capture_output=True, text=True).stdout
    found = dict(line.split(" ", 1) for line in packages.splitlines() if " " in line)
    script = ("import importlib.metadata as m, json, sys\n"
              f"names = {GUEST_PYTHON!r}\n"
              "def v(n):\n"
              "    try:\n"
              "        return m.version(n)\n"
              "    except m.PackageNotFoundError:\n"
              "        return None\n"
              "print(json.dumps({n: v(n) for n in names}))\n")
    python = subprocess.run([*prefix, "python3" if prefix else sys.executable, "-c", script], capture_output=True,
                            text=True).stdout
    found.update({f"python:{name}": str(value) for name, value in json.loads(python or "{}").items()})
    return found


@pytest.fixture(scope="module")
def demo_here_and_in_the_container(engine, image):
    """The demo with one seed, run on the host and in the container (UML both), one after the other;
    the run directories, both outputs and the times kept under build/container-uml/<stamp>/."""
    host_uml_kernel()
    root = REPO / "build" / "container-uml" / time.strftime("%Y%m%d-%H%M%S")
    outs = {"host": root / "host", "container": root / "container"}
    outs["container"].mkdir(parents=True)
    env = {**os.environ, "CCTEST_GIT_COMMIT": SAME_COMMIT}
    timings, logs = {}, {}
    started = time.monotonic()
    here = subprocess.run([sys.executable, "-m", "cctest", *DEMO, "--out", str(outs["host"])], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=3600)
    timings["host_s"] = round(time.monotonic() - started, 1)
    started = time.monotonic()
    there = run(engine, image, *DEMO, "--out", "/out", timeout=3600,
                flags=[*uml_flags(root), "-e", f"CCTEST_GIT_COMMIT={SAME_COMMIT}", "-v", f"{outs['container']}:/out"])
    timings["container_s"] = round(time.monotonic() - started, 1)
    for name, result in (("host", here), ("container", there)):
        logs[name] = result.stdout + result.stderr
        (root / f"{name}.log").write_text(logs[name])
    environments = {"host": _environment([]),
                    "container": _environment([engine, "run", "--rm", *_limits(), "--entrypoint", "env", image])}
    differ = {k: (environments["host"].get(k), environments["container"].get(k))
              for k in sorted(set(environments["host"]) | set(environments["container"]))
              if environments["host"].get(k) != environments["container"].get(k)}
    (root / "timings.json").write_text(json.dumps({**timings, "environment_differences": differ}, indent=1))
    print(f"\ndemo (seed {1 + FIRST_REPETITION}) on UML: host {timings['host_s']} s, "
          f"in the container {timings['container_s']} s; kept in {root}")
    assert here.returncode == 0, logs["host"][-3000:]
    assert there.returncode == 0, logs["container"][-3000:]
    runs = {}
    for name, out in outs.items():
        (meta,) = out.rglob("meta.json")
        runs[name] = meta.parent
    return {"runs": runs, "timings": timings, "differ": differ, "root": root}


def _tables(run_dir: Path) -> dict[str, pd.DataFrame]:
    return {table.stem: pd.read_parquet(table).drop(columns="run_id", errors="ignore")
            for table in sorted(run_dir.glob("*.parquet"))}


def test_a_seeded_demo_in_the_container_gives_the_host_s_bytes(demo_here_and_in_the_container, record_property):
    """The same scenario and seed on the same kernel give identical bytes per flow, and every table
    the run wrote, whether the guest boots on the host or in the container (docs/uml.md, "Determinism")."""
    done = demo_here_and_in_the_container
    for name, seconds in done["timings"].items():
        record_property(name, seconds)
    metas = {name: json.loads((run / "meta.json").read_text()) for name, run in done["runs"].items()}
    for name, meta in metas.items():
        assert meta["status"] == "ok", (name, meta.get("error"))
        assert meta["seed"] == 1 + FIRST_REPETITION and meta["engine"]["rng_seed"] == 1 + FIRST_REPETITION, name
    assert metas["host"]["engine"]["kernel"] == metas["container"]["engine"]["kernel"]
    where = (f"runs kept in {done['root']}; the guest's environment differs in {done['differ'] or 'nothing checked'}; "
             f"times {done['timings']}")
    tables = {name: _tables(run) for name, run in done["runs"].items()}
    columns = ["flow", "cc", "local_port", "bytes_sent", "bytes_received", "retransmits"]
    host_flows, container_flows = tables["host"]["flows"], tables["container"]["flows"]
    assert (host_flows["bytes_received"] > 0).all(), where
    assert host_flows[columns].to_dict("records") == container_flows[columns].to_dict("records"), where
    assert sorted(tables["host"]) == sorted(tables["container"]), where
    for name in tables["host"]:
        try:
            pd.testing.assert_frame_equal(tables["host"][name], tables["container"][name], obj=name)
        except AssertionError as differs:
            raise AssertionError(f"{name}: {differs}\n{where}") from None
