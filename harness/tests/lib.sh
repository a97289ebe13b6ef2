# Sourced by the host side of guest tests.

# run_vm_with_host_step SHARED STEP VM-ARGS...: run harness/vm.py with
# VM-ARGS; when the guest script calls host_step on the share, run the shell
# function STEP on the host, then let the guest go on.  Returns vm.py's
# status.  The wait for the guest lasts as long as the VM does: vm.py's
# --timeout bounds it, and a guest may work for many minutes before its
# step (fsx.sh).
run_vm_with_host_step() {
    local shared=$1 step=$2 vm
    shift 2
    python3 "$(dirname "${BASH_SOURCE[0]}")/../vm.py" --shared "$shared" "$@" &
    vm=$!
    while kill -0 $vm 2>/dev/null; do
        [ -e "$shared/phase1" ] && break
        sleep 0.1
    done
    if [ -e "$shared/phase1" ]; then
        "$step"
        touch "$shared/phase2"
    fi
    wait $vm
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
    python3 "$(dirname "${BASH_SOURCE[0]}")/../vm.py" --quiet \
        --shared "$work/main" --daemon ours --log-dir "$work/logs" \
        "${extra[@]}" "$@" "$script" > "$work/out" || rc=$?
    if [ $rc != 0 ] || ! grep -q "^guest done" "$work/out"; then
        echo "FAIL: the guest run failed (status $rc):"
        cat "$work/out"
        for r in "${rows[@]}"; do
            tail -n 5 "$work/logs/virtiofsd-$r.log" 2>/dev/null || true
        done
        exit 1
    fi
}

# check ROW WHAT GOT WANT: says ok, or FAIL with the row's command line
# and sets failed=1
failed=0
check() {
    if [ "$3" = "$4" ]; then
        echo "ok: $1: $2"
    else
        echo "FAIL: $1: $2: got '$3', want '$4' (${args[$1]})"
        failed=1
    fi
}
