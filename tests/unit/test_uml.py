"""The UML engine without booting it: the kernel cache's rule (shared by scripts/uml-kernel.sh and
cctest/emulation/umlkernel.py), the boot command line, the engine choice, and the tracefs tracer's parsing of
a recorded trace (tests/fixtures/tracefs/)."""

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from cctest.base.errors import BadInput
from cctest.emulation import engines, uml, umlkernel, umlshare, vm
from cctest.host import tracefs
from cctest.host.captures import RunView
from cctest.host.captures.cc_state import ModuleState, parse_tracefs_state
from cctest.host.captures.tcp_probe import TCP_PROBE_MIN_GAP_NS, TcpProbe, parse_tracefs_probe
from cctest.host.captures.tracer import choose_tracer
from cctest.model.record import RunRecord
from tests import REPO

FIXTURES = REPO / "tests" / "fixtures" / "tracefs"


# -- the kernel cache -------------------------------------------------------------------------------

def test_cache_root_follows_cctest_cache_then_xdg_then_home():
    assert umlkernel.cache_root({"CCTEST_CACHE": "/c", "XDG_CACHE_HOME": "/x", "HOME": "/h"}) == Path("/c/uml")
    assert umlkernel.cache_root({"XDG_CACHE_HOME": "/x", "HOME": "/h"}) == Path("/x/cctest/uml")
    assert umlkernel.cache_root({"HOME": "/h"}) == Path("/h/.cache/cctest/uml")


def test_the_cache_key_changes_with_the_fragment_the_identity_and_the_patches(tmp_path):
    fragment, patches, identity = tmp_path / "f.config", tmp_path / "patches", tmp_path / "identity.env"
    patches.mkdir()
    fragment.write_text("CONFIG_UML_TIME_TRAVEL_SUPPORT=y\n")
    identity.write_text("KBUILD_BUILD_HOST=a\n")

    def key() -> str:
        return umlkernel.cache_key("6.1.192-2", umlkernel.inputs_sha256(fragment, patches, identity))

    keys = [key()]
    fragment.write_text("CONFIG_UML_TIME_TRAVEL_SUPPORT=y\nCONFIG_NET_SCH_CAKE=y\n")
    keys.append(key())
    identity.write_text("KBUILD_BUILD_HOST=b\n")
    keys.append(key())
    (patches / "a.patch").write_text("--- a/x\n+++ b/x\n")
    keys.append(key())
    (patches / "a.patch").write_text("--- a/x\n+++ b/x\n@@ -1 +1 @@\n")
    keys.append(key())
    assert len(set(keys)) == 5
    assert all(k.startswith("6.1.192-2-") and len(k.rsplit("-", 1)[1]) == 12 for k in keys)
    assert umlkernel.inputs(fragment, patches, identity) == [fragment, identity, patches / "a.patch"]


def _fake_build(directory: Path, version: str, sha256: str, complete: bool = True) -> None:
    (directory / "tree").mkdir(parents=True)
    (directory / "linux").write_bytes(b"\x7fELF")
    if complete:
        (directory / "tree" / "Module.symvers").write_text("")
    (directory / "build.env").write_text(f"version={version}\ninputs_sha256={sha256}\nrelease=6.1.192\n")


def test_find_takes_only_a_complete_build_of_this_fragment_and_patches(tmp_path):
    env = {"CCTEST_CACHE": str(tmp_path)}
    sha = umlkernel.inputs_sha256(patches=umlkernel.SERIES["6.1"].patches)
    assert umlkernel.find(env, version="6.1.192-2") is None
    _fake_build(tmp_path / "uml" / umlkernel.cache_key("6.1.192-2", "0" * 64), "6.1.192-2", "0" * 64)
    assert umlkernel.find(env, version="6.1.192-2") is None  # another fragment's build
    target = tmp_path / "uml" / umlkernel.cache_key("6.1.192-2", sha)
    _fake_build(target, "6.1.192-2", sha, complete=False)
    assert umlkernel.find(env, version="6.1.192-2") is None  # no Module.symvers: interrupted
    (target / "tree" / "Module.symvers").write_text("")
    build = umlkernel.find(env, version="6.1.192-2")
    assert build is not None and build.dir == target and build.release == "6.1.192"
    assert build.meta()["inputs_sha256"] == sha
    assert build.meta()["patches"] == ["host-xstate-size.patch", "rng-seed.patch"]


