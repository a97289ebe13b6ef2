#!/usr/bin/env bash
# Runs another guest test, harness/tests/TEST ARGS..., with our virtiofsd
# holding the inodes the guest knows one way:
#   handle  --inode-file-handles=mandatory, so that a daemon which cannot
#           use handles fails to start instead of quietly holding fds;
#           each of our daemons' logs must show handles on at its start,
#           and at its exit a count of the inodes it held by handle and
#           opened from one, both above zero.
#   fd      --inode-file-handles=never (the default is prefer, which on
#           the test's file systems means handles): each log must say
#           that inodes are held by fds, and none may count handles.
# The test's own verdict stands as it is.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
# mk/check.py puts --timeout N first: it goes to the test
take_timeout "$@"
set -- "${args[@]}"
[ $# -ge 2 ] || { echo "usage: $0 [--timeout N] handle|fd TEST.sh [ARGS...]" >&2; exit 2; }
mode=$1
test=$2
shift 2
case $mode in
handle) opt='--inode-file-handles=mandatory --inode-fd-cache=0' ;;
fd) opt=--inode-file-handles=never ;;
*) echo "$0: mode '$mode' is neither handle nor fd" >&2; exit 2 ;;
esac
export VFSD_OURS_ARGS=$opt
run_test "$test" "$@"

by_handle=$(grep -c "inodes are held by file handles" "$log" || true)
by_fd=$(grep -c "inodes are held by fds" "$log" || true)
used=$(grep -cE "file handles: [1-9][0-9]* inodes held by handle, [1-9][0-9]* opened" "$log" || true)
grep "file handles: " "$log" | sed 's/^/  /' || true
if [ $mode = handle ]; then
    if [ "$by_handle" -lt 1 ] || [ "$by_fd" != 0 ] || [ "$used" != "$by_handle" ]; then
        fail "$by_handle of our daemons started with file handles" \
             "($by_fd with fds), $used held and reopened inodes by handle"
    fi
    pass "$by_handle runs of our virtiofsd held the guest's inodes by file handle"
else
    if [ "$by_fd" -lt 1 ] || [ "$by_handle" != 0 ] || [ "$used" != 0 ]; then
        fail "$by_fd of our daemons started with fds, $by_handle" \
             "with file handles, $used counted inodes held by handle"
    fi
    pass "$by_fd runs of our virtiofsd held the guest's inodes by fd"
fi
exit $rc
