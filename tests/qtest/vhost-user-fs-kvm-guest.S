/*
 * The guest of vhost-user-fs-test's window/kvm-truncate and
 * window/kvm-readonly-stores: a 64 KiB firmware image that enters 32-bit
 * protected mode and reads one word of every 4 KiB page of the cache
 * window again and again.  The test tells it where the window is (guest
 * physical 0x8000) and how many bytes to read (0x8004); it adds up the
 * words it reads (0x8008) and counts its passes (0x800c).  If the word
 * at 0x8010 is not zero when a pass starts, the pass stores that word
 * into each page instead of reading it.  The test carries the assembled
 * bytes; to make them again:
 *
 *   as --32 -o g.o vhost-user-fs-kvm-guest.S &&
 *   ld -m elf_i386 -Ttext=0 --oformat=binary -o g.bin g.o && xxd -i g.bin
 *
 * The image maps at 0xf0000 (below 1 MiB, the ISA BIOS alias) and at the
 * top of 4 GiB; the reset vector at its end jumps to its start.
 *
 * Copyright (c) 2026 virtiofs-dax developers
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

    .code16
    .text
    .globl _start
_start:
    cli
    cld
    lidtl %cs:(idt_desc - _start)
    lgdtl %cs:(gdt_desc - _start)
    /* Protected mode, caches on (CD and NW are set at reset) */
    movl %cr0, %eax
    andl $0x9fffffff, %eax
    orl $1, %eax
    movl %eax, %cr0
    ljmpl $0x08, $(0xf0000 + pm - _start)

    .code32
pm:
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
wait:
    movl 0x8000, %esi
    testl %esi, %esi
    jz wait
outer:
    movl 0x8004, %ecx
    movl 0x8010, %ebx
    xorl %edx, %edx
inner:
    testl %ebx, %ebx
    jnz store
    movl (%esi,%edx), %eax
    addl %eax, 0x8008
    jmp next
store:
    movl %ebx, (%esi,%edx)
next:
    addl $4096, %edx
    cmpl %ecx, %edx
    jb inner
    incl 0x800c
    jmp outer

    .align 8
gdt:
    .quad 0
    /*
     * Flat 32-bit code and data, marked accessed: loading a segment
     * whose descriptor is not would make the CPU write the bit into this
     * table, which lies in ROM, and KVM retries that write for ever
     */
    .quad 0x00cf9b000000ffff
    .quad 0x00cf93000000ffff
gdt_desc:
    .word gdt_desc - gdt - 1
    .long 0xf0000 + gdt - _start
idt_desc:                           /* none: nothing may interrupt */
    .word 0
    .long 0