def test_without_the_source_installed_find_takes_the_one_build_of_these_inputs(tmp_path, monkeypatch):
    """An image carries the build but not linux-source-6.1 (Dockerfile): its version is the build's."""
    monkeypatch.setattr(umlkernel, "source_version", lambda chosen=None: None)
    env = {"CCTEST_CACHE": str(tmp_path)}
    sha = umlkernel.inputs_sha256(patches=umlkernel.SERIES["6.1"].patches)
    assert umlkernel.find(env) is None
    _fake_build(tmp_path / "uml" / umlkernel.cache_key("6.1.192-2", "0" * 64), "6.1.192-2", "0" * 64)
    assert umlkernel.find(env) is None  # another fragment's build
    first = tmp_path / "uml" / umlkernel.cache_key("6.1.192-3", sha)
    _fake_build(first, "6.1.192-3", sha)
    build = umlkernel.find(env)
    assert build is not None and build.dir == first and build.version == "6.1.192-3"
    _fake_build(tmp_path / "uml" / umlkernel.cache_key("6.1.193-1", sha), "6.1.193-1", sha)
    assert umlkernel.find(env) is None  # two source versions: which one the user means is not ours to guess
    with pytest.raises(umlkernel.UMLKernelError, match=r"linux-source-6\.1 is not installed, and .* holds no single"):
        umlkernel.require(env)


def test_without_the_source_installed_find_takes_only_a_build_of_the_selected_series(tmp_path, monkeypatch):
    """An image of 7.2 carries its build alone: a build of 7.2's inputs that says no series (6.1's
    build.env before the series) is not taken, one that says 7.2 is."""
    monkeypatch.setattr(umlkernel, "source_version", lambda chosen=None: None)
    env = {"CCTEST_CACHE": str(tmp_path), "CCTEST_UML_SERIES": "7.2"}
    sha = umlkernel.inputs_sha256(patches=umlkernel.SERIES["7.2"].patches)
    target = tmp_path / "uml" / umlkernel.cache_key("7.2.12-1~bpo13+1", sha)
    _fake_build(target, "7.2.12-1~bpo13+1", sha)
    assert umlkernel.find(env) is None
    with open(target / "build.env", "a") as f:
        f.write("series=7.2\n")
    build = umlkernel.find(env)
    assert build is not None and build.dir == target and build.series == "7.2"
    assert umlkernel.find({"CCTEST_CACHE": str(tmp_path)}) is None  # 6.1 selected: not 7.2's build


def _fake_tree_build(directory: Path) -> None:
    """A complete build as the script leaves it, with a file where each part an export keeps or
    drops lives."""
    tree = directory / "tree"
    for part in ("include/linux", "scripts/mod", "arch/um/include", "arch/x86/include", "arch/arm64", "net/ipv4"):
        (tree / part).mkdir(parents=True)
        (tree / part / "f").write_text(part)
    for name in ("Makefile", ".config", "Module.symvers", "arch/Kconfig"):
        (tree / name).write_text(name)
    (directory / "linux").write_bytes(b"\x7fELF")
    (directory / "linux").chmod(0o755)
    (directory / "build.env").write_text("version=x\n")


@pytest.mark.parametrize("series", sorted(umlkernel.SERIES))
def test_export_copies_the_selected_series_build_and_only_what_modules_build_against(tmp_path, series):
    chosen = umlkernel.SERIES[series]
    if umlkernel.source_version(chosen) is None:
        pytest.skip(f"{chosen.package} not installed")
    env = {**os.environ, "CCTEST_CACHE": str(tmp_path / "cache"), "CCTEST_UML_SERIES": series}
    script = ["bash", str(REPO / "scripts" / "uml-kernel.sh")]
    mine = Path(subprocess.run([*script, "--print"], env=env, capture_output=True, text=True,
                               check=True).stdout.strip())
    missing = subprocess.run([*script, "--export", str(tmp_path / "out")], env=env, capture_output=True, text=True)
    assert missing.returncode == 2 and f"no complete build in {mine}" in missing.stderr
    _fake_tree_build(mine)
    exported = subprocess.run([*script, "--export", str(tmp_path / "out")], env=env, capture_output=True,
                              text=True, check=True)
    out = tmp_path / "out" / mine.name
    assert exported.stdout.strip() == str(out)
    assert (out / "linux").exists() and (out / "build.env").exists()
    for kept in ("Makefile", ".config", "Module.symvers", "include/linux/f", "scripts/mod/f", "arch/Kconfig",
                 "arch/um/include/f", "arch/x86/include/f"):
        assert (out / "tree" / kept).exists(), kept
    assert not (out / "tree" / "net").exists() and not (out / "tree" / "arch" / "arm64").exists()
    usage = subprocess.run([*script, "--export"], env=env, capture_output=True, text=True)
    assert usage.returncode == 2 and "usage" in usage.stderr


@pytest.mark.parametrize("series", sorted(umlkernel.SERIES))
def test_the_build_script_and_python_agree_on_the_cache_directory(tmp_path, series):
    chosen = umlkernel.SERIES[series]
    version = umlkernel.source_version(chosen)
    if version is None:
        pytest.skip(f"{chosen.package} not installed")
    env = {**os.environ, "CCTEST_CACHE": str(tmp_path), "CCTEST_UML_SERIES": series}
    printed = subprocess.run(["bash", str(REPO / "scripts" / "uml-kernel.sh"), "--print"], env=env,
                             capture_output=True, text=True, check=True).stdout.strip()
    expected = umlkernel.cache_root({"CCTEST_CACHE": str(tmp_path)}) / umlkernel.cache_key(
        version, umlkernel.inputs_sha256(patches=chosen.patches))
    assert Path(printed) == expected


