#!/usr/bin/env bash
# What the process that parses guest requests holds, checked from the
# host on the real daemon, started as libvirt starts it: stderr on a log
# file outside the share, stdin and fd 10 on the host's /dev.  No guest:
# a front-end that connects and says nothing is enough, since the daemon
# sets everything up once QEMU connects, before the first message.
#
# For each --sandbox mode: the serving process has no fd outside the
# share (every fd is a pipe, socket, anonymous inode, memfd, its own
# procfs, or a file or directory of the share) and no
# CAP_DAC_READ_SEARCH; in the namespace sandbox a broker holds that
# capability and nothing else, under no_new_privs and its own seccomp
# filter, with no fd outside the share either; the parent that relays
# the log holds no capability.  Needs root (the daemons' sandboxes).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
daemon=${VIRTIOFSD:-$top/build/qemu/tools/virtiofsd/virtiofsd}
[ -x "$daemon" ] || fail "no daemon at $daemon (make qemu)"
[ "$(id -u)" = 0 ] || fail "needs root, for the daemon's sandboxes"
pids=()
on_exit 'umount "$work/share" 2>/dev/null || true'
on_exit 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true'
mkdir -p "$work/share"
# The share is a tmpfs of its own: a (dev, ino) on it is inside the share
mount -t tmpfs tmpfs "$work/share"
mkdir -p "$work/share/d" && echo x > "$work/share/d/f"

caps() {  # PID FIELD: the capability mask, in hex
    sed -n "s/^$2:[[:space:]]*//p" "/proc/$1/status"
}
kids() { echo $(cat /proc/"$1"/task/*/children 2>/dev/null || true); }

# Every fd of PID is harmless or inside the share; prints the others
foreign_fds() {
    local pid=$1 fd link type fst devino
    local inside
    inside=$(find "$work/share" -xdev -printf '%D %i\n')
    for fd in /proc/"$pid"/fd/*; do
        link=$(readlink "$fd" 2>/dev/null) || continue
        case $link in
        pipe:*|socket:*|anon_inode:*|/memfd:*) continue ;;
        esac
        fst=$(stat -f -L -c %T "$fd" 2>/dev/null || echo gone)
        [ "$fst" = proc ] && continue
        devino=$(stat -L -c '%d %i' "$fd" 2>/dev/null || echo gone)
        if ! grep -qx "$devino" <<< "$inside"; then
            echo "${fd##*/}->$link"
        fi
    done
}

for mode in namespace chroot none; do
    sock=$work/$mode.sock
    log=$work/$mode.log
    # As libvirt: stdin and fd 10 on /dev, stderr on a log file
    "$daemon" --socket-path="$sock" --shared-dir="$work/share" \
        --sandbox=$mode < /dev 10< /dev 2> "$log" &
    top_pid=$!
    pids+=($top_pid)
    for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
    # Connect, say nothing, keep the connection until the daemon is checked
    python3 -c 'import socket,sys,time; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); time.sleep(30)' "$sock" &
    conn=$!
    pids+=($conn)
    for _ in $(seq 100); do grep -q "serving" "$log" && break; sleep 0.1; done
    grep -q "serving" "$log" || { bad "$mode: the daemon never served"; cat "$log"; continue; }
    server=$(kids $top_pid)
    [ -n "$server" ] && [ "$(wc -w <<< "$server")" = 1 ] ||
        { bad "$mode: not one serving process under $top_pid ($server)"; continue; }
    broker=$(kids "$server")
    # The serving process
    eff=$(caps "$server" CapEff); prm=$(caps "$server" CapPrm)
    if (( (0x$eff | 0x$prm) & 0x4 )); then
        bad "$mode: the serving process holds CAP_DAC_READ_SEARCH ($eff/$prm)"
    else
        pass "$mode: the serving process holds no CAP_DAC_READ_SEARCH ($eff)"
    fi
    f=$(foreign_fds "$server")
    [ -z "$f" ] && pass "$mode: every fd of the serving process is in the share or harmless" ||
        bad "$mode: the serving process holds fds outside the share: $f"
    [ "$(readlink /proc/"$server"/fd/2)" != "$log" ] &&
        [[ "$(readlink /proc/"$server"/fd/2)" == pipe:* ]] &&
        pass "$mode: its stderr is a pipe to the parent" ||
        bad "$mode: its stderr is $(readlink /proc/"$server"/fd/2)"
    # The parent keeps the log, holds nothing else
    [ "$(caps $top_pid CapEff)" = 0000000000000000 ] &&
        pass "$mode: the parent holds no capability" ||
        bad "$mode: the parent holds $(caps $top_pid CapEff)"
    if [ $mode = namespace ]; then
        if [ -z "$broker" ]; then
            bad "$mode: no broker process"
        else
            [ "$(caps "$broker" CapEff)" = 0000000000000004 ] &&
                [ "$(caps "$broker" CapPrm)" = 0000000000000004 ] &&
                pass "$mode: the broker holds CAP_DAC_READ_SEARCH alone" ||
                bad "$mode: the broker holds $(caps "$broker" CapEff)"
            grep -q "^NoNewPrivs:[[:space:]]*1" /proc/"$broker"/status &&
                grep -q "^Seccomp:[[:space:]]*2" /proc/"$broker"/status &&
                pass "$mode: the broker runs with no_new_privs and a seccomp filter" ||
                bad "$mode: the broker's no_new_privs/seccomp: $(grep -E 'NoNewPrivs|^Seccomp:' /proc/"$broker"/status | tr '\n' ' ')"
            f=$(foreign_fds "$broker")
            [ -z "$f" ] && pass "$mode: every fd of the broker is in the share or harmless" ||
                bad "$mode: the broker holds fds outside the share: $f"
        fi
    elif [ -n "$broker" ]; then
        bad "$mode: a broker runs ($broker), though prefer means fds here"
    fi
    # The front-end goes: the daemon cleans up (its broker too) and exits 0
    kill $conn 2>/dev/null || true
    for _ in $(seq 100); do kill -0 $top_pid 2>/dev/null || break; sleep 0.1; done
    kill $top_pid 2>/dev/null && bad "$mode: the daemon outlived its front-end"
    st=0
    wait $top_pid 2>/dev/null || st=$?
    [ $st = 0 ] && pass "$mode: the daemon exits 0 once its front-end is gone" ||
        bad "$mode: the daemon exited with status $st once its front-end was gone"
    # The log made it through the parent, to the end
    grep -q "serving" "$log" && pass "$mode: the log reached the file" ||
        bad "$mode: the log is empty"
done
finish "the serving process holds nothing that reaches beyond the share"
