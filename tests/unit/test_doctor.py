"""Which kernel --vm boots by default; which qdiscs doctor requires; what it says in a container."""

from __future__ import annotations

import os
import re

from cctest.emulation import vm
from cctest.model import dumbbell
from cctest.model.plan import expand
from cctest.model.scenario import parse_experiments
from cctest.run import doctor
from tests.unit.test_scenario import GOOD


def test_the_distro_default_kernel_comes_first_whatever_its_date(tmp_path):
    old, new = tmp_path / "vmlinuz-6.1.0-56-amd64", tmp_path / "vmlinuz-6.12.117+deb12-amd64"
    for path, mtime in ((old, 1_000_000), (new, 2_000_000)):
        path.write_bytes(b"")
        os.utime(path, (mtime, mtime))
    assert vm.order_kernels([old, new], "vmlinuz-6.1.0-56-amd64") == [old, new]
    # no metapackage (not Debian) or it names a kernel that is not installed: newest first
    assert vm.order_kernels([old, new], None) == [new, old]
    assert vm.order_kernels([old, new], "vmlinuz-6.19.0-1-amd64") == [new, old]


# Container detection and what doctor says inside one: a container has no kernel of its own.

def _fake_root(tmp_path, files: dict[str, str]):
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


OVERLAY_ROOT = "80 54 0:40 / / rw,relatime - overlay overlay rw,lowerdir=/l\n"
BLOCK_ROOT = "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard\n"
PLAIN_CGROUP = "4:memory:/user.slice\n0::/\n"


def test_podman_docker_and_cgroup_paths_are_recognised(tmp_path):
    podman = _fake_root(tmp_path / "p", {"run/.containerenv": "", "proc/self/cgroup": PLAIN_CGROUP})
    assert doctor.container_engine(podman, environ={}) == "podman"
    docker = _fake_root(tmp_path / "d", {".dockerenv": "", "proc/self/cgroup": "0::/\n",
                                         "proc/self/mountinfo": OVERLAY_ROOT})
    assert doctor.container_engine(docker, environ={}) == "docker"
    by_cgroup = _fake_root(tmp_path / "c", {"proc/self/cgroup": "0::/system.slice/docker-3f2a.scope\n"})
    assert doctor.container_engine(by_cgroup, environ={}) == "docker"
    k8s = _fake_root(tmp_path / "k", {"proc/self/cgroup": "0::/kubepods/besteffort/pod1/abc\n"})
    assert doctor.container_engine(k8s, environ={}) == "kubepods"
    assert doctor.container_engine(_fake_root(tmp_path / "n", {}), environ={"container": "lxc"}) == "lxc"


def test_a_plain_host_and_a_vm_made_from_a_container_image_are_not_containers(tmp_path):
    host = _fake_root(tmp_path / "h", {"proc/self/cgroup": PLAIN_CGROUP, "proc/self/mountinfo": BLOCK_ROOT})
    assert doctor.container_engine(host, environ={}) is None
    # A VM image built from a docker image keeps /.dockerenv on its ext4 root: still the VM's own kernel.
    vm = _fake_root(tmp_path / "v", {".dockerenv": "", "proc/self/cgroup": PLAIN_CGROUP,
                                     "proc/self/mountinfo": BLOCK_ROOT})
    assert doctor.container_engine(vm, environ={}) is None


def test_doctor_says_plainly_that_a_container_drives_the_host_kernel():
    note = doctor.container_note("docker", "6.1.0-56-amd64")
    assert "inside a docker container" in note
    assert "drives the host's (6.1.0-56-amd64)" in note
    assert "native runs need a capable HOST kernel" in note
    for flag in ("--privileged", "--network host", "--pid host", "/lib/modules", "/usr/src"):
        assert flag in note
    results = [doctor.Check("container", True, note), doctor.Check("sch_netem", True, "works")]
    said = doctor.verdict(results)
    assert said.startswith("native: ") and said.endswith(f"Note: {note}.")
    # outside a container the verdict carries no such note
    assert "container" not in doctor.verdict(results[1:])


# `tc qdisc add|replace dev IFACE root|parent X [handle H] KIND ...`: the kind a batch line installs.
TC_KIND = re.compile(r"qdisc (?:add|replace) dev \S+ (?:root|parent \S+)(?: handle \S+)? (\w+)")


def test_doctor_probes_every_qdisc_a_run_installs_and_requires_no_other():
    """A qdisc doctor requires natively that no run installs (htb and tbf once) sends a host
    without it to the VM for nothing; one a run installs that doctor does not probe fails mid-run."""
    lossy = GOOD.replace("buffer_bdp: 1}", "buffer_bdp: 1, loss_pct: 1}")
    run = expand(parse_experiments(lossy, "exp.yaml"), "one")[0]
    installed = {TC_KIND.search(line)[1] for q in dumbbell.qdiscs(run, with_fq=True) for line in q.tc}
    probed = {q.module.removeprefix("sch_"): q.needed_for for q in doctor.QDISCS}
    assert installed == {"netem", "fq"}
    assert installed <= set(probed)
    for aqm in ("fq_codel", "codel", "pie", "red"):  # link.aqm's chains: probed, not required natively
        with_aqm = expand(parse_experiments(GOOD.replace("buffer_bdp: 1}", f"buffer_bdp: 5, aqm: {aqm}}}"),
                                            "exp.yaml"), "one")[0]
        kinds = {TC_KIND.search(line)[1] for q in dumbbell.qdiscs(with_aqm, with_fq=True) for line in q.tc}
        assert kinds - installed <= {k for k, n in probed.items() if n == "aqm"} and aqm in kinds
    assert {kind for kind, needed_for in probed.items() if needed_for == "native"} <= installed