def test_the_build_script_knows_the_same_series():
    script = (REPO / "scripts" / "uml-kernel.sh").read_text()
    assert f'known_series="{" ".join(umlkernel.SERIES)}"' in script


@pytest.mark.skipif(umlkernel.source_version() is None, reason="linux-source-6.1 not installed")
def test_prune_keeps_this_checkouts_build_and_removes_the_others(tmp_path):
    env = {**os.environ, "CCTEST_CACHE": str(tmp_path)}
    script = ["bash", str(REPO / "scripts" / "uml-kernel.sh")]
    mine = Path(subprocess.run([*script, "--print"], env=env, capture_output=True, text=True,
                               check=True).stdout.strip())
    older, partial = mine.parent / "6.1.0-1-000000000000", mine.parent / ".build-abc123"
    for build in (mine, older, partial):
        (build / "tree").mkdir(parents=True)
        (build / "linux").write_bytes(b"\0" * 4096)
    pruned = subprocess.run([*script, "--prune"], env=env, capture_output=True, text=True, check=True)
    assert mine.exists() and (mine / "linux").exists()
    assert not older.exists() and not partial.exists()
    assert f"kept {mine}" in pruned.stdout and str(older) in pruned.stdout
    refused = subprocess.run([*script, "--purge"], env=env, capture_output=True, text=True)
    assert refused.returncode == 2 and "usage" in refused.stderr


def test_the_fragment_asks_for_what_the_engine_relies_on():
    options = dict(line.split("=", 1) for line in umlkernel.FRAGMENT.read_text().splitlines()
                   if line.startswith("CONFIG_"))
    for needed in ("UML_TIME_TRAVEL_SUPPORT", "HOSTFS", "BLOCK", "MODULES", "NET_NS", "VETH", "BRIDGE",
                   "NET_SCH_NETEM", "NET_SCH_TBF", "NET_SCH_HTB", "NET_SCH_FQ", "NET_SCH_FQ_CODEL",
                   "NET_SCH_CODEL", "NET_SCH_PIE", "NET_SCH_RED", "TCP_CONG_BBR", "EVENT_TRACING", "DEVTMPFS"):
        assert options.get(f"CONFIG_{needed}") == "y", needed
    assert options["CONFIG_RAID6_PQ_BENCHMARK"] == "n"  # busy-loops: hangs time-travel=inf-cpu


def test_require_says_how_to_build_when_nothing_is_cached(tmp_path):
    with pytest.raises(umlkernel.UMLKernelError, match=r"scripts/uml-kernel\.sh"):
        umlkernel.require({"CCTEST_CACHE": str(tmp_path)})


# -- the boot command line --------------------------------------------------------------------------

def _build(tmp_path) -> umlkernel.KernelBuild:
    return umlkernel.KernelBuild(tmp_path / "k", "6.1.192-2", "a" * 64, "6.1.192")


def test_kernel_command_pins_boots_time_travel_with_the_host_root_read_only(tmp_path):
    cmd = uml.kernel_command(_build(tmp_path), 3)
    assert cmd[:6] == ["taskset", "-c", "3", "setarch", "-R", str(tmp_path / "k" / "linux")]
    for word in ("time-travel=inf-cpu", "rootfstype=hostfs", "rootflags=/", "hostfs=/", "ro", "con0=fd:0,fd:1",
                 "init=/proc/self/cwd/init.sh"):
        assert word in cmd, word
    assert "rw" not in cmd


def test_the_kernel_command_line_holds_no_host_path(tmp_path):
    """The kernel mixes every word into its generator: the same words on every machine."""
    words = uml.kernel_command(_build(tmp_path), 0, seed=7)[6:]
    assert not any(str(REPO) in word or str(tmp_path) in word for word in words)
    assert words == uml.kernel_command(umlkernel.KernelBuild(Path("/elsewhere"), "6.1.192-2", "b" * 64, "6.1.192"),
                                       1, seed=7)[6:]


def test_a_seed_replaces_the_hosts_entropy_and_fixes_the_calendar(tmp_path):
    unseeded = uml.kernel_command(_build(tmp_path), 0)
    assert not any(w.startswith(("rng-seed=", "time-travel-start=")) for w in unseeded)
    seeded = uml.kernel_command(_build(tmp_path), 0, seed=7)
    assert "rng-seed=7" in seeded and "time-travel-start=946684800000000000" in seeded


@pytest.mark.parametrize("series", sorted(umlkernel.SERIES))
def test_the_rng_seed_patch_reads_the_parameter_and_shuts_out_the_hosts_entropy(series):
    patch = (umlkernel.SERIES[series].patches / "rng-seed.patch").read_text()
    for touched in ("arch/um/kernel/um_arch.c", "arch/um/include/asm/archrandom.h", "arch/um/drivers/random.c"):
        assert f"+++ b/{touched}" in patch, touched
    assert '__uml_setup("rng-seed="' in patch and "+	if (uml_rng_seeded)" in patch


