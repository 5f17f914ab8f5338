# cctest for native runs on a capable Linux host (a kernel with sch_netem and loadable modules).
# The container drives the HOST kernel, so it needs:
#   docker build -t cctest .
#   docker run --rm -it --privileged --network host --pid host \
#     -v /lib/modules:/lib/modules:ro -v /usr/src:/usr/src:ro -v "$PWD/reports:/cctest/reports" \
#     cctest run demo
# (--network host: Mininet's bridges and namespaces are made in the host's network stack;
#  /lib/modules and /usr/src: the host kernel's headers, to build and load modules/.)
FROM debian:bookworm-slim
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      python3 python3-venv mininet bridge-utils iproute2 ethtool iperf3 iputils-ping tcpdump bpftrace \
      kmod procps psmisc make gcc git && rm -rf /var/lib/apt/lists/*
WORKDIR /cctest
COPY . .
RUN python3 -m venv --system-site-packages /opt/venv && /opt/venv/bin/pip install -q . \
    && rm -rf /root/.cache
ENV PATH=/opt/venv/bin:$PATH
ENTRYPOINT ["cctest"]
CMD ["doctor"]
