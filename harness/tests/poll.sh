#!/usr/bin/env bash
# Runs another guest test, harness/tests/TEST ARGS..., with our virtiofsd
# polling its request queues (--poll-us=N, default 20000) and checks in
# each of our daemons' logs that polling found requests: the guest's
# requests were served without their kicks.  The test's own verdict
# stands as it is.
#
# The default is far above what anyone would deploy because a TCG guest
# on a loaded two-CPU host takes longer than 200 us between requests
# more often than not: with --poll-us=200 the smoke test found 1 to 6 of
# its ~300 requests by polling, and 0 on one CI run.  With 20 ms nearly
# every request after the first of a burst is found, so a count of 0
# means polling is broken, not that the guest was slow.
#   poll.sh [--timeout N] TEST.sh [ARGS...]     (POLL_US=N)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
take_timeout "$@"
set -- "${args[@]}"
[ $# -ge 1 ] || { echo "usage: $0 [--timeout N] TEST.sh [ARGS...]" >&2; exit 2; }
test=$1
shift
export VFSD_OURS_ARGS="--poll-us=${POLL_US:-20000}"
run_test "$test" "$@"
found=$(sed -n 's/.*--poll-us: requests found by polling \([0-9]*\) times.*/\1/p' "$log")
echo "polling: ${found:-no report} (of our daemons, requests found while polling)"
if [ -z "$found" ] || [ "$(echo "$found" | awk '$1 > 0' | wc -l)" -lt 1 ]; then
    echo "FAIL: no daemon of ours reports requests found by polling"
    rc=1
fi
exit $rc
