"""The User-Mode Linux kernel the UML engine boots: which series, where scripts/uml-kernel.sh caches
it and what it was built from.

A series is a Debian kernel source package, linux-source-<series>: 6.1 (the default) or 7.2, chosen
with $CCTEST_UML_SERIES by the script and by the engine alike. 7.2 can run guest processes under
seccomp instead of ptrace (`seccomp=on`: a guest system call is a signal in the process and a futex
hand-over to the kernel process, not a ptrace stop); $CCTEST_UML_USERSPACE says which (default: the
series' first, seccomp on 7.2).

The cache directory is `<cache root>/uml/<linux-source version>-<first 12 hex of the inputs'
sha256>/`, the inputs being the config fragment, the build identity (the KBUILD_BUILD_* words the
kernel prints about itself and mixes into its generator) and the series' patches
(scripts/uml/patches/<series>/, in name order), the cache root $CCTEST_CACHE, else
$XDG_CACHE_HOME/cctest, else ~/.cache/cctest (the same rule as the script). It holds `linux` (the
kernel, an ordinary host executable), `tree/` (the configured source with Module.symvers:
out-of-tree modules build against it) and `build.env` (series, version, inputs hash, kernel
release, build time).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import CctestError

REPO_ROOT = Path(__file__).resolve().parents[2]
FRAGMENT = REPO_ROOT / "scripts" / "uml" / "cctest.config"
PATCHES_ROOT = REPO_ROOT / "scripts" / "uml" / "patches"  # one directory per series
IDENTITY = REPO_ROOT / "scripts" / "uml" / "build-identity.env"
BUILD_SCRIPT = REPO_ROOT / "scripts" / "uml-kernel.sh"
HASH_CHARS = 12
SERIES_VAR = "CCTEST_UML_SERIES"
USERSPACE_VAR = "CCTEST_UML_USERSPACE"
DEFAULT_SERIES = "6.1"


class UMLKernelError(CctestError):
    pass


@dataclass(frozen=True)
class Series:
    """A kernel series the script can build: its Debian source package, its patches, and how it can
    run guest processes (the first is its default)."""

    name: str
    userspaces: tuple[str, ...]

    @property
    def package(self) -> str:
        return f"linux-source-{self.name}"

    @property
    def patches(self) -> Path:
        return PATCHES_ROOT / self.name

    def boot_words(self, userspace: str) -> list[str]:
        """The kernel command line's words for `userspace`: none on a series that only has ptrace
        (6.1 knows no `seccomp=`, and would hand the word to init), else `seccomp=on` or `=off`,
        explicit either way (on: the kernel refuses to boot rather than fall back to ptrace)."""
        if userspace not in self.userspaces:
            raise UMLKernelError(f"{USERSPACE_VAR}={userspace}: linux-source-{self.name} runs guest processes "
                                 f"under {' or '.join(self.userspaces)}")
        if self.userspaces == ("ptrace",):
            return []
        return ["seccomp=on" if userspace == "seccomp" else "seccomp=off"]


SERIES = {
    "6.1": Series("6.1", ("ptrace",)),
    "7.2": Series("7.2", ("seccomp", "ptrace")),
}


def series(environ: dict[str, str] | None = None) -> Series:
    """The series $CCTEST_UML_SERIES names (default 6.1)."""
    env = os.environ if environ is None else environ
    name = env.get(SERIES_VAR) or DEFAULT_SERIES
    if name not in SERIES:
        raise UMLKernelError(f"{SERIES_VAR}={name}: known series are {', '.join(SERIES)}")
    return SERIES[name]


def userspace(chosen: Series, environ: dict[str, str] | None = None) -> str:
    """How guest processes run on `chosen`: $CCTEST_UML_USERSPACE, else the series' default."""
    env = os.environ if environ is None else environ
    asked = env.get(USERSPACE_VAR) or chosen.userspaces[0]
    chosen.boot_words(asked)  # refuses a mode the series does not have
    return asked


