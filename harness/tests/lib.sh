# Sourced by the shell tests of harness/tests (the host's side of the
# guest tests, and the daemon's tests without a guest), which begin
#
#     set -euo pipefail
#     . "$(dirname "$0")/lib.sh"
#
# (The guest's side has its own, harness/guest-lib.sh: /lib/vfsdax.sh in
# the guest, with the guest's fail, pass and mount_virtiofs.)  A test has
#
#   $top              the source tree
#   $work             a directory of its own, /tmp/vfsdax-TEST.XXXXXX,
#                     removed when the test ends (kept, and named, when
#                     KEEP, or its older name KEEP_LOGS, is set)
#   tmpdir VAR NAME   another one, /tmp/vfsdax-NAME.XXXXXX, in VAR, for
#                     what must not lie below $work (a share whose
#                     parents another user must reach); removed the same
#   on_exit CMD       the shell command CMD when the test ends, before
#                     what was given earlier ($work's removal last): a
#                     background process to end, a mount to undo.  A
#                     CMD that fails fails the test, as a failing
#                     command of a trap under set -e did
#   fail MSG          "FAIL: MSG", what on_fail gives, and status 1
#   on_fail CMD       what a failure shows after its line (a log's tail)
#   pass MSG          "ok: MSG"
#   bad MSG           "FAIL: MSG", and the test goes on: failed counts it,
#                     and the test must end with finish
#   finish [MSG]      status 1 if anything was bad, else "ok: MSG" (if
#                     given) and 0
#   need CMD HOW      fails unless the command CMD is there, saying HOW
#                     to get it
#   guest_script FILE the guest script on standard input, into FILE,
#                     after a line that sources the guest's library
#   vm, migrate_vm, two_vms ARGS...
#                     harness/vm.py, migrate.py, two-vms.py
#
# mk/check.py runs such a test as one result, by its exit status: 0
# passes, anything else fails, and the last lines of its output are
# shown.  There is no skip: a test that cannot run here fails, naming
# what it lacks (need), since a skip must never count as a pass.

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

_lib_exit_cmds=()
_lib_fail_cmds=()

on_exit() {
    _lib_exit_cmds+=("$1")
}

on_fail() {
    _lib_fail_cmds+=("$1")
}