def test_the_series_comes_from_the_environment_and_6_1_stays_the_default():
    assert umlkernel.series({}).name == "6.1"
    assert umlkernel.series({"CCTEST_UML_SERIES": "7.2"}).package == "linux-source-7.2"
    assert umlkernel.series({"CCTEST_UML_SERIES": "7.2"}).patches == REPO / "scripts" / "uml" / "patches" / "7.2"
    with pytest.raises(umlkernel.UMLKernelError, match="known series"):
        umlkernel.series({"CCTEST_UML_SERIES": "5.10"})


def test_each_series_hashes_its_own_patches_and_6_1s_key_did_not_move():
    """6.1's inputs are the bytes they were before the series had directories of their own: its
    cached builds stay valid."""
    keys = {name: umlkernel.inputs_sha256(patches=s.patches) for name, s in umlkernel.SERIES.items()}
    assert len(set(keys.values())) == len(keys)
    assert [p.name for p in umlkernel.inputs(patches=umlkernel.SERIES["6.1"].patches)[2:]] == [
        "host-xstate-size.patch", "rng-seed.patch"]
    # 7.2 sizes the host's FP state itself (host_fp_size): only the seed's patch
    assert [p.name for p in umlkernel.inputs(patches=umlkernel.SERIES["7.2"].patches)[2:]] == ["rng-seed.patch"]


def test_find_takes_only_a_build_of_the_selected_series(tmp_path):
    env = {"CCTEST_CACHE": str(tmp_path), "CCTEST_UML_SERIES": "7.2"}
    sha = umlkernel.inputs_sha256(patches=umlkernel.SERIES["7.2"].patches)
    target = tmp_path / "uml" / umlkernel.cache_key("7.2.12-1~bpo13+1", sha)
    _fake_build(target, "7.2.12-1~bpo13+1", sha)
    assert umlkernel.find(env, version="7.2.12-1~bpo13+1") is None  # build.env says no series: 6.1's
    with open(target / "build.env", "a") as f:
        f.write("series=7.2\n")
    build = umlkernel.find(env, version="7.2.12-1~bpo13+1")
    assert build is not None and build.series == "7.2"
    assert build.meta()["source"] == "linux-source-7.2 7.2.12-1~bpo13+1"
    assert build.meta()["patches"] == ["rng-seed.patch"]


def test_the_userspace_mode_is_a_word_of_the_command_line_only_where_the_series_has_it(tmp_path):
    old = uml.kernel_command(_build(tmp_path), 0, seed=7)
    assert not any(w.startswith("seccomp=") for w in old)
    with pytest.raises(umlkernel.UMLKernelError, match="ptrace"):
        uml.kernel_command(_build(tmp_path), 0, userspace="seccomp")
    new = umlkernel.KernelBuild(tmp_path / "k", "7.2.12-1~bpo13+1", "a" * 64, "7.2.12", "7.2")
    assert "seccomp=on" in uml.kernel_command(new, 0)
    assert "seccomp=off" in uml.kernel_command(new, 0, userspace="ptrace")
    assert umlkernel.userspace(umlkernel.SERIES["7.2"], {}) == "seccomp"
    assert umlkernel.userspace(umlkernel.SERIES["7.2"], {"CCTEST_UML_USERSPACE": "ptrace"}) == "ptrace"
    with pytest.raises(umlkernel.UMLKernelError):
        umlkernel.userspace(umlkernel.SERIES["6.1"], {"CCTEST_UML_USERSPACE": "seccomp"})
    engine = engines.UmlEngine(new, "seccomp")
    assert engine.meta()["userspace"] == "seccomp" and "seccomp" in engine.describe()
    assert "userspace" not in engines.UmlEngine(_build(tmp_path)).meta()  # 6.1: ptrace, as before


def test_the_command_file_execs_the_command_from_the_checkouts_fixed_place():
    text = uml.command_file_text(["python3", "-m", "cctest", "run", "a b"], {"X": "1 2", "CCTEST_VM_ENGINE": "uml"})
    assert text.startswith("cd /run/share/src && exec env X='1 2' CCTEST_VM_ENGINE=uml python3 -m cctest run 'a b'")


def test_a_home_links_the_checkout_and_venv_and_names_its_files_at_fixed_places(tmp_path):
    home = umlshare.prepare(tmp_path / "out", 4)
    assert home.path == tmp_path / "out" / ".uml-4" and home.written.is_dir() and not any(home.written.iterdir())
    assert (home.path / "src").resolve() == REPO and (home.path / "init.sh").read_bytes() == umlshare.INIT.read_bytes()
    assert home.plan == home.path / "plan.json" and home.guest(home.plan) == "/run/share/home/plan.json"
    assert home.guest(home.manifest) == "/run/share/home/manifest.txt"
    assert home.to_host("/run/share/out/s/run-1") == tmp_path / "out" / "s" / "run-1"
    (home.written / "stale").write_text("x")
    assert not (umlshare.prepare(tmp_path / "out", 4).written / "stale").exists()  # a left-over is replaced


