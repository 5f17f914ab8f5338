"""The User-Mode Linux kernel the UML engine boots: where scripts/uml-kernel.sh caches it and what
it was built from.

The cache directory is `<cache root>/uml/<linux-source version>-<first 12 hex of the inputs'
sha256>/`, the inputs being the config fragment, the build identity (the KBUILD_BUILD_* words the
kernel prints about itself and mixes into its generator) and the patches (scripts/uml/patches/, in
name order), the cache root $CCTEST_CACHE, else $XDG_CACHE_HOME/cctest, else ~/.cache/cctest (the
same rule as the script). It holds `linux` (the kernel, an ordinary host executable), `tree/` (the
configured source with Module.symvers: out-of-tree modules build against it) and `build.env`
(version, inputs hash, kernel release, build time).
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
PATCHES = REPO_ROOT / "scripts" / "uml" / "patches"
IDENTITY = REPO_ROOT / "scripts" / "uml" / "build-identity.env"
BUILD_SCRIPT = REPO_ROOT / "scripts" / "uml-kernel.sh"
SOURCE_PACKAGE = "linux-source-6.1"
HASH_CHARS = 12


class UMLKernelError(CctestError):
    pass


def cache_root(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get("CCTEST_CACHE"):
        return Path(env["CCTEST_CACHE"]) / "uml"
    base = (Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME")
            else Path(env.get("HOME", "~")).expanduser() / ".cache")
    return base / "cctest" / "uml"


def inputs(fragment: Path = FRAGMENT, patches: Path = PATCHES, identity: Path = IDENTITY) -> list[Path]:
    """What a build is made from besides the source: the fragment, the build identity, then the
    patches by name."""
    return [fragment, identity, *sorted(patches.glob("*.patch"))]


def inputs_sha256(fragment: Path = FRAGMENT, patches: Path = PATCHES, identity: Path = IDENTITY) -> str:
    """The sha256 of the inputs' bytes one after another (the script's `cat fragment identity
    patches | sha256sum`)."""
    digest = hashlib.sha256()
    for path in inputs(fragment, patches, identity):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def source_version() -> str | None:
    """The installed linux-source-6.1's Debian version, or None."""
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", SOURCE_PACKAGE], capture_output=True, text=True)
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

    @property
    def binary(self) -> Path:
        return self.dir / "linux"

    @property
    def tree(self) -> Path:
        return self.dir / "tree"

    def meta(self) -> dict:
        return {"source": f"{SOURCE_PACKAGE} {self.version}", "release": self.release,
                "inputs_sha256": self.inputs_sha256, "patches": [p.name for p in inputs()[2:]]}


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
        return KernelBuild(directory, fields["version"], inputs_hash, fields["release"])
    except KeyError:
        return None


def find(environ: dict[str, str] | None = None, version: str | None = None,
         sha256: str | None = None) -> KernelBuild | None:
    """The cached build for the installed source and this checkout's fragment and patches, or None.
    Where the source is not installed (an image that carries a build without the 140 MB source),
    the one complete build of this checkout's inputs in the cache, whatever its source version."""
    version = version or source_version()
    sha256 = sha256 or inputs_sha256()
    if version is None:
        found = [build for path in sorted(cache_root(environ).glob(f"*-{sha256[:HASH_CHARS]}"))
                 if (build := read_build(path)) is not None and build.inputs_sha256 == sha256
                 and path.name == cache_key(build.version, sha256)]
        return found[0] if len(found) == 1 else None
    build = read_build(cache_root(environ) / cache_key(version, sha256))
    return build if build is not None and build.inputs_sha256 == sha256 else None


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
    why = (f"{SOURCE_PACKAGE} is not installed, and {cache_root(environ)} holds no single build of this "
           f"checkout's inputs (sha256 {inputs_sha256()[:HASH_CHARS]})" if source_version() is None
           else f"no build for {SOURCE_PACKAGE} {source_version()} with this checkout's "
                f"{FRAGMENT.relative_to(REPO_ROOT)} and {PATCHES.relative_to(REPO_ROOT)}/ (sha256 "
                f"{inputs_sha256()[:HASH_CHARS]}) under {cache_root(environ)}")
    raise UMLKernelError(f"the UML engine's kernel is not built: {why}; run "
                         f"{BUILD_SCRIPT.relative_to(REPO_ROOT)} (about 10 min on 2 cores), or use --engine qemu")