# The EXIT trap: each on_exit command, the latest first.  The test's
# status stands unless one of them fails.
_lib_exit() {
    local _lib_rc=$? _lib_i
    for ((_lib_i = ${#_lib_exit_cmds[@]} - 1; _lib_i >= 0; _lib_i--)); do
        if ! eval "${_lib_exit_cmds[_lib_i]}"; then
            echo "FAIL: at the end: ${_lib_exit_cmds[_lib_i]}"
            [ "$_lib_rc" != 0 ] || _lib_rc=1
        fi
    done
    exit "$_lib_rc"
}
trap _lib_exit EXIT

# _lib_drop DIR: removes DIR, or says where it is kept
_lib_drop() {
    if [ -n "${KEEP:-}${KEEP_LOGS:-}" ]; then
        echo "kept: $1"
    else
        rm -rf "$1"
    fi
}

tmpdir() {
    local _d
    _d=$(mktemp -d "/tmp/vfsdax-$2.XXXXXX")
    printf -v "$1" %s "$_d"
    on_exit "_lib_drop '$_d'"
}

tmpdir work "$(basename "$0" .sh)"

fail() {
    local _lib_i
    echo "FAIL: $*"
    for ((_lib_i = 0; _lib_i < ${#_lib_fail_cmds[@]}; _lib_i++)); do
        eval "${_lib_fail_cmds[_lib_i]}" || true
    done
    exit 1
}

pass() {
    echo "ok: $*"
}

failed=0
bad() {
    echo "FAIL: $*"
    failed=$((failed + 1))
}

finish() {
    [ "$failed" = 0 ] || exit 1
    [ $# = 0 ] || pass "$*"
    exit 0
}

need() {
    command -v "$1" >/dev/null || fail "$1 is missing ($2)"
}

guest_script() {
    { echo ". /lib/vfsdax.sh"; cat; } > "$1"
}

vm() {
    python3 "$top/harness/vm.py" "$@"
}

migrate_vm() {
    python3 "$top/harness/migrate.py" "$@"
}

two_vms() {
    python3 "$top/harness/two-vms.py" "$@"
}

# guest_run_failed STATUS LOG-DIR [WHY]: fails the test, the guest run
# having ended with STATUS, with the tails of the daemon's and QEMU's
# logs in LOG-DIR (vm.py --log-dir)
guest_run_failed() {
    on_fail "tail -n 20 '$2/virtiofsd.log' '$2/qemu.log' 2>/dev/null"
    fail "the guest run failed (status $1)${3:+: $3}"
}

# take_timeout ARGS...: mk/check.py gives a test --timeout N first;
# timeout_args holds it (or nothing), args the rest
take_timeout() {
    timeout_args=()
    if [ "${1:-}" = --timeout ]; then
        timeout_args=("$1" "$2")
        shift 2
    fi
    args=("$@")
}

# run_test TEST ARGS...: for a test that runs another and then reads
# what our daemons logged in it (poll.sh, inodes-by.sh, on-kernel.sh):
# harness/tests/TEST with the --timeout take_timeout took and ARGS, each
# of our daemons' logs appended to $log (VFSD_OURS_LOG); rc is its status
run_test() {
    local test=$1
    shift
    log=$work/daemons.log
    : > "$log"
    rc=0
    VFSD_OURS_LOG=$log "$top/harness/tests/$test" "${timeout_args[@]}" "$@" ||
        rc=$?
}

# stat_count LOG OP: N of the line "stats: OP: N requests" a daemon's
# --stats left in LOG, the last one; nothing when there is none
stat_count() {
    sed -n "s/.*stats: $2: \([0-9]*\) requests.*/\1/p" "$1" | tail -n 1
}

# run_vm_with_host_step SHARED STEP VM-ARGS...: harness/vm.py --shared
# SHARED VM-ARGS; when the guest script calls host_step on the share, the
# shell function STEP on the host, then the guest goes on.  Returns
# vm.py's status.  The wait for the guest lasts as long as the VM does:
# vm.py's --timeout bounds it, and a guest may work for many minutes
# before its step (fsx.sh).
run_vm_with_host_step() {
    local shared=$1 step=$2
    shift 2
    run_with_host_step "$shared" "$step" vm --shared "$shared" "$@"
}

# run_with_host_step SHARED STEP CMD...: the same around any command that
# boots the guest (vm.py run as another user, for one)
run_with_host_step() {
    local shared=$1 step=$2 pid
    shift 2
    "$@" &
    pid=$!
    while kill -0 $pid 2>/dev/null; do
        [ -e "$shared/phase1" ] && break
        sleep 0.1
    done
    if [ -e "$shared/phase1" ]; then
        "$step"
        touch "$shared/phase2"
    fi
    wait $pid
}

# serving_pid PID: the process serving the guest among the daemon vm.py
# started as PID.  Under --sandbox=namespace (our default) PID is only
# the parent that waits, and the daemon is its one child, pid 1 of its
# own pid namespace; otherwise PID itself.
serving_pid() {
    local kids
    kids=$(cat "/proc/$1/task/$1/children" 2>/dev/null || true)
    set -- "$1" $kids
    [ $# = 2 ] && echo "$2" || echo "$1"
}

# split_timeout N ARGS...: for a test that boots N guests one after the
# other.  The --timeout among ARGS (mk/check.py gives one) is the whole
# test's: each guest gets its Nth part.  Sets vm_args to ARGS with that
# --timeout in place of the given one.
split_timeout() {
    local n=$1 total=
    shift
    vm_args=()
    while [ $# -gt 0 ]; do
        case $1 in
        --timeout) total=$2; shift 2 ;;
        --timeout=*) total=${1#--timeout=}; shift ;;
        *) vm_args+=("$1"); shift ;;
        esac
    done
    if [ -n "$total" ]; then
        vm_args+=(--timeout "$((${total%.*} / n))")
    fi
}

# pick_case USAGE CASES ARGS...: the one word of CASES (words separated
# by |) among ARGS in $case_, the others in the array args (mk/check.py
# puts its --timeout first); with none, USAGE on standard error and exit
# status 2.
pick_case() {
    local usage=$1 cases=$2 a
    shift 2
    case_=
    args=()
    for a in "$@"; do
        if [[ "|$cases|" == *"|$a|"* ]]; then
            case_=$a
        else
            args+=("$a")
        fi
    done
    [ -n "$case_" ] || { echo "usage: $usage" >&2; exit 2; }
}

# fixup_sum TRACE WORD [AFTER]: from QEMU's trace file TRACE, the sum of
# the numbers before WORD ("fix-ups:" or "pages") on its lines
# "virtio_shmem_arena_sigbus F fix-ups: N pages ...", counting only the
# lines after the first that matches the regular expression AFTER, if
# given
fixup_sum() {
    awk -v w="$2" -v after="${3:-}" '
        after != "" && $0 ~ after { seen = 1 }
        (after == "" || seen) && /virtio_shmem_arena_sigbus / {
            for (i = 1; i < NF; i++) { if ($(i + 1) == w) { n += $i } }
        }
        END { print n + 0 }' "$1"
}

# Several daemons of ours in one boot, one a row: rows=(NAME...) and, in
# the associative array args, each row's command line (@SOCK@ for its
# socket; vm.py --extra-daemon).  rows_boot WORK GUEST-SCRIPT VM-ARGS...
# boots with them and runs the script, its output in WORK/out and each
# daemon's log in WORK/logs/virtiofsd-NAME.log; it exits the test with
# the logs' tails unless the script printed "guest done".
rows_boot() {
    local work=$1 script=$2 r rc=0 extra=()
    shift 2
    mkdir -p "$work/logs"
    for r in "${rows[@]}"; do
        extra+=(--extra-daemon "$r=${args[$r]}")
    done
    vm --quiet --shared "$work/main" --daemon ours --log-dir "$work/logs" \
        "${extra[@]}" "$@" "$script" > "$work/out" || rc=$?
    if [ $rc != 0 ] || ! grep -q "^guest done" "$work/out"; then
        on_fail "cat '$work/out'"
        for r in "${rows[@]}"; do
            on_fail "tail -n 5 '$work/logs/virtiofsd-$r.log' 2>/dev/null"
        done
        fail "the guest run failed (status $rc):"
    fi
}

# check ROW WHAT GOT WANT: says ok, or FAIL with the row's command line
# (bad)
check() {
    if [ "$3" = "$4" ]; then
        pass "$1: $2"
    else
        bad "$1: $2: got '$3', want '$4' (${args[$1]})"
    fi
}