def test_the_guest_s_python_runs_no_pth_file_and_finds_its_packages_on_pythonpath(tmp_path):
    """The guest's cctest runs `python -S` with the site directories `site` would add on PYTHONPATH
    (by the guest's names), and the settings that keep it from reading what differs between machines."""
    dirs = umlshare.guest_site_dirs()
    if umlshare.in_venv():
        assert dirs[0] == str(umlshare.GUEST_VENV / Path(sysconfig.get_paths()["purelib"]).relative_to(sys.prefix))
    assert all(not d.startswith(sys.prefix + "/") for d in dirs)  # never a host path into the venv
    env = umlshare.guest_python_env()
    assert env["PYDANTIC_DISABLE_PLUGINS"] == "__all__"
    assert env["PYTHONCOERCECLOCALE"] == "0" and env["PYTHONUTF8"] == "1"
    # The same directories by their host names: an interpreter that runs no .pth file imports the run path.
    pth = tmp_path / "site"
    pth.mkdir()
    (pth / "zz-probe.pth").write_text(f"import pathlib; pathlib.Path({str(tmp_path / 'ran')!r}).touch()\n")
    host_dirs = [d.replace(str(umlshare.GUEST_VENV), sys.prefix, 1) for d in dirs]
    probe = ("import sys, locale, cctest.run.session, pydantic, yaml\n"
             "print(sys.flags.no_site, locale.setlocale(locale.LC_CTYPE))")
    out = subprocess.run([sys.executable, *umlshare.GUEST_PYTHON_FLAGS, "-c", probe], capture_output=True, text=True,
                         env={"PATH": os.environ["PATH"], "PYTHONPATH": ":".join([str(REPO), str(pth), *host_dirs]),
                              **env})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "C"] and not (tmp_path / "ran").exists()


def test_whether_the_checkout_has_modules_does_not_depend_on_directory_order(tmp_path, monkeypatch):
    """Every entry is looked at, in whichever order the file system lists them: in a seeded guest
    each failed lookup moves the clock, so stopping at the first match made the count depend on it."""
    from cctest.kernel import projectccs

    for name in ("a", "b", "common"):
        (tmp_path / name).mkdir()
    (tmp_path / "b" / "Kbuild").write_text("obj-m += b.o\n")
    (tmp_path / "common" / "Kbuild").write_text("obj-m += c.o\n")
    real = Path.glob
    for order in (sorted, lambda found: sorted(found, reverse=True)):
        taken = []

        def glob(self, pattern, order=order, taken=taken):
            for path in order(real(self, pattern)):
                taken.append(path.parent.name)
                yield path
        monkeypatch.setattr(Path, "glob", glob)
        assert projectccs._has_trees(tmp_path)
        assert sorted(taken) == ["b", "common"]
    assert not projectccs._has_trees(tmp_path / "a")


def test_collect_merges_the_guests_runs_into_out(tmp_path):
    out = tmp_path / "out"
    (out / "s" / "earlier").mkdir(parents=True)
    home = umlshare.prepare(out, 0)
    (home.written / "s" / "run-1").mkdir(parents=True)
    (home.written / "s" / "run-1" / "meta.json").write_text("{}")
    home.collect()
    assert sorted(p.name for p in (out / "s").iterdir()) == ["earlier", "run-1"]
    assert (out / "s" / "run-1" / "meta.json").read_text() == "{}" and not any(home.written.iterdir())


def test_instances_get_distinct_cpus_while_there_are_cpus():
    assert [uml.cpu_for(k, [0, 1]) for k in range(3)] == [0, 1, 0]
    assert uml.cpu_for(0, [2, 5]) == 2
    assert uml.cpu_for(1) in os.sched_getaffinity(0)


def test_the_init_script_waits_mounts_and_powers_off():
    init = (REPO / "scripts" / "uml" / "init.sh").read_text()
    assert os.access(REPO / "scripts" / "uml" / "init.sh", os.X_OK)
    for needed in ("sleep 1.5", "-t tracefs", "-t devtmpfs", "-t devpts", "tmpfs /tmp", "share=/proc/self/cwd",
                   'mount -t hostfs -o "$share"', 'mount -r -t hostfs -o "$share/src"', "dmesg >", "poweroff -f"):
        assert needed in init, needed
    assert subprocess.run(["sh", "-n", str(REPO / "scripts" / "uml" / "init.sh")]).returncode == 0


def test_a_guest_that_wrote_no_exit_code_never_counts_as_success(tmp_path):
    proc = subprocess.Popen(["true"])
    proc.wait()
    assert uml.Instance(proc, umlshare.prepare(tmp_path, 0), 0, 0, tmp_path / "log").returncode == 1
    home = umlshare.prepare(tmp_path, 0)
    home.exit_file.write_text("3\n")
    home.dmesg.write_text("[    0.0] Linux version 6.1\n")
    instance = uml.Instance(proc, home, 0, 0, tmp_path / "log")
    assert instance.returncode == 3
    assert not home.dmesg.exists() and not home.console.exists()  # read once, the log moved beside the runs
    assert instance.dmesg_file == tmp_path / ".uml-dmesg-0.txt" and instance.dmesg_problems() == []


