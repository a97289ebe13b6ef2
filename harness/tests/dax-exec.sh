#!/usr/bin/env bash
# DAX and translated code: two programs that differ in one instruction
# take turns in a one-range (2 MiB) cache window, so each run maps its
# program where the other one was.  Under TCG, QEMU must drop the code it
# translated from the previous mapping: a stale translation runs the other
# program's code (prints "A" where "B" is due).
# The accelerator is TCG whatever the arguments say: under KVM the test
# cannot fail.  Needs gcc on the host.  Extra arguments go to
# harness/vm.py.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
tmpdir shared exec

cat > "$shared/prog.c" <<'PROG'
void _start(void)
{
    volatile char c[2] = { CH, '\n' };
    long ret;

    asm volatile("syscall" : "=a"(ret) : "a"(1), "D"(1), "S"(c), "d"(2)
                 : "rcx", "r11", "memory");
    asm volatile("syscall" : : "a"(60), "D"(0) : "rcx", "r11", "memory");
    __builtin_unreachable();
}
PROG
for ch in A B; do
    gcc -O1 -static -nostdlib -fno-pie -no-pie -fno-stack-protector \
        -Wl,--build-id=none -DCH="'$ch'" -o "$shared/prog$ch" "$shared/prog.c"
done
# The same layout: only the character differs, inside the code.
[ "$(cmp -l "$shared/progA" "$shared/progB" | wc -l)" = 1 ]

guest_script "$work/guest.sh" <<'GUEST'
[ "$VFS_ACCEL" = tcg ] || fail "running under $VFS_ACCEL, not TCG"
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active"
out=""
for i in 1 2 3 4; do
    out="$out$(/mnt/progA)$(/mnt/progB)"
done
[ "$out" = "ABABABAB" ] || fail "stale translated code: $out"
pass "each program ran its own code: $out"
GUEST

vm --shared "$shared" --cache-size 2M "$@" --accel tcg "$work/guest.sh"
