#!/bin/sh
# aarch64_sysroot.sh DIR - make DIR an arm64 Debian 12 (bookworm) tree with
# the headers and libraries pocket links against (libc, PCRE2,
# libmicrohttpd, jansson, libedit), for cross-compiling and for
# qemu-aarch64 -L DIR.
# Reuses DIR if it already has them. Unpacks packages only (mmdebstrap
# --variant=extract: nothing of the target is run), from $DEB_MIRROR or else
# the Debian archive this machine's apt uses (its sources list), else
# deb.debian.org. Needs root (mmdebstrap's root mode); used by
# `make test-aarch64`.
set -eu
dir=${1:?usage: aarch64_sysroot.sh DIR}
suite=${DEB_SUITE:-bookworm}
pkgs=libc6-dev,libpcre2-dev,libmicrohttpd-dev,libjansson-dev,libedit-dev

complete() {
    for f in lib/ld-linux-aarch64.so.1 usr/include/stdio.h usr/include/pcre2.h \
             usr/include/microhttpd.h usr/include/jansson.h usr/include/editline/readline.h \
             usr/lib/aarch64-linux-gnu/libpcre2-8.so usr/lib/aarch64-linux-gnu/libmicrohttpd.so \
             usr/lib/aarch64-linux-gnu/libjansson.so usr/lib/aarch64-linux-gnu/libedit.so; do
        [ -e "$1/$f" ] || return 1
    done
}
if complete "$dir"; then
    echo "arm64 sysroot: reusing $dir"
    exit 0
fi

# The main archive among apt's sources: deb822 "URIs:" lines of
# sources.list.d/*.sources, then one-line "deb URI suite ..." entries;
# security and update archives are skipped.
mirror=${DEB_MIRROR:-}
if [ -z "$mirror" ]; then
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        for u in $(sed -n 's/^URIs:[[:space:]]*//p' "$f"); do
            case $u in *security*) ;; *) mirror=${mirror:-$u} ;; esac
        done
    done
fi
if [ -z "$mirror" ]; then
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        u=$(sed -n 's/^deb[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]\{1,\}\)\{0,1\}\([^[:space:]]*\).*/\2/p' "$f" |
            grep -v security | head -n 1)
        mirror=${mirror:-$u}
    done
fi
mirror=${mirror:-http://deb.debian.org/debian}

if [ "$(id -u)" != 0 ]; then
    echo "error: making the arm64 sysroot $dir needs root (mmdebstrap); run make test-aarch64 as root" >&2
    exit 1
fi
echo "arm64 sysroot: $suite from $mirror into $dir ($pkgs)"
rm -rf "$dir" "$dir.tmp"
mkdir -p "$(dirname "$dir")"
mmdebstrap --quiet --arch=arm64 --variant=extract --include="$pkgs" "$suite" "$dir.tmp" "$mirror"
complete "$dir.tmp" || { echo "error: $dir.tmp lacks some of $pkgs after mmdebstrap" >&2; exit 1; }
mv "$dir.tmp" "$dir"
