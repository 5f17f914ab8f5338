# cctest's image, two ways to run:
#   - native: the container drives the HOST kernel (its qdiscs, network namespaces and
#     congestion-control modules), so it runs privileged, in the host's network and PID namespaces,
#     with the host's /lib/modules and /usr/src;
#   - UML (`cctest run --vm --engine uml`): each run boots this project's User-Mode Linux kernel, an
#     ordinary process, inside the container; no privileges, two run flags (docs/docker.md).
# README.md, "Docker", and docs/docker.md have the exact build and run commands for docker and
# podman, and the optional build secrets:
#   ca_bundle  a CA bundle pip should trust (behind a TLS-inspecting proxy)
#   pip_conf   a pip.conf (index URL, mirror), used as PIP_CONFIG_FILE during the build only
#   pip_constraints  pip constraints (PIP_CONSTRAINT), e.g. a host venv's `pip freeze`: the same
#              package versions, so that a seeded UML run in the image repeats the host's exactly
# None ends up in the image. RUN --mount needs BuildKit (Docker >= 23's default) or podman/buildah.

# The UML kernel, two ways to the same directory (the target `uml-kernel`: only the kernel):
#   - from source (the default, the nightly's): the stage uml-kernel-source builds it with the
#     project's own script from the inputs it hashes (config fragment, build identity, patches) and
#     exports the binary and the part of the tree out-of-tree modules build against. The same inputs
#     give the same directory, <source version>-<inputs hash>, and the same kernel as on a host.
#     Only those files enter the stage, so a source edit does not rebuild it.
#   - already built: `--build-context uml-kernel=DIR` replaces the stage uml-kernel with DIR, which
#     `scripts/uml-kernel.sh --export DIR` fills from a host's build (the container test, in CI);
#     nothing is compiled. An empty DIR gives an image without the UML kernel.
# UML_SOURCE_VERSION pins Debian's linux-source-6.1 (e.g. to the version a host built from; the
# mirror must still carry it); empty: the mirror's current one.
FROM docker.io/library/debian:bookworm-slim AS uml-kernel-source
ARG UML_SOURCE_VERSION=
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "linux-source-6.1${UML_SOURCE_VERSION:+=$UML_SOURCE_VERSION}" flex bison bc xz-utils make gcc libc6-dev \
      binutils patch \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /build
COPY scripts/uml-kernel.sh scripts/
COPY scripts/uml/cctest.config scripts/uml/build-identity.env scripts/uml/
COPY scripts/uml/patches/ scripts/uml/patches/
# The 1.5 GB build directory goes once the export (87 MB) is made.
RUN export CCTEST_CACHE=/tmp/cache \
    && bash scripts/uml-kernel.sh \
    && bash scripts/uml-kernel.sh --export /export \
    && rm -rf /tmp/cache

FROM scratch AS uml-kernel
COPY --from=uml-kernel-source /export/ /

FROM docker.io/library/debian:bookworm-slim

# The emulation stack (mininet, tc, iperf3, ...), capture tools, make + gcc to build modules/ against
# the host's kernel headers (mounted at run time) or the UML tree, and busybox (a UML guest's init
# powers off with it). A UML guest's root is this image's: the guest runs these same programs.
# PyYAML is Debian's (the venv below sees it and pip leaves it), as in a Debian host's venv made by
# scripts/setup.sh where python3-yaml is installed: the same code in a seeded guest on either side.
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      python3 python3-venv python3-yaml mininet bridge-utils iproute2 ethtool iperf3 iputils-ping tcpdump bpftrace \
      kmod procps psmisc make gcc libc6-dev busybox-static \
    && rm -rf /var/lib/apt/lists/*

# Dependencies first, from pyproject.toml alone, so editing the sources reuses this layer.
WORKDIR /cctest
COPY pyproject.toml ./
RUN --mount=type=secret,id=ca_bundle,required=false --mount=type=secret,id=pip_conf,required=false \
    --mount=type=secret,id=pip_constraints,required=false \
    set -e; \
    if [ -s /run/secrets/ca_bundle ]; then export PIP_CERT=/run/secrets/ca_bundle; fi; \
    if [ -s /run/secrets/pip_conf ]; then export PIP_CONFIG_FILE=/run/secrets/pip_conf; fi; \
    if [ -s /run/secrets/pip_constraints ]; then export PIP_CONSTRAINT=/run/secrets/pip_constraints; fi; \
    python3 -m venv --system-site-packages /opt/venv; \
    python3 -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; print("\n".join(p["dependencies"] + p["optional-dependencies"]["run"]))' \
      > /tmp/requirements.txt; \
    /opt/venv/bin/pip install -q --no-cache-dir --disable-pip-version-check \
      "setuptools>=77" wheel -r /tmp/requirements.txt; \
    rm /tmp/requirements.txt

# The UML kernel where cctest looks for it: $CCTEST_CACHE/uml/<version>-<hash>/ (the binary, the
# tree modules build against, build.env). The image has no linux-source-6.1; cctest then takes the
# cached build of this checkout's inputs (cctest/emulation/umlkernel.py).
COPY --from=uml-kernel / /opt/cctest/cache/uml/
ENV CCTEST_CACHE=/opt/cctest/cache

# Editable, so the package finds modules/ beside it (cctest.kernel.kmod looks next to the package).
COPY . .
RUN /opt/venv/bin/pip install -q --no-cache-dir --disable-pip-version-check --no-deps --no-build-isolation -e .

# The commit the image was built from, recorded in each run's meta.json (the image has no .git):
#   --build-arg CCTEST_GIT_COMMIT=$(git rev-parse HEAD)
# The RUN makes the value part of the layer cache's key (buildah keys ENV by its unexpanded text).
ARG CCTEST_GIT_COMMIT=
RUN echo "${CCTEST_GIT_COMMIT:-unknown}" > /cctest/.built-from-commit
ENV CCTEST_GIT_COMMIT=$CCTEST_GIT_COMMIT PATH=/opt/venv/bin:$PATH
ENTRYPOINT ["cctest"]
CMD ["doctor"]