# -- what the host (a container) must allow ---------------------------------------------------------

def test_the_memory_file_goes_where_uml_puts_it():
    shm = "shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k 0 0\n"
    assert uml.memory_dir({"TMPDIR": "/a", "TMP": "/b"}, shm) == Path("/a")
    assert uml.memory_dir({"TEMP": "/c"}, shm) == Path("/c")
    assert uml.memory_dir({}, shm) == Path("/dev/shm")
    assert uml.memory_dir({}, "overlay / overlay rw 0 0\n") == Path("/tmp")  # no tmpfs on /dev/shm


class _FS:
    def __init__(self, flag: int, mb: int):
        self.f_flag, self.f_blocks, self.f_frsize = flag, mb * 256, 4096


def test_host_problems_name_a_noexec_or_small_memory_dir_and_a_refused_setarch(tmp_path, monkeypatch):
    env = {"TMPDIR": str(tmp_path)}
    monkeypatch.setattr(uml.os, "statvfs", lambda _: _FS(os.ST_NOSUID, 8192))
    monkeypatch.setattr(uml.subprocess, "run", lambda cmd, **kwargs: subprocess.CompletedProcess(cmd, 0, "", ""))
    assert uml.host_problems(env) == []
    monkeypatch.setattr(uml.os, "statvfs", lambda _: _FS(os.ST_NOEXEC | os.ST_NOSUID, 65536))
    (said,) = uml.host_problems(env)
    assert "mounted noexec" in said and "--tmpfs /dev/shm:rw,exec" in said
    monkeypatch.setattr(uml.os, "statvfs", lambda _: _FS(os.ST_NOSUID, 64))
    (said,) = uml.host_problems(env)
    assert "holds only 64 MB" in said
    monkeypatch.setattr(uml.os, "statvfs", lambda _: _FS(0, 8192))

    def refused(cmd, **kwargs):
        return subprocess.CompletedProcess(cmd, 1, "", "setarch: failed to set personality to (null): "
                                           "Function not implemented")
    monkeypatch.setattr(uml.subprocess, "run", refused)
    (said,) = uml.host_problems(env)
    assert "personality(ADDR_NO_RANDOMIZE)" in said and "Function not implemented" in said


# -- choosing the engine -----------------------------------------------------------------------------

def test_uml_refuses_qemu_options():
    with pytest.raises(vm.VMOptionError, match="--kernel"):
        engines.choose("uml", "/boot/vmlinuz", vm.VMClock())
    with pytest.raises(vm.VMOptionError, match="time-travel"):
        engines.choose("uml", None, vm.VMClock("wall"))
    with pytest.raises(vm.VMOptionError, match="allowed values are auto, qemu, uml"):
        engines.choose("bochs", None, vm.VMClock())


def test_auto_is_uml_where_its_kernel_is_built_and_no_qemu_option_is_given(tmp_path, monkeypatch):
    monkeypatch.setattr(umlkernel, "find", lambda: _build(tmp_path))
    assert engines.resolve("auto", None, vm.VMClock()) == "uml"
    assert engines.resolve("auto", "/boot/vmlinuz", vm.VMClock()) == "qemu"  # --kernel is QEMU's
    assert engines.resolve("auto", None, vm.VMClock("wall")) == "qemu"
    assert engines.resolve("auto", None, vm.VMClock(shift=3)) == "qemu"
    assert engines.resolve("qemu", None, vm.VMClock()) == "qemu"  # named: as named
    monkeypatch.setattr(umlkernel, "find", lambda: None)
    assert engines.resolve("auto", None, vm.VMClock()) == "qemu"  # nothing built: QEMU needs nothing


def test_the_uml_guest_is_told_its_engine_and_kernel_build(tmp_path):
    engine = engines.UmlEngine(_build(tmp_path))
    env = engine.guest_env(cpu=1)
    assert env["CCTEST_VM_ENGINE"] == "uml" and env["CCTEST_VM_VCPUS"] == "1"
    meta = json.loads(env["CCTEST_ENGINE_META"])
    assert meta["name"] == "uml" and meta["host_cpu"] == 1 and meta["kernel"]["release"] == "6.1.192"
    assert meta["kernel"]["inputs_sha256"] == "a" * 64
    assert engine.module_build() == (tmp_path / "k" / "tree", ("ARCH=um",))


