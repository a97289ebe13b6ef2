#!/usr/bin/env bash
# virtiofsd options that change what a guest sees, each proven from a
# real guest and each checked both ways (three guest runs):
#
#   run    daemon options                         its negatives in
#   meta   --fd (a socket we listen on, as         never, always
#          libvirt passes it) --cache=metadata
#          --allow-mmap --announce-submounts
#          --writeback --no-killpriv-v2
#   never  --cache=never --readonly               meta, always
#          --no-announce-submounts (no
#          socket-group: the socket is root's)
#   always --cache=always --socket-group=GROUP
#          (submounts announced: the default)
#
# The guest reports facts ("fact NAME VALUE"); this script holds what each
# run must show:
#   --fd               the daemon had no --socket-path, and the guest mounts
#   --socket-group     the socket belongs to GROUP, mode 0770 (umask 007),
#                      while QEMU is connected; without it, to root
#   --allow-mmap       a MAP_SHARED mapping of a FOPEN_DIRECT_IO file reads
#                      and writes (the host sees the data); without it mmap
#                      fails with ENODEV ("No such device")
#   --announce-submounts  a tmpfs mounted on the host inside the share is a
#                      mount of its own in the guest (st_dev, mountinfo),
#                      given or by default; with --no-announce-submounts,
#                      one file system
#   --readonly         creating, appending, mkdir, rm, chmod fail with EROFS
#                      and the host tree is unchanged; reads work
#   --cache=           after the guest read file c1 and stat'ed c2, the host
#                      rewrites c1 in place and grows c2: never sees both,
#                      metadata new data and the old size, always neither
#   --writeback        FUSE_WRITEBACK_CACHE negotiated (the daemon's INIT
#                      log line) and in effect: a guest O_WRONLY open is
#                      O_RDWR on the host (the daemon's fdinfo); without it
#                      O_WRONLY
#   --no-killpriv-v2   FUSE_HANDLE_KILLPRIV_V2 not negotiated (INIT log);
#                      with it (the default), a guest user's write to a
#                      setuid file clears the bit on the host
# Extra arguments go to harness/vm.py; the --timeout among them is for the
# three guests.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
split_timeout 3 "$@"
group=daemon
shared=$work/shared
# A failed run's logs stay for a look
on_exit '[ "$failed" = 0 ] || KEEP=1'
on_exit 'umount "$shared/sub" 2>/dev/null || true'

# The share but what the host changes behind the guest's back
tree() {
    find . \( -path ./sub -o -path ./c1 -o -path ./c2 -o -name 'go-*' \) \
        -prune -o -print0 |
        sort -z | xargs -0 stat -c '%n %a %s %Y'
}

# The share, fresh for each run
populate() {
    umount "$shared/sub" 2>/dev/null || true
    rm -rf "$shared"
    mkdir -p "$shared/sub" "$shared/dir"
    mount -t tmpfs -o size=1M vfsdax-sub "$shared/sub"
    echo inside > "$shared/sub/inside"
    python3 "$top/harness/tests/pattern.py" write "$shared/pat" 8192 1
    head -c 4096 /dev/zero | tr '\0' a > "$shared/c1"
    head -c 100 /dev/zero | tr '\0' b > "$shared/c2"
    echo victim > "$shared/victim"
    echo setuid > "$shared/sx"
    chown 1000:1000 "$shared/sx"
    chmod 4755 "$shared/sx"
    (cd "$shared" && tree > "$work/tree.before")
}

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt
fact() { echo "fact $*"; }
# what a command says on failure, or ok
try() { out=$( (eval "$1") 2>&1) && echo ok || echo "${out:-failed}"; }
# Into the submount first: stat(2) alone does not trigger an automount
fact sub-read "$(cat /mnt/sub/inside)"
if [ "$(stat -c %d /mnt)" = "$(stat -c %d /mnt/sub)" ]; then
    fact submount-dev same
else
    fact submount-dev different
fi
grep -q ' /mnt/sub ' /proc/self/mountinfo && fact submount-mountinfo yes ||
    fact submount-mountinfo no
fact pat-md5 "$(md5sum < /mnt/pat)"
fact mmap-read "$(try 'mmapio check /mnt/pat 1')"
fact c1-before "$(md5sum < /mnt/c1)"
fact c2-before "$(stat -c %s /mnt/c2)"
if [ "$VFS_WRITES" = 1 ]; then
    fact mmap-write "$(try 'mmapio fill /mnt/mapped 8192 5')"
    exec 3>/mnt/wb
    echo held >&3
    # A writer without CAP_FSETID, who must not keep a setuid bit
    echo "u1000:x:1000:1000::/:/bin/sh" >> /etc/passwd
    chmod o+rx / /bin /bin/busybox
    fact sx-write "$(try "su u1000 -c 'echo more >> /mnt/sx'")"
