#!/usr/bin/env bash
# Our virtiofsd with --posix-acl and --uid-map/--gid-map, seen from a
# guest: guest ids 0-65535 are host ids 100000-165535.  The guest's root
# owns the share (host 100000), files it makes are host 100000 or what it
# chowns them to plus 100000, host files outside the map show as 65534,
# chown outside the map fails; a default ACL replaces the guest's umask,
# an access ACL naming user 1000 is enforced by the guest kernel, and the
# ACL's ids are host ids on disk.  Extra arguments go to harness/vm.py.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
tmpdir shared aclmap
echo host > "$shared/hostroot"
chown 100000:100000 "$shared"
chmod 755 "$shared"

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt
ids=$(stat -c %u:%g /mnt)
[ "$ids" = 0:0 ] || fail "the share's owner shows as $ids, not 0:0"
ids=$(stat -c %u:%g /mnt/hostroot)
[ "$ids" = 65534:65534 ] || fail "host root's file shows as $ids"
pass "host ids shown through the map"
echo x > /mnt/byroot || fail "create as guest root"
echo y > /mnt/owned && chown 1000:1000 /mnt/owned || fail "chown 1000:1000"
[ "$(stat -c %u:%g /mnt/owned)" = 1000:1000 ] || fail "owner after chown"
if chown 70000 /mnt/owned 2>/dev/null; then
    fail "chown to a uid outside the map worked"
fi
[ "$(stat -c %u /mnt/owned)" = 1000 ] || fail "owner after a refused chown"
pass "chown translated, ids outside the map refused"

mkdir /mnt/acl || fail "mkdir acl"
r=$(acltool setacl /mnt/acl default u::7,g::7,o::5)
[ "$r" = ok ] || fail "setting a default ACL: $r"
r=$(acltool create 077 666 /mnt/acl/f)
[ "$r" = 664 ] || fail "file under a default ACL with umask 077: mode $r, not 664"
r=$(acltool mkdir 077 777 /mnt/acl/d)
[ "$r" = 775 ] || fail "dir under a default ACL with umask 077: mode $r, not 775"
r=$(acltool getacl /mnt/acl/d default)
[ "$r" = u::7,g::7,o::5 ] || fail "default ACL not inherited: $r"
r=$(acltool create 027 666 /mnt/plain)
[ "$r" = 640 ] || fail "file without a default ACL, umask 027: mode $r"
pass "a default ACL replaces the umask, the umask applies elsewhere"

echo secret > /mnt/secret && chmod 600 /mnt/secret || fail "secret"
r=$(acltool setacl /mnt/secret access u::6,u:1000:4,g::0,m::4,o::0)
[ "$r" = ok ] || fail "setting an access ACL: $r"
[ "$(stat -c %a /mnt/secret)" = 640 ] || fail "mode after the ACL: $(stat -c %a /mnt/secret)"
r=$(acltool getacl /mnt/secret access)
[ "$r" = u::6,u:1000:4,g::0,m::4,o::0 ] || fail "ACL reads back as $r"
r=$(acltool as 1000 1000 r /mnt/secret)
[ "$r" = ok ] || fail "user 1000, named in the ACL, cannot read: $r"
r=$(acltool as 1001 1001 r /mnt/secret)
[ "$r" = EACCES ] || fail "user 1001 reads: $r"
r=$(acltool as 1000 1000 w /mnt/secret)
[ "$r" = EACCES ] || fail "user 1000 writes: $r"
r=$(acltool setacl /mnt/secret access u::6,u:70000:4,g::0,m::4,o::0)
[ "$r" = EINVAL ] || fail "ACL naming a uid outside the map: $r"
pass "access ACL enforced by the guest, ids outside the map refused"
sync
umount /mnt || fail umount
pass "unmounted"
GUEST

vm --shared "$shared" --daemon ours \
    --daemon-args="--xattr --posix-acl --uid-map=:0:100000:65536: --gid-map=:0:100000:65536:" \
    "$@" "$work/guest.sh"

# owner FILE IDS: FILE of the share has owner and group IDS on the host
owner() {
    local got
    got=$(stat -c %u:%g "$shared/$1")
    [ "$got" = "$2" ] || fail "$1 is $got on the host, not $2"
}
owner byroot 100000:100000
owner owned 101000:101000
owner acl/f 100000:100000
owner acl/d 100000:100000
# The named user in the ACL on disk is the host's id
python3 - "$shared/secret" <<'PY'
import os, struct, sys
v = os.getxattr(sys.argv[1], "system.posix_acl_access")
ents = [struct.unpack_from("<HHI", v, off) for off in range(4, len(v), 8)]
named = [e[2] for e in ents if e[0] == 0x02]
assert named == [101000], f"named users on the host: {named}"
print("ok: the ACL names host uid 101000 on disk")
PY
pass "ACLs and id maps end to end"

