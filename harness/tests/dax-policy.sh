#!/usr/bin/env bash
# virtiofsd --dax-policy by its outcome in the guest: with -o dax=inode
# the guest asks per file, and statx(2)'s STATX_ATTR_DAX
# (harness/guest-tools/daxattr.c) says which files it serves through the
# cache window.  One guest per policy, on the same three files: a small
# one, a 3 MiB one, and a small one tagged with the user.virtiofsd.dax
# xattr on the host.
#   always   all three             size:1M  the 3 MiB one
#   xattr    the tagged one        never    none
#   default  (no --dax-policy, which is size:2M) the 3 MiB one
# Each guest also reads every file back right, whichever way it went.
# Extra arguments go to harness/vm.py (the daemon is ours: the policy is
# its option); the --timeout among them is for the four guests.
# DAX_POLICIES names the policies to run, fewer than the four (the guest
# kernel matrix runs size:1M alone: both outcomes of dax=inode in one
# guest).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
policies=${DAX_POLICIES:-always size:1M xattr never default}
split_timeout "$(wc -w <<<"$policies")" "$@"
pattern="python3 $top/harness/tests/pattern.py"
shared=$work/shared
mkdir "$shared"
$pattern write "$shared/small" 4096 1
$pattern write "$shared/big" $((3 << 20)) 2
$pattern write "$shared/tagged" 4096 3
python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.virtiofsd.dax", b"1")' \
    "$shared/tagged"

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=inode
daxattr /mnt/small /mnt/big /mnt/tagged || fail "statx"
mmapio check /mnt/small 1 && mmapio check /mnt/big 2 &&
    mmapio check /mnt/tagged 3 || fail "reading the files back"
umount /mnt || fail umount
GUEST

ran=0
# run POLICY SMALL BIG TAGGED: each "dax" or "nodax"
run() {
    local policy=$1 rc=0 f want got
    shift
    case " $policies " in
    *" $policy "*) ;;
    *) return 0 ;;
    esac
    ran=$((ran + 1))
    vm --quiet --shared "$shared" --cache-size 16M \
        "${vm_args[@]}" --daemon ours \
        --daemon-args="$([ "$policy" = default ] || echo "--dax-policy=$policy")" \
        "$work/guest.sh" > "$work/$policy.out" 2>&1 || rc=$?
    if [ $rc != 0 ]; then
        bad "--dax-policy=$policy: the guest run failed (status $rc)"
        sed 's/^/    /' "$work/$policy.out"
        return
    fi
    for f in small big tagged; do
        want=$1
        shift
        got=$(sed -n "s|^/mnt/$f \(no\)\{0,1\}dax\$|&|p" "$work/$policy.out")
        got=${got##* }
        if [ "$got" = "$want" ]; then
            pass "--dax-policy=$policy: $f is $want"
        else
            bad "--dax-policy=$policy: $f is '${got}', not $want"
        fi
    done
}
run always dax dax dax
run size:1M nodax dax nodax
run xattr nodax nodax dax
run never nodax nodax nodax
run default nodax dax nodax
if [ $ran != "$(wc -w <<<"$policies")" ]; then
    bad "DAX_POLICIES=\"$policies\": $ran of them are policies this test knows"
fi
finish