def test_a_seeded_guest_records_its_seed_and_keeps_its_calendar(tmp_path, monkeypatch):
    from cctest.host import vmtime

    env = engines.UmlEngine(_build(tmp_path)).guest_env(cpu=1, seed=5)
    assert json.loads(env["CCTEST_ENGINE_META"])["rng_seed"] == 5 and env["CCTEST_VM_FIXED_CALENDAR"] == "1"
    assert "CCTEST_VM_FIXED_CALENDAR" not in engines.UmlEngine(_build(tmp_path)).guest_env(cpu=1)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("CCTEST_HOST_CLOCK_FILE", str(tmp_path / ".host-clock"))
    monkeypatch.setattr(vmtime.time, "clock_settime", lambda *a: pytest.fail("set the fixed calendar"))
    vmtime.sync_realtime()
    # run ids and timestamps come from the host's clock (a file's time on the share) instead
    monkeypatch.setattr(vmtime, "host_wall_time", lambda: 1_700_000_000.5)
    assert vmtime.calendar_now() == 1_700_000_000.5


def test_meta_json_records_the_engine(monkeypatch):
    from cctest.host.rundir import engine_meta

    monkeypatch.delenv("CCTEST_ENGINE_META", raising=False)
    assert engine_meta("native") == {"name": "native"}
    monkeypatch.setenv("CCTEST_ENGINE_META", json.dumps({"name": "uml", "time_travel": "inf-cpu"}))
    assert engine_meta("vm")["name"] == "uml"


# -- the tracer and its parsing --------------------------------------------------------------------

def test_uml_always_traces_through_tracefs():
    assert choose_tracer(True, {"CCTEST_VM_ENGINE": "uml"}) == "tracefs"
    assert choose_tracer(True, {}) == "bpftrace"
    assert choose_tracer(False, {}) == "tracefs"
    assert choose_tracer(True, {"CCTEST_TRACER": "tracefs"}) == "tracefs"
    with pytest.raises(BadInput, match="CCTEST_TRACER=perf: allowed values are bpftrace, tracefs"):
        choose_tracer(True, {"CCTEST_TRACER": "perf"})


def test_parse_line_reads_the_mono_clock_in_nanoseconds():
    line = "   python3-12 [000] ..s2.    12.000345: tcp_probe: family=AF_INET src=10.0.0.1:40000 dest=10.0.0.2:5201"
    t_ns, event, body = tracefs.parse_line(line)
    assert (t_ns, event) == (12_000_345_000, "tcp_probe") and body.startswith("family=")
    assert tracefs.parse_line("# tracer: nop") is None
    assert tracefs.parse_line("CPU:0 [LOST 12 EVENTS]") is None


def test_thinning_keeps_one_event_per_socket_per_10_ms():
    def line(t_us, sport, cwnd):
        return (f" iperf3-1 [000] ..s1. {t_us // 1_000_000}.{t_us % 1_000_000:06d}: tcp_probe: family=AF_INET "
                f"src=10.0.0.1:{sport} dest=10.0.0.2:5201 mark=0x0 data_len=0 snd_nxt=0x1 snd_una=0x1 "
                f"snd_cwnd={cwnd} ssthresh=2147483647 snd_wnd=1000 srtt=20000 rcv_wnd=1000 sock_cookie=1")
    text = "\n".join([line(1_000_000, 40000, 10), line(1_005_000, 40000, 11), line(1_006_000, 40001, 5),
                      line(1_010_000, 40000, 12), line(1_019_999, 40000, 13), line(1_020_000, 40000, 14)])
    df = parse_tracefs_probe(text)
    assert list(zip(df["sport"], df["snd_cwnd"], strict=True)) == [(40000, 10), (40001, 5), (40000, 12), (40000, 14)]
    assert df["srtt_ms"].iloc[0] == 20.0 and df["ssthresh"].isna().all()
    assert TCP_PROBE_MIN_GAP_NS == 10_000_000


@pytest.mark.skipif(not (FIXTURES / "trace.log").exists(), reason="no recorded trace")
def test_a_recorded_uml_trace_gives_the_tcp_probe_and_cc_state_tables():
    """tests/fixtures/tracefs/: a trace recorded in the UML guest (one bbr_cws and one cubic flow)
    with the meta.json and port map of its run."""
    text = (FIXTURES / "trace.log").read_text()
    info = json.loads((FIXTURES / "run.json").read_text())
    run = RunView.of(RunRecord.model_validate(info["meta"]))
    run.ports = {int(k): v for k, v in info["ports"].items()}
    probe = TcpProbe().parse({"tracefs.log": text}, run)["tcp_probe"]
    assert set(probe["flow"]) == set(run.ports)
    for _, per_flow in probe.groupby("flow"):
        gaps = per_flow["t_s"].diff().dropna()
        assert (gaps >= 0.010 - 1e-9).all()  # thinned
        assert per_flow["srtt_ms"].max() > info["meta"]["link"]["rtt_ms"] * 0.9  # a real path's RTT
    assert (probe["snd_cwnd"] > 0).all()
    state = ModuleState().parse({"tracefs.log": text}, run)["cc_state"]
    module_flows = {f["flow"] for f in info["meta"]["flows"] if f["cc"] == "bbr_cws"}
    assert set(state["flow"]) == module_flows and set(state["cc"]) == {"bbr_cws"}
    assert {"mode", "bw_bps", "min_rtt_us", "pacing_gain", "cwnd_gain", "cwnd"} <= set(state["key"])
    assert set(parse_tracefs_state(text)["sport"]) >= {run.ports[f] for f in module_flows}


