#!/usr/bin/env bash
# Build csdfs and run its unit and integration test suites.
#
# This is the one test command: the README gives it and .ci/run execs it.
# Works from any directory. Integration tests mount FUSE filesystems, so
# they run one at a time (--num-processes 1).
#
# Environment:
#   CSDFS_SANITIZE=1   build in build-asan/ with AddressSanitizer and UBSan
#   CSDFS_SKIP_DEPS=1  do not run tools/deps.sh (packages already installed)
#   MESON_TEST_ARGS    extra arguments for 'meson test' (word-split)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

if [ "${CSDFS_SKIP_DEPS:-0}" != 1 ]; then
	bash tools/deps.sh
fi

builddir=build
setup_args=()
if [ "${CSDFS_SANITIZE:-0}" = 1 ]; then
	builddir=build-asan
	setup_args=("-Db_sanitize=address,undefined" -Db_lundef=false)
	# Fail loudly on the first report instead of limping on.
	export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
	export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
fi

setup_log=$(mktemp "${TMPDIR:-/tmp}/csdfs-setup.XXXXXX")
if [ -f "$builddir/meson-private/coredata.dat" ]; then
	set -- meson setup --reconfigure "${setup_args[@]}" "$builddir"
else
	# A half-made build dir (e.g. an interrupted first setup) cannot be
	# reconfigured; start it afresh.
	rm -rf "$builddir"
	set -- meson setup "${setup_args[@]}" "$builddir"
fi
if ! "$@" >"$setup_log" 2>&1; then
	cat "$setup_log" >&2
	echo "test.sh: '$*' failed" >&2
	exit 1
fi
rm -f "$setup_log"
ninja -C "$builddir"

extra=()
if [ -n "${MESON_TEST_ARGS:-}" ]; then
	read -r -a extra <<<"$MESON_TEST_ARGS"
fi

rc=0
meson test -C "$builddir" --suite unit --suite integration \
	--print-errorlogs --num-processes 1 "${extra[@]}" || rc=$?
exit "$rc"
