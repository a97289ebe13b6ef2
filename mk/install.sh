#!/usr/bin/env bash
# make install PREFIX=... [DESTDIR=...] [VHOST_USER_DIR=...]: QEMU's own
# install (qemu-system-x86_64, tools, virtiofsd when built) under PREFIX,
# optionally below DESTDIR, then what QEMU's install does not cover:
#   - the vhost-user descriptor that lets libvirt find virtiofsd when a
#     domain names no <binary path>, in VHOST_USER_DIR (default
#     PREFIX/share/qemu/vhost-user);
#   - virtiofsd's man page, when docs/tools/virtiofsd.rst exists and Sphinx
#     is there to build it.
# libvirt looks for descriptors only in /usr/share/qemu/vhost-user and
# /etc/qemu/vhost-user (and, for session daemons, under XDG_CONFIG_HOME): with
# a PREFIX other than /usr, pass VHOST_USER_DIR=/etc/qemu/vhost-user.
set -euo pipefail
. "$(dirname "$0")/common.sh"

prefix=${PREFIX:-/usr/local}
dest=${DESTDIR:-}
"$CACHE/pyvenv/bin/meson" install -C "$BUILD/qemu" --no-rebuild \
    ${DESTDIR:+--destdir "$DESTDIR"} >"$BUILD/install.log" 2>&1 ||
    die "install failed (see build/install.log)"

# virtiofsd: QEMU's install puts it in libexecdir; find where it went (a
# build configured with another prefix or libexecdir still works).
daemon_dir=
for d in "$prefix/libexec" "$prefix/bin" "$prefix/lib/qemu"; do
    if [ -x "$dest$d/virtiofsd" ]; then
        daemon_dir=$d
        break
    fi
done
if [ -z "$daemon_dir" ] && [ -x "$BUILD/qemu/tools/virtiofsd/virtiofsd" ]; then
    daemon_dir=$prefix/libexec
    install -D -m 755 "$BUILD/qemu/tools/virtiofsd/virtiofsd" \
        "$dest$daemon_dir/virtiofsd"
fi

if [ -n "$daemon_dir" ]; then
    vu_dir=${VHOST_USER_DIR:-$prefix/share/qemu/vhost-user}
    mkdir -p "$dest$vu_dir"
    sed "s|@BINDIR@|$daemon_dir|g" "$TOP/tools/virtiofsd/50-virtiofsd.json.in" \
        > "$dest$vu_dir/50-virtiofsd.json.new"
    chmod 644 "$dest$vu_dir/50-virtiofsd.json.new"
    mv "$dest$vu_dir/50-virtiofsd.json.new" "$dest$vu_dir/50-virtiofsd.json"
    say "installed $dest$daemon_dir/virtiofsd and $dest$vu_dir/50-virtiofsd.json"
    case "$vu_dir" in
    /usr/share/qemu/vhost-user|/etc/qemu/vhost-user) ;;
    *) say "note: libvirt reads descriptors from /usr/share/qemu/vhost-user and" \
           "/etc/qemu/vhost-user only; use VHOST_USER_DIR=/etc/qemu/vhost-user" \
           "for libvirt to find virtiofsd without <binary path>" ;;
    esac
else
    say "note: virtiofsd is not built; no vhost-user descriptor installed"
fi

# Man page: QEMU's docs are disabled in our build, so build this one page
# directly when its source exists and Sphinx is available.
rst=$SRC/docs/tools/virtiofsd.rst
[ -f "$rst" ] || rst=$TOP/docs/tools/virtiofsd.rst
if [ -f "$rst" ]; then
    sphinx=$(command -v sphinx-build || true)
    [ -n "$sphinx" ] || [ ! -x "$BUILD/qemu/pyvenv/bin/sphinx-build" ] ||
        sphinx=$BUILD/qemu/pyvenv/bin/sphinx-build
    if [ -n "$sphinx" ]; then
        tmp=$(mktemp -d)
        trap 'rm -rf "$tmp"' EXIT
        mkdir "$tmp/src"
        cp "$rst" "$tmp/src/virtiofsd.rst"
        cat > "$tmp/src/conf.py" <<'EOF'
project = 'virtiofs-dax'
master_doc = 'virtiofsd'
man_pages = [('virtiofsd', 'virtiofsd',
              'virtio-fs vhost-user back-end with DAX cache window support',
              [], 1)]
EOF
        if "$sphinx" -q -b man "$tmp/src" "$tmp/man" >"$BUILD/install-man.log" 2>&1 &&
                [ -f "$tmp/man/virtiofsd.1" ]; then
            install -D -m 644 "$tmp/man/virtiofsd.1" \
                "$dest$prefix/share/man/man1/virtiofsd.1"
            say "installed $dest$prefix/share/man/man1/virtiofsd.1"
        else
            say "warning: virtiofsd man page not built (see build/install-man.log)"
        fi
    else
        say "note: sphinx-build not found: virtiofsd man page not installed" \
            "(apt-get install python3-sphinx)"
    fi
fi
say "installed under ${DESTDIR:-}$prefix"
