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
