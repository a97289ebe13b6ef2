# Sourced, after lib.sh, by the shared-root tests (shared-root-exec.sh,
# shared-root-two.sh): a small root file system a guest chroots into, as
# it would into a container image or a package store served read-only to
# many VMs, built from the host's own dynamic loader and C library:
#
#   /lib64/ld-linux-x86-64.so.2, /lib/x86_64-linux-gnu/libc.so.6
#                         the host's (0755, under 2 MiB on Debian 12)
#   /lib/libdensity.so    a library, 0644 as Debian installs them, with a
#                         1 MiB table (every byte VERSION) in its own
#                         pages: under 2 MiB, so only the ELF magic puts
#                         it in the window under --dax-policy=exec
#   /bin/prog             dynamically linked to it; prints its version,
#                         the library's, and the table's sum; "serve"
#                         stays and prints again on each SIGUSR1
#   /bin/busybox          the host's static busybox, an interpreter
#   /bin/script           "#!/bin/busybox sh": it finds its interpreter
#                         in its own /proc/PID/maps
#   /etc/data             a small data file, 0644
#
# Needs gcc and a static busybox on the host: a missing one fails the
# test, naming it.

# root_build DIR VERSION: programs and library of VERSION (1, 2...) in DIR
root_build() {
    local dir=$1 v=$2 src
    src=$(mktemp -d)
    mkdir -p "$dir/bin" "$dir/lib"
    cat > "$src/lib.c" <<'LIB'
#include <stddef.h>

/* The table is the file's own pages, every byte FILL, read-only. */
__asm__(".section .rodata\n"
        ".balign 4096\n"
        ".globl density_table\n"
        ".hidden density_table\n"
        "density_table:\n"
        ".fill 1048576, 1, " FILL "\n"
        ".previous\n");
extern const unsigned char density_table[1048576];

const char *density_version(void)
{
    return "lib v" FILL;
}

unsigned long density_sum(void)
{
    unsigned long sum = 0;
    size_t i;

    for (i = 0; i < sizeof(density_table); i++) {
        sum += ((const volatile unsigned char *)density_table)[i];
    }
    return sum;
}
LIB
    cat > "$src/prog.c" <<'PROG'
#include <signal.h>
#include <stdio.h>
#include <string.h>

const char *density_version(void);
unsigned long density_sum(void);

static void report(void)
{
    printf("prog v" FILL " %s sum %lu\n", density_version(), density_sum());
    fflush(stdout);
}

int main(int argc, char **argv)
{
    sigset_t usr1, old;
    int sig;

    if (argc > 1 && !strcmp(argv[1], "serve")) {
        /* Blocked before the first report: a poke cannot come too early */
        sigemptyset(&usr1);
        sigaddset(&usr1, SIGUSR1);
        sigprocmask(SIG_BLOCK, &usr1, &old);
        report();
        for (;;) {
            if (sigwait(&usr1, &sig) == 0) {
                report();
            }
        }
    }
    report();
    return 0;
}
PROG
    gcc -O1 -fPIC -shared -DFILL="\"$v\"" -o "$src/libdensity.so" "$src/lib.c" &&
        gcc -O1 -DFILL="\"$v\"" -o "$src/prog" "$src/prog.c" \
            -L"$src" -ldensity -Wl,-rpath,/lib ||
        { rm -rf "$src"; fail "cannot build the test programs with gcc"; }
    install -m 0644 "$src/libdensity.so" "$dir/lib/libdensity.so"
    install -m 0755 "$src/prog" "$dir/bin/prog"
    rm -rf "$src"
}

# root_make DIR: the whole root, version 1
root_make() {
    local dir=$1 bb ld libc
    need gcc "apt-get install gcc"
    bb=/bin/busybox
    [ -x "$bb" ] && file -L "$bb" 2>/dev/null | grep -q static ||
        fail "a static busybox is missing (apt-get install busybox-static)"
    ld=$(readlink -f /lib64/ld-linux-x86-64.so.2)
    libc=$(readlink -f /lib/x86_64-linux-gnu/libc.so.6)
    [ -f "$ld" ] && [ -f "$libc" ] ||
        fail "the host's dynamic loader or libc.so.6 is missing"
    mkdir -p "$dir/lib64" "$dir/lib/x86_64-linux-gnu" "$dir/bin" "$dir/etc" \
        "$dir/proc"
    install -m 0755 "$ld" "$dir/lib64/ld-linux-x86-64.so.2"
    install -m 0755 "$libc" "$dir/lib/x86_64-linux-gnu/libc.so.6"
    install -m 0755 "$bb" "$dir/bin/busybox"
    printf '#!/bin/busybox sh\ngrep -q " /bin/busybox$" /proc/$$/maps &&\n    echo "script: run by /bin/busybox, mapped"\n' > "$dir/bin/script"
    chmod 0755 "$dir/bin/script"
    echo "a small data file" > "$dir/etc/data"
    root_build "$dir" 1
}

# The files the exec policy must put in the window, and the one it must not
ROOT_DAX_FILES="bin/prog lib/libdensity.so lib/x86_64-linux-gnu/libc.so.6
lib64/ld-linux-x86-64.so.2 bin/busybox bin/script"
ROOT_NODAX_FILES="etc/data"
