# cctest for native runs on a capable Linux host. The container drives the HOST kernel (its qdiscs,
# network namespaces and congestion-control modules), so it runs privileged, in the host's network
# and PID namespaces, with the host's /lib/modules and /usr/src. README.md, "Docker", has the exact
# build and run commands for docker and podman, and the optional build secrets:
#   ca_bundle  a CA bundle pip should trust (behind a TLS-inspecting proxy)
#   pip_conf   a pip.conf (index URL, mirror), used as PIP_CONFIG_FILE during the build only
# Neither ends up in the image. RUN --mount needs BuildKit (Docker >= 23's default) or podman/buildah.
FROM docker.io/library/debian:bookworm-slim

# The emulation stack (mininet, tc, iperf3, ...), capture tools, and make + gcc to build modules/
# against the host's kernel headers (mounted at run time).
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      python3 python3-venv mininet bridge-utils iproute2 ethtool iperf3 iputils-ping tcpdump bpftrace \
      kmod procps psmisc make gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*

# Dependencies first, from pyproject.toml alone, so editing the sources reuses this layer.
WORKDIR /cctest
COPY pyproject.toml ./
RUN --mount=type=secret,id=ca_bundle,required=false --mount=type=secret,id=pip_conf,required=false \
    set -e; \
    if [ -s /run/secrets/ca_bundle ]; then export PIP_CERT=/run/secrets/ca_bundle; fi; \
    if [ -s /run/secrets/pip_conf ]; then export PIP_CONFIG_FILE=/run/secrets/pip_conf; fi; \
    python3 -m venv --system-site-packages /opt/venv; \
    python3 -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; print("\n".join(p["dependencies"] + p["optional-dependencies"]["run"]))' \
      > /tmp/requirements.txt; \
    /opt/venv/bin/pip install -q --no-cache-dir --disable-pip-version-check \
      "setuptools>=68" wheel -r /tmp/requirements.txt; \
    rm /tmp/requirements.txt

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
