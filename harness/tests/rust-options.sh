#!/usr/bin/env bash
# Our virtiofsd started with the Rust virtiofsd's command-line forms, as
# libvirt, kata-containers and users write them, each checked by what a
# guest sees (and the host, and the daemon's own log), all in one boot:
# every row of the table below is a daemon of its own with its own share
# and mount tag (vm.py --extra-daemon).
#
#   row   command line (socket and share aside)     checked
#   kata  --cache=auto --sandbox=none                a host tmpfs inside the
#         --seccomp=kill --thread-pool-size=1        share is its own mount
#         --announce-submounts                       in the guest (st_dev);
#         --inode-file-handles=prefer                inodes held by fd, the
#                                                    share being part of a
#                                                    file system (daemon
#                                                    log; whole-fs-share.sh
#                                                    has a whole one)
#   virt  -o source=DIR,cache=always,sandbox=chroot, a guest user.* xattr
#         xattr (libvirt 9's form)                   is on the host file
#   sock  --socket PATH --shared-dir DIR             the share mounts, a host
#         --sandbox none (old, space-separated)      file reads right
#   xmap  --xattrmap=:map::user.virtiofs.:           the guest's user.a is
#                                                    user.virtiofs.user.a on
#                                                    the host, and only that
#   xlat  --translate-uid map:0:4242:1               a guest root's new file
#         --translate-gid map:0:4343:1               is 4242:4343 on the
#                                                    host, 0:0 in the guest
#   nsmap --uid-map=:0:5000:65536:                   as root the daemon maps
#         --gid-map=:0:5000:65536:                   (see the docs): 5000:5000
#   caps  --modcaps=-chown                           a guest chown fails
#                                                    (EPERM), host unchanged
#   ro    --readonly                                 a guest write: EROFS
#   rdp   --no-readdirplus --stats                   ls -l lists; the daemon
#                                                    saw READDIR, never
#                                                    READDIRPLUS
#   sec   --security-label --posix-acl               the guest mounts (it has
#                                                    both), INIT carries
#                                                    SECURITY_CTX and
#                                                    POSIX_ACL, mkdir works
#   mmap  --cache never --allow-mmap                 a MAP_SHARED write works
#   misc  --rlimit-nofile=0 --log-level=debug -f     the share works; debug
#         --no-killpriv-v2                           lines logged; INIT has
#                                                    no KILLPRIV_V2
# Extra arguments go to harness/vm.py.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
on_exit 'umount "$work/kata/sub" 2>/dev/null || true'
logs=$work/logs
mkdir -p "$logs" "$work/main"

rows=(kata virt sock xmap xlat nsmap caps ro rdp sec mmap misc)
declare -A args
args[kata]="--socket-path=@SOCK@ --shared-dir=$work/kata --cache=auto --sandbox=none --seccomp=kill --thread-pool-size=1 --announce-submounts --inode-file-handles=prefer"
args[virt]="--socket-path=@SOCK@ -o source=$work/virt,cache=always,sandbox=chroot,xattr"
args[sock]="--socket @SOCK@ --shared-dir $work/sock --sandbox none"
args[xmap]="--socket-path=@SOCK@ --shared-dir=$work/xmap --xattrmap=:map::user.virtiofs.:"
args[xlat]="--socket-path @SOCK@ --shared-dir $work/xlat --translate-uid map:0:4242:1 --translate-gid map:0:4343:1"
args[nsmap]="--socket-path=@SOCK@ --shared-dir=$work/nsmap --uid-map=:0:5000:65536: --gid-map=:0:5000:65536:"
args[caps]="--socket-path=@SOCK@ --shared-dir=$work/caps --modcaps=-chown"
args[ro]="--socket-path=@SOCK@ --shared-dir=$work/ro --readonly"
args[rdp]="--socket-path=@SOCK@ --shared-dir=$work/rdp --no-readdirplus --stats"
args[sec]="--socket-path=@SOCK@ --shared-dir=$work/sec --security-label --posix-acl"
args[mmap]="--socket-path=@SOCK@ --shared-dir=$work/mmap --cache never --allow-mmap"
args[misc]="--socket-path=@SOCK@ --shared-dir=$work/misc --rlimit-nofile=0 --log-level=debug -f --no-killpriv-v2"

for r in "${rows[@]}"; do
    mkdir -p "$work/$r"
    echo "hello $r" > "$work/$r/hello"
    touch "$work/$r/f"
    chmod 755 "$work/$r"
done
# Guest root is another host user there: it must be able to create
chmod 777 "$work/xlat" "$work/nsmap"
mkdir "$work/kata/sub"
mount -t tmpfs tmpfs "$work/kata/sub"
echo inside > "$work/kata/sub/inside"
head -c 8192 /dev/zero > "$work/mmap/mapped"
for i in $(seq 1 20); do touch "$work/rdp/e$i"; done

guest_script "$work/guest.sh" <<'GUEST'
fact() { echo "fact $*"; }
try() { out=$( (eval "$1") 2>&1) && echo ok || echo "${out:-failed}"; }
for r in kata virt sock xmap xlat nsmap caps ro rdp sec mmap misc; do
    mkdir -p /m/$r
    fact $r-mount "$(try "mount -t virtiofs $r /m/$r")"
    fact $r-hello "$(cat /m/$r/hello 2>&1)"
done
fact kata-sub "$(cat /m/kata/sub/inside 2>&1)"
[ "$(stat -c %d /m/kata)" = "$(stat -c %d /m/kata/sub)" ] &&
    fact kata-subdev same || fact kata-subdev different
