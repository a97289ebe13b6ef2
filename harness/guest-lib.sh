# Sourced by guest scripts (/lib/vfsdax.sh in the guest).

fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "ok: $*"; }

# mount_virtiofs TAG DIR [OPTIONS]
mount_virtiofs() {
    mkdir -p "$2"
    if [ -n "${3:-}" ]; then
        mount -t virtiofs -o "$3" "$1" "$2" || fail "mount -t virtiofs -o $3 $1 $2"
    else
        mount -t virtiofs "$1" "$2" || fail "mount -t virtiofs $1 $2"
    fi
}

# Whether DIR is mounted with DAX active (the kernel says so in mountinfo).
dax_active() {
    grep -E " $1 " /proc/self/mountinfo | grep -q 'dax'
}

# host_step DIR: let the host act in the middle of a guest script.  Creates
# DIR/phase1, then waits (60 s at most) for the host's DIR/phase2; the host
# side is run_vm_with_host_step in harness/tests/lib.sh.
host_step() {
    touch "$1/phase1"
    i=0
    while [ ! -e "$1/phase2" ]; do
        i=$((i + 1)); [ $i -gt 600 ] && fail "host never answered"
        sleep 0.1
    done
}

# window_bar: the sysfs resource file of the virtio-fs device's cache
# window (BAR 2), for tools that read it directly; fails without one
window_bar() {
    for d in /sys/bus/pci/devices/*; do
        # virtio-fs, modern: 1af4:105a
        if [ "$(cat $d/vendor)" = 0x1af4 ] && [ "$(cat $d/device)" = 0x105a ] &&
           [ -e $d/resource2 ]; then
            echo $d/resource2
            return 0
        fi
    done
    return 1
}
