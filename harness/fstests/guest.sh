# Guest script (busybox, harness/vm.py) of harness/fstests/run.py: mount
# the fstests root (a Debian 13 root, mk/fstests-root.sh) from its
# read-only share, give it what a running system has (/proc, /sys, /dev,
# tmpfs where it writes), put the run's own share (tag fsrun: the test
# list, the fstests tree this run may write into, the results) in place
# and run harness/fstests/in-root.sh in it.  The shares under test
# (FST_TEST_TAG, FST_SCRATCH_TAG) are left to fstests to mount.
R=/fsroot
fail() { echo "fstests-guest: $*"; exit 2; }

mkdir -p $R
mount -t virtiofs -o ro fsroot $R || fail "cannot mount the fstests root (tag fsroot)"
[ -x $R/bin/bash ] && [ -d $R/fstests ] ||
    fail "the share fsroot is not an fstests root (no /bin/bash, no /fstests)"
mount -t virtiofs fsrun $R/run-share || fail "cannot mount the run's share (tag fsrun)"
[ -d $R/run-share/fstests ] || fail "the run's share holds no fstests tree"
# The run's copy of the tree: fstests writes beside itself
mount -o bind $R/run-share/fstests $R/fstests || fail "cannot bind the fstests tree"
mount -t proc proc $R/proc && mount -t sysfs sysfs $R/sys &&
    mount -o bind /dev $R/dev || fail "cannot mount /proc, /sys, /dev in the root"
# What udev would have made: bash's process substitution (check uses
# it) reads /dev/fd/N
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
for i in 0:stdin 1:stdout 2:stderr; do
    [ -e /dev/${i#*:} ] || ln -s /proc/self/fd/${i%%:*} /dev/${i#*:}
done
mkdir -p /dev/pts
mount -t devpts devpts $R/dev/pts 2>/dev/null
mount -t tmpfs tmpfs $R/dev/shm 2>/dev/null
for d in tmp var/tmp run root var/lib/sudo; do
    [ -d $R/$d ] && { mount -t tmpfs tmpfs $R/$d || fail "cannot mount a tmpfs on /$d"; }
done
# Per-test dmesg checks read the kernel log from here on
dmesg -c >/dev/null 2>&1
hostname fstests-guest
# The lock tests (generic/131...) talk to themselves over TCP
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up 2>/dev/null ||
    echo "fstests-guest: warning: no loopback interface (lock tests fail)"

echo "fstests-guest: $(uname -r), $(nproc) vCPUs, $(awk '/MemTotal/ {print $2}' /proc/meminfo) kB"
chroot $R /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root TERM=dumb LANG=C.UTF-8 \
    FST_TEST_TAG="$FST_TEST_TAG" FST_SCRATCH_TAG="$FST_SCRATCH_TAG" \
    FST_MOUNT_OPTS="${FST_MOUNT_OPTS:-}" FST_BOOT="$FST_BOOT" FST_CHUNK="${FST_CHUNK:-40}" \
    /bin/bash /run-share/in-root.sh
rc=$?
# Results must reach the host before the guest powers off
sync
umount $R/mnt/test $R/mnt/scratch 2>/dev/null
exit $rc
