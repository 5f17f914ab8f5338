"""The Dockerfile, built and used for real: the image is built once per session (layer cache makes a
rebuild after a source edit take seconds) and run with the flags of docs/docker.md.

Engine: $CCTEST_CONTAINER_ENGINE, else podman, else a docker whose daemon answers. Skips only where
there is neither; CCTEST_REQUIRE_CONTAINER=1 (set by `make test`) turns that skip into a failure.
"""

from __future__ import annotations

import os
import platform
import re
import resource
import shutil
import ssl
import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest

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


@pytest.fixture(scope="session")
def image(engine, tmp_path_factory) -> str:
    """Build the Dockerfile once; return the image id (not the tag: another session may move it)."""
    iid = tmp_path_factory.mktemp("image") / "iid"
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    cmd = [engine, "build", "-t", TAG, "--iidfile", str(iid), "--build-arg", f"CCTEST_GIT_COMMIT={commit}",
           *_secrets(), str(REPO)]
    if engine == "podman":
        cmd[2:2] = _limits()
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, (
        f"{' '.join(cmd)} failed (no debian:bookworm-slim and no registry? bash scripts/container-base.sh):\n"
        + (result.stdout + result.stderr)[-4000:])
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