# The Rust daemon's in-daemon translation, as microvm.nix and kata write
# it: guest root is the host's 4000, host ids 5000-5009 all show as 600,
# guest uid 1234 may not act, other ids pass as they are.  --modcaps=-chown
# takes away the daemon's right to give files away (chown as guest root
# fails), --no-readdirplus and --preserve-noatime are accepted alongside.
tmpdir shared2 xlate
chown 4000:4000 "$shared2"
chmod 777 "$shared2"
echo a > "$shared2/squashed" && chown 5003:77 "$shared2/squashed"
echo b > "$shared2/plain" && chown 31:32 "$shared2/plain"

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt
ids=$(stat -c %u:%g /mnt)
[ "$ids" = 0:0 ] || fail "the share's owner shows as $ids, not 0:0"
ids=$(stat -c %u:%g /mnt/squashed)
[ "$ids" = 600:77 ] || fail "host 5003:77 shows as $ids, not 600:77"
ids=$(stat -c %u:%g /mnt/plain)
[ "$ids" = 31:32 ] || fail "host 31:32 shows as $ids"
pass "host ids: map, squash-host and untouched"
echo x > /mnt/byroot || fail "create as guest root"
r=$(acltool as 1000 1000 c /mnt/by1000)
[ "$r" = ok ] || fail "create as guest 1000: $r"
r=$(acltool as 1234 1000 c /mnt/by1234)
[ "$r" = EPERM ] || fail "create as forbidden guest 1234: $r"
pass "creations translated, forbid-guest refused"
if chown 1000 /mnt/byroot 2>/dev/null; then
    fail "chown worked with --modcaps=-chown"
fi
[ "$(stat -c %u /mnt/byroot)" = 0 ] || fail "owner after a refused chown"
pass "--modcaps=-chown: the daemon cannot give files away"
ls /mnt > /dev/null || fail "listing without READDIRPLUS"
sync
umount /mnt || fail umount
pass "unmounted"
GUEST

vm --shared "$shared2" --daemon ours \
    --daemon-args="--translate-uid map:0:4000:1 --translate-gid map:0:4000:1 --translate-uid squash-host:5000:600:10 --translate-uid=forbid-guest:1234:1 --modcaps=-chown --no-readdirplus --preserve-noatime" \
    "$@" "$work/guest.sh"
shared=$shared2
owner byroot 4000:4000
owner by1000 1000:1000
[ ! -e "$shared2/by1234" ] || fail "forbidden guest 1234 created a file"
pass "--translate-uid/gid, --modcaps end to end"

# Unprivileged, --uid-map/--gid-map name the user namespace the sandbox is
# made in, as with the Rust daemon: a user 4000 maps itself to root.  The
# kernel translates: the share (host 4000) is the guest root's, host
# root's file shows as 65534, and no other id can be acted as.
tmpdir shared3 userns
tmpdir bindir userns-bin
chown 4000:4000 "$shared3"
chmod 777 "$shared3"
echo r > "$shared3/hostroot"
cp "$top/build/qemu/tools/virtiofsd/virtiofsd" "$bindir/virtiofsd"
printf '#!/bin/sh\nexec setpriv --reuid=4000 --regid=4000 --clear-groups %s "$@"\n' \
    "$bindir/virtiofsd" > "$bindir/as4000"
chmod 755 "$bindir" "$bindir/virtiofsd" "$bindir/as4000"

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt
ids=$(stat -c %u:%g /mnt)
[ "$ids" = 0:0 ] || fail "the share's owner shows as $ids, not 0:0"
ids=$(stat -c %u:%g /mnt/hostroot)
[ "$ids" = 65534:65534 ] || fail "host root's file shows as $ids"
pass "host ids through the user namespace"
echo x > /mnt/byroot || fail "create as guest root"
r=$(acltool as 1000 1000 c /mnt/by1000)
[ "$r" != ok ] || fail "guest 1000, outside the namespace, created a file"
if chown 1000 /mnt/byroot 2>/dev/null; then
    fail "chown to a uid outside the namespace worked"
fi
pass "ids outside the namespace cannot be acted as ($r)"
sync
umount /mnt || fail umount
pass "unmounted"
GUEST

vm --shared "$shared3" --daemon ours \
    --daemon-binary "$bindir/as4000" --daemon-fd \
    --daemon-args="--sandbox=namespace --uid-map=:0:4000:1: --gid-map=:0:4000:1:" \
    "$@" "$work/guest.sh"
shared=$shared3
owner byroot 4000:4000
[ ! -e "$shared3/by1000" ] || fail "guest 1000 created a file"
pass "unprivileged --uid-map/--gid-map through a user namespace"
