#!/usr/bin/env bash
# Build csdfs and run its unit and integration test suites.
#
# This is the one test command: the README gives it and .ci/run execs it.
# Works from any directory. Integration tests mount FUSE filesystems, so
# they run one at a time (--num-processes 1).
#
# It runs the suites twice: a normal build (build/), then the same suites
# under AddressSanitizer + UBSan (build-asan/, timeouts x3). Where the
# kernel has FUSE over io_uring (Linux >= 6.14), the first pass runs with
# the fuse module's enable_uring off (requests on /dev/fuse, the kernel's
# default) and the sanitizer pass with it on (requests over io_uring), so
# both transports see every test; the parameter is restored at the end.
#
# Environment:
#   CSDFS_SANITIZE=0   skip the sanitizer pass; =only: run only that pass
#   CSDFS_SKIP_DEPS=1  do not run tools/deps.sh (packages already installed)
#   MESON_TEST_ARGS    extra arguments for 'meson test' (word-split)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

if [ "${CSDFS_SKIP_DEPS:-0}" != 1 ]; then
	bash tools/deps.sh test
fi

uring_param=/sys/module/fuse/parameters/enable_uring
uring_orig=$(cat "$uring_param" 2>/dev/null || true)

run_pass() { # builddir sanitize(0|1) enable_uring(Y|N)
	local builddir=$1 sanitize=$2 uring=$3 setup_log rc=0
	local setup_args=() extra=() mult=()

	if [ "$sanitize" = 1 ]; then
		setup_args=("-Db_sanitize=address,undefined" -Db_lundef=false)
		# Fail loudly on the first report instead of limping on.
		export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
		export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
		mult=(--timeout-multiplier 3)
		export CSDFS_TIME_SCALE=3  # the scripts' own bounds (lib.sh)
		# Under ASan every metadata operation costs about 40x: LMDB
		# mallocs 3 MiB per nested txn, which ASan maps, poisons and
		# unmaps each time. 50 000 files (the plain pass) then take
		# ~15 minutes; 10 000 cover the same code paths.
		export CSDFS_MANYFILES="${CSDFS_MANYFILES:-10000}"
	fi
	setup_log=$(mktemp "${TMPDIR:-/tmp}/csdfs-setup.XXXXXX")
	if [ -f "$builddir/meson-private/coredata.dat" ]; then
		set -- meson setup --reconfigure "${setup_args[@]}" "$builddir"
	else
		# A half-made build dir (e.g. an interrupted first setup) cannot
		# be reconfigured; start it afresh.
		rm -rf "$builddir"
		set -- meson setup "${setup_args[@]}" "$builddir"
	fi
	if ! "$@" >"$setup_log" 2>&1; then
		cat "$setup_log" >&2
		echo "test.sh: '$*' failed" >&2
		rm -f "$setup_log"
		return 1
	fi
	rm -f "$setup_log"
	ninja -C "$builddir" || return 1
	if [ -n "${MESON_TEST_ARGS:-}" ]; then
		read -r -a extra <<<"$MESON_TEST_ARGS"
	fi
	local transport="/dev/fuse"
	if [ -w "$uring_param" ] && echo "$uring" >"$uring_param" 2>/dev/null; then
		[ "$uring" = Y ] && transport="io_uring"
	fi
	echo "== test.sh: $builddir ($([ "$sanitize" = 1 ] && echo 'ASan+UBSan' || echo 'plain build'), FUSE requests over $transport)"
	meson test -C "$builddir" --suite unit --suite integration \
		--print-errorlogs --num-processes 1 "${mult[@]}" "${extra[@]}" \
		2>&1 | tee "$summary.log"
	rc=${PIPESTATUS[0]}  # errexit is off here: run_pass is called with ||
	# Tally meson's summary ("Ok: N", "Fail: N", "Timeout: N", "Skipped: N").
	awk '/^Ok:/ {p += $2} /^(Fail|Timeout|Unexpected Pass):/ {f += $NF}
	     /^Skipped:/ {s += $2} END {print p + 0, f + 0, s + 0}' "$summary.log" \
		>>"$summary"
	rm -f "$summary.log"
	return "$rc"
}

summary=$(mktemp "${TMPDIR:-/tmp}/csdfs-summary.XXXXXX")
trap 'rm -f "$summary" "$summary.log"; [ -z "$uring_orig" ] || echo "$uring_orig" >"$uring_param" 2>/dev/null' EXIT

rc=0
case "${CSDFS_SANITIZE:-1}" in
only) run_pass build-asan 1 Y || rc=$? ;;
0) run_pass build 0 N || rc=$? ;;
*)
	run_pass build 0 N || rc=$?
	run_pass build-asan 1 Y || rc=$?
	;;
esac
# One plain closing line for CI: tests passed and failed over all passes.
awk '{p += $1; f += $2; s += $3} END {printf "test.sh: %d passed, %d failed, %d skipped\n", p, f, s}' "$summary"
exit "$rc"
