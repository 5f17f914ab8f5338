"""cctest as a user installs it: the built wheel in a fresh venv, used from outside the checkout.

The fresh venv gets cctest only from the wheel; its dependencies come from the system's and this venv's
site-packages through a .pth file (no index is reached, and this checkout's editable install is
not activated: a .pth path line does not run the .pth files in that directory)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from tests import REPO

DEMO_RUN = REPO / "tests" / "fixtures" / "runs" / "demo-cubic-bbr-20261122-232527-base-r0"
SHIPPED = ("cctest", "modules", "pyproject.toml", "setup.py", "README.md", "LICENSE", "CITATION.cff")
# Imported by `cctest report` in a report-only install: none of the `run` extra.
BLOCK_RUN_EXTRA = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('pyroute2', 'virtme_ng', 'mininet'):
            raise ImportError(f'{name} is not installed (a report-only install)')
sys.meta_path.insert(0, Block())
from cctest.cli.main import main
main()
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(bin dir of a fresh venv with the built wheel installed, a directory outside the checkout)."""
    root = tmp_path_factory.mktemp("pkg")
    src = root / "src"
    for name in SHIPPED:
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(REPO / name, src / name)
    shutil.rmtree(src / "cctest" / "__pycache__", ignore_errors=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(src),
                    "-w", str(root / "dist")], check=True, cwd=root)
    wheel = next((root / "dist").glob("cctest-*.whl"))
    venv.create(root / "venv", with_pip=False, system_site_packages=True)  # Debian's PyYAML, as in .venv
    bin_dir = root / "venv" / "bin"
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(subprocess.run([str(bin_dir / "python"), "-c", purelib],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), "install", "-q", "--no-deps",
                    "--no-index", str(wheel)], check=True)
    outside = root / "elsewhere"
    outside.mkdir()
    return bin_dir, outside


def run(bin_dir: Path, *args, cwd: Path, env=None):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {}), "PATH": f"{bin_dir}:{os.environ['PATH']}"})


def test_the_wheel_ships_the_module_sources_and_the_licence(installed):
    bin_dir, outside = installed
    done = run(bin_dir, bin_dir / "python", "-c", "import cctest, cctest.kernel.projectccs as p; "
               "print(cctest.__file__); print(p.modules_dir()); print(p.build_dir()); "
               "print(' '.join(p.project_ccs()))", cwd=outside,
               env={"XDG_CACHE_HOME": str(outside / "cache")})
    assert done.returncode == 0, done.stderr
    package, modules, build, ccs = done.stdout.splitlines()
    assert str(REPO) not in package and "site-packages" in package  # the wheel's, not the checkout's
    assert modules.startswith(str(Path(package).parent)) and modules.endswith("_modules")
    assert build == str(outside / "cache" / "cctest" / "modules")
    assert {"bbr1", "bbr_cws", "bbr3", "bbr3plus"} <= set(ccs.split())
    licence = run(bin_dir, bin_dir / "python", "-c", "import importlib.metadata as m; "
                  "print([f.name for f in m.files('cctest') if f.name.startswith(('LICENSE', 'COPYING'))])",
                  cwd=outside)
    assert "LICENSE" in licence.stdout, licence.stdout + licence.stderr


def test_the_installed_cli_plans_the_demo_outside_the_checkout(installed):
    bin_dir, outside = installed
    done = run(bin_dir, "cctest", "run", "demo", "--dry-run", "-f", REPO / "experiments.yaml", cwd=outside)
    assert done.returncode == 0, done.stderr
    assert "tc qdisc" in done.stdout and "cubic" in done.stdout


def test_a_report_only_install_reports(installed):
    """`cctest report` imports nothing of the run extra (pyroute2, virtme-ng) nor mininet."""
    bin_dir, outside = installed
    done = run(bin_dir, bin_dir / "python", "-c", BLOCK_RUN_EXTRA, "report", DEMO_RUN, "-o", outside / "r.html",
               cwd=outside)
    assert done.returncode == 0, done.stderr
    assert (outside / "r.html").stat().st_size > 100_000 and (outside / "r.summary.csv").exists()


def _release_with_headers() -> str | None:
    for build in sorted(Path("/lib/modules").glob("*/build/Makefile")):
        return build.parent.parent.name
    return None


@pytest.mark.skipif(_release_with_headers() is None or shutil.which("make") is None,
                    reason="no kernel headers under /lib/modules/*/build (apt-get install linux-headers-amd64)")
def test_the_installed_package_builds_its_modules_into_the_user_cache(installed):
    bin_dir, outside = installed
    release = _release_with_headers()
    cache = outside / "cache"
    done = run(bin_dir, "cctest", "modules", "build", "-r", release, cwd=outside, env={"XDG_CACHE_HOME": str(cache)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    built = sorted(p.stem for p in (cache / "cctest" / "modules" / release).glob("*/*.ko"))
    assert {"bbr1", "bbr_cws", "bbr3", "bbr3plus"} <= set(built), built
