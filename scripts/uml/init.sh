#!/bin/sh
# PID 1 of a cctest User-Mode Linux guest (cctest/emulation/uml.py boots it with the host's root read-only
# over hostfs, in the instance's home: cctest/emulation/umlshare.py). Mounts what a run needs, waits until
# guest uptime passes 1.5 s (iputils ping ignores -i while CLOCK_MONOTONIC is below 1 s: boot takes
# no guest time under time-travel), runs the home's command file, keeps the guest's dmesg and exit
# code in the home, and powers off. No host path reaches the guest: the host resolves
# /proc/self/cwd for the UML process, which is the home, so the mounts below name it by that link.
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
# After the tmpfs on /run: the home, then what its links point at (src, venv) and its empty out.
share=/proc/self/cwd
mkdir -p /run/share/home /run/share/src /run/share/out
mount -t hostfs -o "$share" hostfs /run/share/home
mount -r -t hostfs -o "$share/src" hostfs /run/share/src
mount -t hostfs -o "$share/out" hostfs /run/share/out
if [ -L /run/share/home/venv ]; then
  mkdir -p /run/share/venv
  mount -r -t hostfs -o "$share/venv" hostfs /run/share/venv
fi
ip link set lo up
home=/run/share/home

# The host asks for an orderly stop (Ctrl-C) by creating the home's `stop`: looked for by listing
# the directory (a glob reads it from the host each time; a cached negative lookup would not). The
# run gets SIGTERM, which cctest's runner turns into an interrupt.
stop_requested() {
  for f in "$home"/sto[p]; do [ -e "$f" ] && return 0; done
  return 1
}

sleep 1.5
# A background job of a non-interactive shell starts with SIGINT and SIGQUIT ignored, and Python
# keeps an ignored SIGINT ignored: the command gets them back, so that a SIGINT sent inside the guest
# interrupts a run as on a terminal (the VM suite's interrupt job does; under virtme-ng it did).
env --default-signal=INT,QUIT sh "$home/command.sh" &
pid=$!
(while kill -0 "$pid" 2>/dev/null; do
   if stop_requested; then kill -TERM "$pid"; break; fi
   sleep 1
 done) &
wait "$pid"
rc=$?
dmesg > "$home/dmesg.txt"
echo "$rc" > "$home/exit"
sync
exec busybox poweroff -f