fact virt-set "$(try 'xattrtool set /m/virt/f user.lv libvirt')"
fact xmap-set "$(try 'xattrtool set /m/xmap/f user.a mapped')"
fact xmap-get "$(xattrtool get /m/xmap/f user.a 2>&1)"
fact xlat-touch "$(try 'touch /m/xlat/new')"
fact xlat-owner "$(stat -c %u:%g /m/xlat/new 2>&1)"
fact nsmap-touch "$(try 'touch /m/nsmap/new')"
fact nsmap-owner "$(stat -c %u:%g /m/nsmap/new 2>&1)"
fact caps-chown "$(try 'chown 1234 /m/caps/f')"
fact ro-write "$(try 'echo x > /m/ro/new')"
fact rdp-count "$(ls -l /m/rdp | grep -c ' e[0-9]')"
fact sec-mkdir "$(try 'mkdir /m/sec/d')"
fact mmap-write "$(try 'mmapio fill /m/mmap/mapped 8192 5')"
fact misc-write "$(try 'echo misc > /m/misc/new')"
for r in kata virt sock xmap xlat nsmap caps ro rdp sec mmap misc; do
    umount /m/$r
done
echo "guest done"
GUEST

rows_boot "$work" "$work/guest.sh" "$@"

fact() { sed -n "s/^fact $1 //p" "$work/out" | head -n 1; }
has() {  # row, pattern: in its daemon's log
    grep -qE "$2" "$logs/virtiofsd-$1.log" && echo yes || echo no
}
flags() {  # row: the INIT flags it logged
    sed -n 's/.*guest FUSE [0-9.]*, flags 0x\([0-9a-f]*\).*/\1/p' \
        "$logs/virtiofsd-$1.log" | head -n 1
}
bit() { [ $(( 0x$(flags "$1") >> $2 & 1 )) = 1 ] && echo set || echo clear; }
host_xattr() {  # file, name: its value on the host, or "absent"
    python3 -c 'import os, sys
try:
    print(os.getxattr(sys.argv[1], sys.argv[2]).decode())
except OSError:
    print("absent")' "$1" "$2"
}

for r in "${rows[@]}"; do
    check "$r" "mounts" "$(fact "$r-mount")" ok
    check "$r" "host file read" "$(fact "$r-hello")" "hello $r"
done
check kata "submount read" "$(fact kata-sub)" inside
check kata "submount announced" "$(fact kata-subdev)" different
check kata "prefer: fds under --sandbox=none" "$(has kata 'prefer: inodes are held by fds outside --sandbox=namespace')" yes
check virt "guest xattr set" "$(fact virt-set)" ok
check virt "xattr on the host" "$(host_xattr "$work/virt/f" user.lv)" libvirt
check xmap "guest xattr set" "$(fact xmap-set)" ok
check xmap "guest reads it back" "$(fact xmap-get)" mapped
check xmap "host name user.virtiofs.user.a" \
    "$(host_xattr "$work/xmap/f" user.virtiofs.user.a)" mapped
check xmap "no host user.a" "$(host_xattr "$work/xmap/f" user.a)" absent
check xlat "guest creates" "$(fact xlat-touch)" ok
check xlat "guest sees its own ids" "$(fact xlat-owner)" 0:0
check xlat "host owner" "$(stat -c %u:%g "$work/xlat/new")" 4242:4343
check nsmap "guest creates" "$(fact nsmap-touch)" ok
check nsmap "guest sees its own ids" "$(fact nsmap-owner)" 0:0
check nsmap "host owner" "$(stat -c %u:%g "$work/nsmap/new")" 5000:5000
check caps "guest chown refused" "$(fact caps-chown | grep -c 'Operation not permitted')" 1
check caps "host owner unchanged" "$(stat -c %u "$work/caps/f")" 0
check ro "guest write refused" "$(fact ro-write | grep -c 'Read-only file system')" 1
check ro "nothing on the host" "$([ -e "$work/ro/new" ] && echo there || echo absent)" absent
check rdp "listing" "$(fact rdp-count)" 20
check rdp "READDIR served" "$(has rdp 'stats: READDIR: [1-9]')" yes
check rdp "no READDIRPLUS" "$(has rdp 'stats: READDIRPLUS:')" no
check rdp "not offered" "$(bit rdp 13)" clear
check sec "mkdir with a label extension" "$(fact sec-mkdir)" ok
check sec "SECURITY_CTX negotiated" "$(bit sec 32)" set
check sec "POSIX_ACL negotiated" "$(bit sec 20)" set
check mmap "MAP_SHARED write" "$(fact mmap-write)" ok
check misc "guest write" "$(fact misc-write)" ok
check misc "host sees it" "$(cat "$work/misc/new")" misc
check misc "debug log" "$(has misc 'LOOKUP unique')" yes
check misc "no KILLPRIV_V2" "$(bit misc 28)" clear
# The same rows' counterparts where a default differs: KILLPRIV_V2 and
# READDIRPLUS are offered without the options; as in the Rust daemon
# 1.14, submounts are announced and handles preferred (prefer) when no
# option says otherwise, which on a share that is part of a file system
# means fds
check kata "KILLPRIV_V2 by default" "$(bit kata 28)" set
check kata "READDIRPLUS by default" "$(bit kata 13)" set
check sock "SUBMOUNTS by default" "$(bit sock 27)" set
check sock "prefer by default: fds under --sandbox none" "$(has sock 'prefer: inodes are held by fds outside --sandbox=namespace')" yes
finish "${#rows[@]} Rust command lines, each seen from the guest"