def test_console_phases_time_each_run_by_the_host_stamped_lines():
    log = "\n".join([
        "[    0.010]   node   0: [mem 0x0-0x8b418fff]",  # boot noise before any run
        "[    1.200] \x1b[92m──── \x1b[0mdemo base repetition \x1b[1;36m0\x1b[0m ────",
        "[    1.300]   load modules", "[    2.000]   build topology", "[    2.100] ccs1: port 1 entered forwarding",
        "[    4.000]   warm-up: base RTT", "[    5.000]   flows", "[   25.000]   teardown",
        "[   26.000] ──── demo base repetition 1 ────", "[   26.500]   flows", "[   40.000]   teardown",
    ])
    runs = uml.console_phases(log)
    assert len(runs) == 2
    assert runs[0]["teardown"] - runs[0]["flows"] == 20.0 and runs[0]["warm-up: base RTT"] == 4.0
    assert runs[1] == {"flows": 26.5, "teardown": 40.0}


def test_the_console_pump_follows_the_file_and_stamps_each_line(tmp_path):
    console, log = tmp_path / "c.raw", tmp_path / "c.log"
    console.write_bytes(b"one\ntwo\npart")

    class Ended:  # the guest has ended: the pump reads what is there once more, then stops
        def poll(self):
            return 0

    uml._pump(Ended(), console, log, echo=False)
    lines = log.read_text().splitlines()
    assert [line.split("] ", 1)[1] for line in lines] == ["one", "two", "part"]
    assert all(line.startswith("[") and line[1:10].strip().replace(".", "").isdigit() for line in lines)


def test_every_run_boots_its_own_guest_with_its_own_seed_and_slots_are_reused(tmp_path, monkeypatch):
    """-j only says how many guests run at once: every run gets a fresh kernel seeded with its own
    seed, so neither -j nor a shard can change what a run measures; guests never share a CPU slot."""
    from rich.console import Console

    from cctest.model import guestplan
    from cctest.model.plan import expand
    from cctest.model.scenario import parse_experiments
    from cctest.run import session

    class Done:
        returncode = 0

        def poll(self):
            return 0

    class Recording:
        name = "uml"
        boot_per_run = True
        seeds: list = []
        slots: list = []
        plans: list = []

        def describe(self):
            return "recording"

        def places(self, out, index):
            return engines.Places(python="python3", src="/src", plan=str(out / f"p{index}"), out=str(out),
                                  manifest=str(out / f"m{index}"), host_plan=out / f"p{index}",
                                  host_manifest=out / f"m{index}", to_host=Path)

        def start(self, guest_cmd, places, index, log, seed=None, slot=None):
            self.seeds.append(seed)
            self.slots.append(slot)
            assert guest_cmd[-2:] == ["guest-run", places.plan]
            self.plans.append(guestplan.read(places.host_plan))
            return Done()

        def stop_all(self, guests):
            pass

        def problems(self, guests):
            return []

    specs = expand(parse_experiments("scenarios:\n  s:\n    link: {rate_mbps: 10, rtt_ms: 10, buffer_bdp: 1}\n"
                                     "    flows: [{cc: cubic}]\n    duration_s: 5\n    seed: 40\n"
                                     "    repetitions: 4\n", "exp.yaml"), "s")
    monkeypatch.setattr(session, "finalize_each", lambda dirs, console, failures: None)
    monkeypatch.setattr(session, "_available_memory_gb", lambda: 64.0)
    engine = Recording()
    opts = session.RunOptions(source=Path("experiments.yaml"), names=["s"], out=tmp_path, mode="vm", kernel=None,
                              kvm=False, clock=vm.VMClock(), jobs=2, engine="uml")
    monkeypatch.setattr(session, "POOL_POLL_S", 0.0)
    session._boot_and_ingest(specs, opts, Console(file=open(os.devnull, "w")), engine)
    assert sorted(engine.seeds) == sorted(spec.seed for spec in specs) and len(set(engine.seeds)) == 4
    # one run each, the one the guest's kernel is seeded for
    assert [[run.seed for run in plan.runs] for plan in engine.plans] == [[seed] for seed in engine.seeds]
    assert set(engine.slots) == {0, 1}


def test_guests_find_every_cctest_module_compiled():
    """A guest's root is read-only: bytecode the host did not write is compiled in every guest."""
    import importlib.util

    from cctest.emulation import vm

    vm.precompile_package()
    package = Path(vm.__file__).resolve().parent
    stale = [str(source.relative_to(package)) for source in package.rglob("*.py")
             if not Path(importlib.util.cache_from_source(str(source))).is_file()
             or Path(importlib.util.cache_from_source(str(source))).stat().st_mtime < source.stat().st_mtime]
    assert stale == []
