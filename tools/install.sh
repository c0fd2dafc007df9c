#!/usr/bin/env bash
# Build csdfs and install its programs and man pages, by default under
# /usr/local: csdfs, csdfs-mkfs, csdfs-fsck, csdfs-stat, csdfs-recompress in
# PREFIX/bin, the pages in PREFIX/share/man (where man(1) looks). Run as
# root, or prefix with sudo.
#
# mount(8) runs helpers with a fixed PATH (/usr/local/sbin:/usr/local/bin:
# /usr/sbin:/usr/bin:/sbin:/bin), so 'mount -t fuse.csdfs' and fstab lines
# find csdfs under /usr/local or /usr and under no other prefix.
#
# Usage: tools/install.sh [--prefix DIR] [--destdir DIR] [--build DIR]
#   --prefix DIR   where to install                       [/usr/local]
#   --destdir DIR  stage the files under DIR (packaging, tests)
#   --build DIR    meson build directory to use           [<repo>/build]
# Environment: CSDFS_SKIP_DEPS=1  do not run 'tools/deps.sh install'
set -euo pipefail

prog=install.sh
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

die() {
	echo "$prog: $*" >&2
	exit 1
}

prefix=/usr/local
destdir=
build=$root/build
while [ $# -gt 0 ]; do
	case $1 in
	--prefix | --destdir | --build)
		[ $# -ge 2 ] || die "'$1' needs a value"
		case $1 in
		--prefix) prefix=$2 ;;
		--destdir) destdir=$2 ;;
		--build) build=$2 ;;
		esac
		shift 2
		;;
	-h | --help)
		sed -n '2,16s/^# \{0,1\}//p' "$0"
		exit 0
		;;
	*) die "unknown argument '$1' (try --help)" ;;
	esac
done
case $prefix in /*) ;; *) die "prefix '$prefix' is not an absolute path" ;; esac
case $build in /*) ;; *) build=$PWD/$build ;; esac
case $destdir in '' | /*) ;; *) destdir=$PWD/$destdir ;; esac
if [ -z "$destdir" ] && [ "$(id -u)" -ne 0 ] && [ ! -w "$(dirname "$prefix")" ]; then
	die "installing into '$prefix' needs root: run as root, or prefix with sudo"
fi

if [ "${CSDFS_SKIP_DEPS:-0}" != 1 ]; then
	bash "$root/tools/deps.sh" install
fi

log=$(mktemp "${TMPDIR:-/tmp}/csdfs-install.XXXXXX")
trap 'rm -f "$log"' EXIT
run() { # run WHAT CMD...: CMD's output only when it fails
	local what=$1
	shift
	"$@" >"$log" 2>&1 || { tail -n 30 "$log" >&2; die "$what failed: '$*'"; }
}
if [ ! -f "$build/meson-private/coredata.dat" ]; then
	rm -rf "$build"
	run "configuring" meson setup --prefix "$prefix" "$build" "$root"
elif [ "$(meson introspect --buildoptions "$build" |
	python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')" != "$prefix" ]; then
	run "configuring" meson configure "-Dprefix=$prefix" "$build"
fi
run "building" ninja -C "$build"
set -- meson install -C "$build" --no-rebuild
[ -z "$destdir" ] || set -- "$@" --destdir "$destdir"
run "installing" "$@"

to=$destdir$prefix
echo "$prog: installed into $to:"
for f in csdfs csdfs-mkfs csdfs-fsck csdfs-stat csdfs-recompress; do
	[ -x "$to/bin/$f" ] || die "'$to/bin/$f' is missing after 'meson install'"
	echo "  $to/bin/$f"
done
echo "  $to/share/man/man{1,5,8}/ (man csdfs, man 5 csdfs, man csdfs-mkfs, ...)"
[ -z "$destdir" ] || exit 0

# Refresh man's index (whatis, apropos); man finds the pages without it.
if command -v mandb >/dev/null 2>&1; then
	mandb -q "$prefix/share/man" >/dev/null 2>&1 || true
fi
case $prefix in
/usr/local | /usr) ;;
*)
	echo "$prog: note: mount(8) and 'fuse.csdfs' fstab lines find csdfs only in" \
		"/usr/local/bin, /usr/bin or /bin: link '$prefix/bin/csdfs' there to use them"
	;;
esac
case ":$PATH:" in
*":$prefix/bin:"*) ;;
*) echo "$prog: note: '$prefix/bin' is not on your PATH" ;;
esac
