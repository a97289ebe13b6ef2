#!/usr/bin/env bash
# Runs another guest test, harness/tests/TEST ARGS..., on the guest kernel
# of Debian release KERNEL (bookworm, trixie or sid: README "Guest
# kernels"; its guest is GUEST_DIR's, by default build/guest[-KERNEL]),
# then checks what that kernel negotiated with our virtiofsd: every
# FUSE_INIT our daemons logged ("guest FUSE 7.N, flags 0x..., protocol
# 7.M") must be the one this kernel is known to send:
#
#   kernel      asks   protocol                  FUSE_CREATE_SUPP_GROUP
#   6.1         7.38   7.38                      not asked for
#   6.12        7.41   7.41                      asked for
#   7.2         7.45   7.45 (ours, the older)    asked for
#
# Debian's 6.1 says 7.38 but never asks for FUSE_CREATE_SUPP_GROUP (that
# create requests carry the caller's supplementary group matching the
# parent directory's, which decides whether a new file in a setgid
# directory keeps its setgid bit), which our daemon always offers.
# Every kernel asks for FUSE_INIT_EXT (flags past bit 31: DAX per inode).
# A kernel not in the table fails: sid's moves on, and what it negotiates
# must then be looked at and written down here.  The test's own verdict
# stands as it is.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
# mk/check.py puts --timeout N first: it goes to the test
take_timeout "$@"
set -- "${args[@]}"
[ $# -ge 2 ] || { echo "usage: $0 [--timeout N] bookworm|trixie|sid TEST.sh [ARGS...]" >&2; exit 2; }
export GUEST_KERNEL=$1
test=$2
shift 2

# The guest vm.py boots for this kernel, and the FUSE minor our daemon
# speaks (VFSD_PROTO_MINOR)
read -r guest build < <(cd "$top/harness" && python3 -c \
    'import vm; print(vm.GUEST, vm.BUILD)') ||
    fail "no guest for GUEST_KERNEL=$GUEST_KERNEL"
kver=$(head -n1 "$guest/kernel.txt" 2>/dev/null | cut -d' ' -f1)
[ -n "$kver" ] || fail "$guest/kernel.txt is missing: make guest GUEST_KERNEL=$GUEST_KERNEL"
ours=$(sed -n 's/^#define VFSD_PROTO_MINOR[[:space:]]*\([0-9]*\).*/\1/p' \
       "$top/tools/virtiofsd/fuse-proto.h")
[ -n "$ours" ] || fail "no VFSD_PROTO_MINOR in tools/virtiofsd/fuse-proto.h"

series=$(sed -E 's/^([0-9]+\.[0-9]+).*/\1/' <<<"$kver")
case $series in
6.1) asks=38 supp_group=0 ;;
6.12) asks=41 supp_group=1 ;;
7.2) asks=45 supp_group=1 ;;
*) fail "Linux $kver ($GUEST_KERNEL) is not in $0's table of what each kernel negotiates" ;;
esac
protocol=$((asks < ours ? asks : ours))
echo "# guest kernel: $kver ($GUEST_KERNEL), expected to ask for FUSE 7.$asks and speak 7.$protocol with our 7.$ours"

run_test "$test" "$@"

inits=$(grep -o 'guest FUSE [0-9.]*, flags 0x[0-9a-f]*, protocol [0-9.]*' "$log" || true)
[ -n "$inits" ] || fail "none of our daemons logged a FUSE_INIT on $kver"
n=0
while read -r _ _ ver _ flags _ proto; do
    ver=${ver%,} flags=${flags%,}
    n=$((n + 1))
    has_supp=$(( (flags >> 34) & 1 ))
    has_ext=$(( (flags >> 30) & 1 ))
    if [ "$ver" != "7.$asks" ] || [ "$proto" != "7.$protocol" ]; then
        echo "FAIL: $kver asked for FUSE $ver, protocol $proto; expected 7.$asks, protocol 7.$protocol"
        rc=1
    elif [ "$has_supp" != "$supp_group" ]; then
        echo "FAIL: $kver: FUSE_CREATE_SUPP_GROUP is $has_supp in flags $flags, expected $supp_group"
        rc=1
    elif [ "$has_ext" != 1 ]; then
        echo "FAIL: $kver did not ask for FUSE_INIT_EXT (flags $flags)"
        rc=1
    fi
done <<<"$inits"
[ $rc != 0 ] || pass "$n FUSE_INIT on $kver: FUSE 7.$asks, protocol 7.$protocol, FUSE_CREATE_SUPP_GROUP $( [ $supp_group = 1 ] && echo asked for || echo not asked for ) ($(head -n1 <<<"$inits" | sed 's/.*flags //; s/,.*//'))"
exit $rc