def cache_root(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get("CCTEST_CACHE"):
        return Path(env["CCTEST_CACHE"]) / "uml"
    base = (Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME")
            else Path(env.get("HOME", "~")).expanduser() / ".cache")
    return base / "cctest" / "uml"


def inputs(fragment: Path = FRAGMENT, patches: Path | None = None, identity: Path = IDENTITY) -> list[Path]:
    """What a build is made from besides the source: the fragment, the build identity, then the
    patches (default: the selected series') by name."""
    patches = series().patches if patches is None else patches
    return [fragment, identity, *sorted(patches.glob("*.patch"))]


def inputs_sha256(fragment: Path = FRAGMENT, patches: Path | None = None, identity: Path = IDENTITY) -> str:
    """The sha256 of the inputs' bytes one after another (the script's `cat fragment identity
    patches | sha256sum`)."""
    digest = hashlib.sha256()
    for path in inputs(fragment, patches, identity):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def source_version(chosen: Series | None = None) -> str | None:
    """The installed source package's Debian version (default: the selected series'), or None."""
    package = (chosen or series()).package
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True)
    except OSError:
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def cache_key(version: str, sha256: str) -> str:
    return f"{version}-{sha256[:HASH_CHARS]}"


@dataclass(frozen=True)
class KernelBuild:
    """A complete cached build."""

    dir: Path
    version: str
    inputs_sha256: str
    release: str
    series: str = DEFAULT_SERIES

    @property
    def binary(self) -> Path:
        return self.dir / "linux"

    @property
    def tree(self) -> Path:
        return self.dir / "tree"

    def meta(self) -> dict:
        chosen = SERIES[self.series]
        return {"source": f"{chosen.package} {self.version}", "release": self.release,
                "inputs_sha256": self.inputs_sha256, "patches": [p.name for p in inputs(patches=chosen.patches)[2:]]}


def read_build(directory: Path) -> KernelBuild | None:
    """The build in `directory` if it is complete (binary, module tree, build.env), else None."""
    env_file = directory / "build.env"
    built = (directory / "linux").is_file() and (directory / "tree" / "Module.symvers").is_file()
    if not (built and env_file.is_file()):
        return None
    fields = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
    try:
        # builds before the patches hashed the fragment alone, as fragment_sha256
        inputs_hash = fields.get("inputs_sha256") or fields["fragment_sha256"]
        # builds before the series were 6.1's and say none
        return KernelBuild(directory, fields["version"], inputs_hash, fields["release"],
                           fields.get("series", DEFAULT_SERIES))
    except KeyError:
        return None


def find(environ: dict[str, str] | None = None, version: str | None = None,
         sha256: str | None = None) -> KernelBuild | None:
    """The cached build of the selected series for its installed source and this checkout's fragment
    and patches, or None. Where the source is not installed (an image that carries a build without
    the 140 MB source), the one complete build of the series and this checkout's inputs in the
    cache, whatever its source version."""
    chosen = series(environ)
    version = version or source_version(chosen)
    sha256 = sha256 or inputs_sha256(patches=chosen.patches)
    if version is None:
        found = [build for path in sorted(cache_root(environ).glob(f"*-{sha256[:HASH_CHARS]}"))
                 if (build := read_build(path)) is not None and build.inputs_sha256 == sha256
                 and build.series == chosen.name and path.name == cache_key(build.version, sha256)]
        return found[0] if len(found) == 1 else None
    build = read_build(cache_root(environ) / cache_key(version, sha256))
    ok = build is not None and build.inputs_sha256 == sha256 and build.series == chosen.name
    return build if ok else None


def stale_builds(environ: dict[str, str] | None = None) -> list[Path]:
    """Cached builds of other inputs or source versions (doctor mentions them: disk space)."""
    root = cache_root(environ)
    current = find(environ)
    return sorted(p for p in root.glob("*-*") if p.is_dir() and read_build(p) is not None
                  and (current is None or p != current.dir))


def require(environ: dict[str, str] | None = None) -> KernelBuild:
    build = find(environ)
    if build is not None:
        return build
    chosen = series(environ)
    version = source_version(chosen)
    sha256 = inputs_sha256(patches=chosen.patches)
    why = (f"{chosen.package} is not installed, and {cache_root(environ)} holds no single build of this "
           f"checkout's inputs (sha256 {sha256[:HASH_CHARS]})" if version is None
           else f"no build for {chosen.package} {version} with this checkout's "
                f"{FRAGMENT.relative_to(REPO_ROOT)} and {chosen.patches.relative_to(REPO_ROOT)}/ (sha256 "
                f"{sha256[:HASH_CHARS]}) under {cache_root(environ)}")
    script = BUILD_SCRIPT.relative_to(REPO_ROOT)
    run = str(script) if chosen.name == DEFAULT_SERIES else f"{SERIES_VAR}={chosen.name} {script}"
    raise UMLKernelError(f"the UML engine's kernel is not built: {why}; run {run} (about 10 min on 2 cores), "
                         "or use --engine qemu")