else
    fact create "$(try 'echo x > /mnt/new')"
    fact append "$(try 'echo x >> /mnt/victim')"
    fact mkdir "$(try 'mkdir /mnt/newdir')"
    fact rm "$(try 'rm /mnt/victim')"
    fact chmod "$(try 'chmod 600 /mnt/c2')"
fi
# The host's step: the share may be read-only, and a name the guest has
# looked up may be cached as absent for a day (--cache=metadata|always),
# so the host answers by creating go-0, go-1...: each name is new here.
echo "fact step-ready"
i=0
while [ ! -e /mnt/go-$i ]; do
    i=$((i + 1)); [ $i -gt 600 ] && fail "host never answered"
    sleep 0.1
done
[ "$VFS_WRITES" = 1 ] && exec 3>&-
fact c1-after "$(md5sum < /mnt/c1)"
fact c2-after "$(stat -c %s /mnt/c2)"
umount /mnt || fail umount
GUEST

# During the guest's step: what the host looks at while the guest holds
# its files, then its changes behind the guest's back, then the answer.
host_step() {
    local pid fd flags
    stat -c '%G %a' "$(cat "$work/state/socket")" > "$work/socket.stat"
    pid=$(serving_pid "$(cat "$work/state/daemon.pid")")
    : > "$work/wb.flags"
    for fd in /proc/$pid/fd/*; do
        case $(readlink "$fd") in
        */wb) flags=$(sed -n 's/^flags:\s*//p' "/proc/$pid/fdinfo/${fd##*/}")
              # not the O_PATH fd of the inode
              [ $((8#$flags & 8#10000000)) != 0 ] ||
                  echo "$flags" >> "$work/wb.flags" ;;
        esac
    done
    head -c 4096 /dev/zero | tr '\0' z |
        dd of="$shared/c1" conv=notrunc status=none
    head -c 100 /dev/zero | tr '\0' b >> "$shared/c2"
    (cd "$shared" && tree > "$work/tree.after")
    (cd "$shared" && touch $(seq -f go-%g 0 700))
}

# vm_with_step OUT VM-ARGS...: harness/vm.py, its output to OUT; host_step
# when the guest says it is ready
vm_with_step() {
    local out=$1 vm
    shift
    vm --shared "$shared" "$@" > "$out" 2>&1 &
    vm=$!
    while kill -0 $vm 2>/dev/null; do
        grep -qs '^fact step-ready' "$out" && break
        sleep 0.1
    done
    if grep -q '^fact step-ready' "$out"; then
        host_step
    fi
    wait $vm
}

# fact RUN NAME: the guest's fact NAME in run RUN
fact() {
    sed -n "s/^fact $2 //p" "$work/$1.out" | tail -n 1
}

expect() {
    local run=$1 name=$2 want=$3 got
    got=$(fact "$run" "$name")
    if [ "$got" = "$want" ]; then
        pass "$run: $name is '$want'"
    else
        bad "$run: $name is '$got', not '$want'"
    fi
}

expect_match() {
    local run=$1 what=$2 got=$3 pattern=$4
    if [[ $got =~ $pattern ]]; then
        pass "$run: $what: $got"
    else
        bad "$run: $what is '$got', which does not match '$pattern'"
    fi
}

# flag RUN BIT NAME yes|no: whether the daemon's INIT reply had BIT
flag() {
    local run=$1 bit=$2 name=$3 want=$4 line flags got
    line=$(grep -o 'guest FUSE [0-9.]*, flags 0x[0-9a-f]*' \
           "$work/$run/virtiofsd.log" | tail -n 1)
    if [ -z "$line" ]; then
        bad "$run: no INIT line in the daemon's log"
        return
    fi
    flags=${line##* }
    got=$(( (flags >> bit) & 1 ))
    [ $got = 1 ] && got=yes || got=no
    if [ $got = "$want" ]; then
        pass "$run: $name negotiated: $want ($line)"
    else
        bad "$run: $name negotiated: $got, not $want ($line)"
    fi
}

# run NAME WRITES VM-ARGS...
run() {
    local name=$1 writes=$2 rc=0
    shift 2
    populate
    rm -rf "$work/state" "$work/socket.stat" "$work/wb.flags"
    # The socket's mode comes from the umask of whoever starts the daemon
    (umask 007
     vm_with_step "$work/$name.out" --quiet --daemon ours \
         --state-dir "$work/state" --log-dir "$work/$name" \
         --env VFS_WRITES="$writes" "${vm_args[@]}" "$@" "$work/guest.sh") \
        || rc=$?
    if [ $rc != 0 ] || [ ! -e "$work/socket.stat" ]; then
        bad "$name: the guest run failed (status $rc, host step " \
            "$([ -e "$work/socket.stat" ] && echo ran || echo "never ran"))"
        sed 's/^/    /' "$work/$name.out"
        tail -n 20 "$work/$name/virtiofsd.log" 2>/dev/null | sed 's/^/    d: /'
        return 1
    fi
    cp "$work/socket.stat" "$work/$name.socket"
    cp "$work/wb.flags" "$work/$name.wb"
    stat -c %a "$shared/sx" > "$work/$name.sx"
    if [ -e "$shared/mapped" ] &&
            python3 "$top/harness/tests/pattern.py" check "$shared/mapped" 5 8192 \
            > "$work/$name.mapped" 2>&1; then
        echo ok >> "$work/$name.mapped"
    fi
    cmp -s "$work/tree.before" "$work/tree.after" &&
        echo same > "$work/$name.tree" || echo changed > "$work/$name.tree"
}

# Each run's own checks
checks_common() {
    local run=$1
    expect "$run" sub-read inside
    expect "$run" pat-md5 "$(md5sum < "$shared/pat")"
}

pat_md5=
if run meta 1 --daemon-fd --cache-mode metadata \
        --daemon-args="--allow-mmap --announce-submounts --writeback --no-killpriv-v2"; then
    checks_common meta
    cmd=$(cat "$work/state/daemon.cmd")
    if [[ $cmd == *'"--fd='* && $cmd != *--socket-path* ]]; then
        pass "meta: the daemon got --fd and no --socket-path, the guest mounted"
    else
        bad "meta: the daemon's command line is $cmd"
    fi
    expect meta submount-dev different
    expect meta submount-mountinfo yes
    flag meta 27 FUSE_SUBMOUNTS yes
    expect meta mmap-read ok
    expect meta mmap-write ok
    expect_match meta "the host's copy of the guest's mmap writes" \
        "$(tail -n 1 "$work/meta.mapped" 2>/dev/null)" '^ok$'
    flag meta 36 FUSE_DIRECT_IO_ALLOW_MMAP yes
    expect meta c2-before 100
    expect meta c2-after 100
    [ "$(fact meta c1-before)" != "$(fact meta c1-after)" ] &&
        pass "meta: c1's new data seen" || bad "meta: c1's new data not seen"
    flag meta 16 FUSE_WRITEBACK_CACHE yes
    # O_RDWR is 2: the daemon widened the guest's O_WRONLY
    expect_match meta "host flags of the guest's O_WRONLY file" \
        "$(cat "$work/meta.wb")" '^[0-7]*[2]$'
    flag meta 28 FUSE_HANDLE_KILLPRIV_V2 no
    expect meta sx-write ok
    # Not a verdict: without the flag, a direct write (FOPEN_DIRECT_IO)
    # is nobody's to clear the bit on: Linux 6.12 does not for such
    # writes, and the write arrives without FUSE_WRITE_KILL_SUIDGID.
    echo "note: meta: setuid file after an unprivileged write: mode $(cat "$work/meta.sx")"
fi

if run never 0 --cache-mode never \
        --daemon-args="--readonly --no-announce-submounts"; then
    checks_common never
    expect_match never "socket's group and mode" "$(cat "$work/never.socket")" \
        '^root 770$'
    expect never submount-dev same
    expect never submount-mountinfo no
    flag never 27 FUSE_SUBMOUNTS no
    expect never mmap-read "mmapio: mmap /mnt/pat: No such device"
    flag never 36 FUSE_DIRECT_IO_ALLOW_MMAP no
    for op in create append mkdir rm chmod; do
        expect_match never "$op" "$(fact never $op)" 'Read-only file system$'
    done
    expect never c2-before 100
    expect never c2-after 200
    [ "$(fact never c1-before)" != "$(fact never c1-after)" ] &&
        pass "never: c1's new data seen" || bad "never: c1's new data not seen"
    expect_match never "the host's tree after the guest's writes" \
        "$(cat "$work/never.tree")" '^same$'
    flag never 16 FUSE_WRITEBACK_CACHE no
    flag never 28 FUSE_HANDLE_KILLPRIV_V2 yes
fi

if run always 1 --cache-mode always --daemon-args="--socket-group=$group"; then
    checks_common always
    expect_match always "socket's group and mode" "$(cat "$work/always.socket")" \
        "^$group 770\$"
    expect always submount-dev different
    expect always submount-mountinfo yes
    flag always 27 FUSE_SUBMOUNTS yes
    expect always c2-before 100
    expect always c2-after 100
    [ "$(fact always c1-before)" = "$(fact always c1-after)" ] &&
        pass "always: c1's cached data kept" ||
        bad "always: c1's cached data dropped"
    flag always 16 FUSE_WRITEBACK_CACHE no
    expect_match always "host flags of the guest's O_WRONLY file" \
        "$(cat "$work/always.wb")" '^[0-7]*[1]$'
    flag always 28 FUSE_HANDLE_KILLPRIV_V2 yes
    # With the flag the guest leaves clearing to us: the user's write
    # comes with FUSE_WRITE_KILL_SUIDGID and must clear the bit
    expect always sx-write ok
    expect_match always "the host's mode of the setuid file written" \
        "$(cat "$work/always.sx")" '^755$'
fi

finish
