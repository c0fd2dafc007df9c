#!/bin/sh
# Lists every source outside the daemon that includes a FUSE header (libfuse's
# <fuse*.h>, <fuse3/...>, or the kernel protocol's <linux/fuse.h>) and exits 1
# if there is one. meson.build runs it at configure time: libcsdfs, the tools
# and the unit tests build without FUSE (STYLE.md, "Shape of the tree"). Only
# daemon/ and the tests of daemon code (tests/daemon/) may include them.
# Usage: check-fuse-boundary.sh [SOURCE_ROOT]
# Only the folders that hold the project's sources are read: the tree may
# also hold a mounted volume (tools/demo.sh mounts one at demo/mnt, with
# libfuse's own headers among its sample files) and build directories.
root=${1:-$(dirname "$0")/..}
cd "$root" || exit 2
dirs=
for d in src include tools tests; do
	[ -d "$d" ] && dirs="$dirs $d"
done
# shellcheck disable=SC2086 # the folder names are separate arguments
leaks=$(grep -lE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](linux/)?fuse' \
	-r --include='*.c' --include='*.h' --include='*.cc' \
	--exclude-dir=daemon $dirs 2>/dev/null)
if [ -n "$leaks" ]; then
	echo "$leaks" | tr '\n' ' '
	exit 1
fi
exit 0
