#!/usr/bin/env bash
# Runs another guest test, harness/tests/TEST ARGS..., with our virtiofsd
# holding the inodes the guest knows by file handle.  The daemon is
# started with --inode-file-handles=mandatory, so one that cannot use
# handles fails to start instead of quietly holding fds; then each of our
# daemons' logs must show that it did: handles on at its start, and at
# its exit a count of the inodes it held by handle and opened from one,
# both above zero.  The test's own verdict stands as it is.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# mk/check.py puts --timeout N first: it goes to the test
pre=()
if [ "${1:-}" = --timeout ]; then
    pre=("$1" "$2")
    shift 2
fi
[ $# -ge 1 ] || { echo "usage: $0 [--timeout N] TEST.sh [ARGS...]" >&2; exit 2; }
test=$1
shift
log=$(mktemp /tmp/vfsdax-handles.XXXXXX)
trap 'rm -f "$log"' EXIT
export VFSD_OURS_ARGS="--inode-file-handles=mandatory"
export VFSD_OURS_LOG=$log
rc=0
"$top/harness/tests/$test" "${pre[@]}" "$@" || rc=$?

starts=$(grep -c "inodes are held by file handles" "$log" || true)
used=$(grep -cE "file handles: [1-9][0-9]* inodes held by handle, [1-9][0-9]* opened" "$log" || true)
grep "file handles: " "$log" | sed 's/^/  /' || true
if [ "$starts" -lt 1 ] || [ "$used" != "$starts" ]; then
    echo "FAIL: $starts of our daemons started with file handles, $used" \
         "held and reopened inodes by handle"
    exit 1
fi
echo "ok: $starts runs of our virtiofsd held the guest's inodes by file handle"
exit $rc
