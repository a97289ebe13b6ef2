#!/usr/bin/env bash
# --xattrmap seen from a guest, with the Rust virtiofsd's rule language.
# Two boots: the ":map::user.virtiofs.:" shorthand (every guest name under
# user.virtiofs. on the host, nothing else visible), then a longer map
# with one rule of each type.  Host names are checked on the host; the
# guest's view is checked in the guest.  --xattrmap alone turns extended
# attributes on, as it does for the Rust daemon.  The guest's
# security.capability, moved to user.virtiofs.security.capability, must
# still go away when the file is written (CVE-2021-20263): the host kernel
# only does that for the real name.  Extra arguments go to harness/vm.py
# (--daemon rust runs the same checks against the Rust virtiofsd).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
tmpdir shared xattrmap

hostget() {
    python3 -c 'import os, sys
try:
    print(os.getxattr(sys.argv[1], sys.argv[2]).decode())
except OSError as e:
    print("ENODATA" if e.errno == 61 else e.strerror)' "$shared/$1" "$2"
}

hostcheck() {
    local got
    got=$(hostget "$1" "$2")
    [ "$got" = "$3" ] || fail "host $1 $2 is '$got', not '$3'"
}

# --- 1: the shorthand ----------------------------------------------------
echo data > "$shared/f"
echo data > "$shared/capfile"
python3 - "$shared/f" <<'PY'
import os, sys
os.setxattr(sys.argv[1], "user.virtiofs.user.a", b"1")
os.setxattr(sys.argv[1], "user.plain", b"2")
os.setxattr(sys.argv[1], "trusted.hidden", b"3")
PY

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt
r=$(xattrtool list /mnt/f)
[ "$r" = user.a ] || fail "list shows '$r', not only user.a"
r=$(xattrtool get /mnt/f user.a)
[ "$r" = 1 ] || fail "get user.a: $r"
r=$(xattrtool get /mnt/f user.plain)
[ "$r" = ENODATA ] || fail "host's unmapped user.plain reads as $r"
pass "host names outside user.virtiofs. hidden, the prefix stripped"
r=$(xattrtool set /mnt/f trusted.t v)
[ "$r" = ok ] || fail "set trusted.t: $r"
r=$(xattrtool remove /mnt/f user.a)
[ "$r" = ok ] || fail "remove user.a: $r"
r=$(xattrtool list /mnt/f)
[ "$r" = trusted.t ] || fail "list after set and remove: '$r'"
pass "set and remove go to the prefixed host names"
long=user.$(printf '%0245d' 0)
r=$(xattrtool set /mnt/f "$long" v)
[ "$r" = ERANGE ] || fail "a name 250 bytes long, 264 on the host: $r"
pass "a host name past 255 bytes: ERANGE"
r=$(xattrtool setcap /mnt/capfile)
[ "$r" = ok ] || fail "setting security.capability: $r"
[ "$(xattrtool list /mnt/capfile)" = security.capability ] || fail "no cap"
echo more >> /mnt/capfile || fail "write"
r=$(xattrtool get /mnt/capfile security.capability)
[ "$r" = ENODATA ] || fail "security.capability survives a write: $r"
pass "the moved security.capability is dropped on write"
umount /mnt || fail umount
GUEST

# Without a page cache (direct I/O) the guest kernel leaves dropping
# security.capability on write to the daemon.
vm --shared "$shared" --cache-mode never \
    --daemon-args="--xattrmap=:map::user.virtiofs.:" "$@" "$work/guest.sh"
hostcheck f user.virtiofs.trusted.t v
hostcheck f trusted.t ENODATA
hostcheck f user.virtiofs.user.a ENODATA
hostcheck f user.plain 2
hostcheck f trusted.hidden 3
hostcheck capfile user.virtiofs.security.capability ENODATA
hostcheck capfile security.capability ENODATA
pass "the map shorthand on the host"

# --- 2: one rule of each type ----------------------------------------------
rm -f "$shared/f" "$shared/capfile"
echo data > "$shared/g"
python3 - "$shared/g" <<'PY'
import os, sys
for n, v in (("user.virtiofs.trusted.a", b"1"), ("trusted.b", b"2"),
             ("user.c", b"3"), ("user.nosup.d", b"4")):
    os.setxattr(sys.argv[1], n, v)
PY

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt
r=$(xattrtool list /mnt/g)
[ "$r" = "trusted.a user.c" ] || fail "list: '$r'"
pass "prefix stripped, bad and unsupported hidden, ok passed"
r=$(xattrtool get /mnt/g trusted.a)
[ "$r" = 1 ] || fail "get trusted.a: $r"
r=$(xattrtool get /mnt/g user.virtiofs.trusted.a)
[ "$r" = ENODATA ] || fail "get of a name a bad rule refuses: $r"
r=$(xattrtool set /mnt/g user.virtiofs.x v)
[ "$r" = EPERM ] || fail "set of a name a bad rule refuses: $r"
r=$(xattrtool remove /mnt/g user.virtiofs.trusted.a)
[ "$r" = EPERM ] || fail "remove of a name a bad rule refuses: $r"
pass "bad: getxattr ENODATA, setxattr and removexattr EPERM"
for op in get remove; do
    r=$(xattrtool $op /mnt/g user.nosup.d)
    [ "$r" = ENOTSUP ] || fail "$op of an unsupported name: $r"
done
r=$(xattrtool set /mnt/g user.nosup.e v)
[ "$r" = ENOTSUP ] || fail "set of an unsupported name: $r"
pass "unsupported: ENOTSUP"
r=$(xattrtool set /mnt/g trusted.z 9)
[ "$r" = ok ] || fail "set trusted.z: $r"
r=$(xattrtool set /mnt/g user.y 8)
[ "$r" = ok ] || fail "set user.y: $r"
umount /mnt || fail umount
GUEST

rules='/prefix/all/trusted./user.virtiofs./
/bad/server//trusted./ :bad:client:user.virtiofs.::
|unsupported|all|user.nosup.|user.nosup.| /ok/all///'
vm --shared "$shared" \
    --daemon-args="--xattr '--xattrmap=$rules'" "$@" "$work/guest.sh"
hostcheck g user.virtiofs.trusted.z 9
hostcheck g trusted.z ENODATA
hostcheck g user.y 8
hostcheck g user.virtiofs.trusted.a 1
hostcheck g trusted.b 2
pass "--xattrmap end to end"
