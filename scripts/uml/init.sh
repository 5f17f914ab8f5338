#!/bin/sh
# PID 1 of a cctest User-Mode Linux guest (cctest/uml.py boots it with the host's root read-only
# over hostfs). Mounts what a run needs, waits until guest uptime passes 1.5 s (iputils ping
# ignores -i while CLOCK_MONOTONIC is below 1 s: boot takes no guest time under time-travel), runs
# the command file the host wrote, keeps the guest's dmesg and exit code on the writable share,
# and powers off. The KEY=value words of the kernel command line arrive here as the environment.
#   CCTEST_UML_OUT      host directory shared read-write at the same path
#   CCTEST_UML_COMMAND  the shell file (on that share) to run
#   CCTEST_UML_ID       this instance's number: names its exit, dmesg and stop files
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mountpoint -q /dev || mount -t devtmpfs devtmpfs /dev  # DEVTMPFS_MOUNT may have done it
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs -o mode=755 tmpfs /run
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tracefs tracefs /sys/kernel/tracing
mount -t cgroup2 cgroup2 /sys/fs/cgroup
# After the tmpfs mounts: a share under /tmp needs its mount point made on the guest's /tmp.
mkdir -p "$CCTEST_UML_OUT"
mount -t hostfs -o "$CCTEST_UML_OUT" hostfs "$CCTEST_UML_OUT"
ip link set lo up
out=$CCTEST_UML_OUT
id=${CCTEST_UML_ID:-0}
unset CCTEST_UML_OUT CCTEST_UML_ID

# The host asks for an orderly stop (Ctrl-C) by creating .uml-stop-<id>: looked for by listing the
# directory (a glob reads it from the host each time; a cached negative lookup would not). The run
# gets SIGTERM, which cctest's runner turns into an interrupt.
stop_requested() {
  for f in "$out"/.uml-stop-"$id"*; do [ -e "$f" ] && return 0; done
  return 1
}

sleep 1.5
# A background job of a non-interactive shell starts with SIGINT and SIGQUIT ignored, and Python
# keeps an ignored SIGINT ignored: the command gets them back, so that a SIGINT sent inside the guest
# interrupts a run as on a terminal (the VM suite's interrupt job does; under virtme-ng it did).
env --default-signal=INT,QUIT sh "$CCTEST_UML_COMMAND" &
pid=$!
(while kill -0 "$pid" 2>/dev/null; do
   if stop_requested; then kill -TERM "$pid"; break; fi
   sleep 1
 done) &
wait "$pid"
rc=$?
dmesg > "$out/.uml-dmesg-$id.txt"
echo "$rc" > "$out/.uml-exit-$id"
sync
exec busybox poweroff -f
