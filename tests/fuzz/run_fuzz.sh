#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Build the libFuzzer targets (tests/fuzz/fuzz_*.c) together with libcsdfs,
# all instrumented with clang -fsanitize=fuzzer,address,undefined, and run
# each one for $FUZZ_SECONDS seconds seeded from the committed corpora
# (tests/fuzz-corpus/) and from valid inputs the replay programs write.
# Registered in meson as the 'fuzz' test of the 'slow' suite; also runs by
# hand from anywhere:
#   FUZZ_SECONDS=600 tests/fuzz/run_fuzz.sh
#
# Environment:
#   FUZZ_SECONDS   seconds per target (default 60)
#   FUZZ_TARGETS   which targets (default "super chunk")
#   FUZZ_WORK_DIR  build products, the growing corpora and any artifacts
#                  (default: a new directory under ${TMPDIR:-/tmp}); the
#                  corpora are kept between runs in the same directory
#   CLANG          the compiler (default clang)
# Exit: 0 no finding, 1 a target crashed/leaked/hung (the input is printed:
# keep it as tests/fuzz-corpus/<target>/crash-*.bin and report it), 77 no
# clang with libFuzzer here (Debian: apt-get install clang, and
# libclang-rt-<version>-dev where the runtime is packaged separately).
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
seconds=${FUZZ_SECONDS:-60}
targets=${FUZZ_TARGETS:-super chunk}
clang=${CLANG:-clang}
work=${FUZZ_WORK_DIR:-}
if [ -z "$work" ]; then
	work=$(mktemp -d "${TMPDIR:-/tmp}/csdfs-fuzz.XXXXXX") || exit 1
fi
mkdir -p "$work" || exit 1
work=$(cd "$work" && pwd)

say() { printf 'run_fuzz: %s\n' "$*" >&2; }

if ! command -v "$clang" >/dev/null 2>&1; then
	say "'$clang' not found: skipping (install clang)"
	exit 77
fi
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }\n' \
	>"$work/probe.c"
if ! "$clang" -fsanitize=fuzzer "$work/probe.c" -o "$work/probe" 2>"$work/probe.log"; then
	say "'$clang' cannot link -fsanitize=fuzzer: skipping (Debian: install libclang-rt-N-dev)"
	sed 's/^/  /' "$work/probe.log" >&2
	exit 77
fi

cflags=(-std=gnu11 -g -O1 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64
	-I"$top/include" -I"$top/src"
	-fno-omit-frame-pointer -fno-sanitize-recover=all)
libs=(-lzstd -llz4 -llmdb -lpthread)

# The library: every source of libcsdfs (the daemon lives in daemon/).
lib_src=("$top"/src/*.c)

mkdir -p "$work/obj-fuzz" "$work/obj-replay" "$work/bin" "$work/artifacts"
# An archive, as meson builds it: a target links only the objects it needs.
build_lib() {   # $1 = object dir, rest = sanitizer flags
	local dir=$1 f o
	shift
	rm -f "$dir"/*.o "$dir/libcsdfs.a"
	for f in "${lib_src[@]}"; do
		o="$dir/$(basename "$f" .c).o"
		"$clang" "${cflags[@]}" "$@" -c "$f" -o "$o" || return 1
	done
	ar rcs "$dir/libcsdfs.a" "$dir"/*.o
}
say "building libcsdfs and the targets with $("$clang" --version | head -n1)"
build_lib "$work/obj-fuzz" -fsanitize=fuzzer-no-link,address,undefined || exit 1
build_lib "$work/obj-replay" -fsanitize=address,undefined || exit 1
for t in $targets; do
	"$clang" "${cflags[@]}" -fsanitize=fuzzer,address,undefined -DCSDFS_FUZZ_LIBFUZZER \
		"$here/fuzz_$t.c" "$work/obj-fuzz/libcsdfs.a" "${libs[@]}" -o "$work/bin/fuzz_$t" || exit 1
	"$clang" "${cflags[@]}" -fsanitize=address,undefined \
		"$here/fuzz_$t.c" "$work/obj-replay/libcsdfs.a" "${libs[@]}" -o "$work/bin/replay_$t" || exit 1
done

# Seeds: the must-fail corpora (in the target's input format) plus valid
# inputs, so the fuzzer starts on both sides of every check.
for t in $targets; do
	rm -rf "$work/seeds/$t"
	mkdir -p "$work/seeds/$t" "$work/corpus/$t"
	"$work/bin/replay_$t" --write-seeds "$work/seeds/$t" || exit 1
	case $t in
	super)
		cp "$top"/tests/fuzz-corpus/super/*.bin "$work/seeds/$t/" 2>/dev/null
		;;
	chunk)
		"$work/bin/replay_$t" --to-input "$work/seeds/$t" \
			"$top/tests/fuzz-corpus/codec" >/dev/null || exit 1
		;;
	esac
done

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for t in $targets; do
	# chunk: libzstd/liblz4 are not instrumented, so the valid frames add no
	# coverage of their own; -keep_seed keeps them as mutation bases.
	case $t in
	super) extra=(-max_len=4200) ;;
	*) extra=(-max_len=65536 -keep_seed=1) ;;
	esac
	before=$(ls "$work/artifacts" | grep -c "^$t-" || true)
	say "fuzzing $t for ${seconds}s (corpus $work/corpus/$t)"
	"$work/bin/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
		"${extra[@]}" -print_final_stats=1 \
		-artifact_prefix="$work/artifacts/$t-" \
		"$work/corpus/$t" "$work/seeds/$t" >"$work/$t.log" 2>&1
	rc=$?
	grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added|Done [0-9]+ runs)' \
		"$work/$t.log" | sed "s/^/  $t: /" >&2
	after=$(ls "$work/artifacts" | grep -c "^$t-" || true)
	if [ "$rc" -ne 0 ] || [ "$after" -gt "$before" ]; then
		say "$t: FINDING (exit $rc); log: $work/$t.log"
		grep -E 'ERROR:|SUMMARY:|fuzz_(super|chunk):|runtime error' "$work/$t.log" | head -n 20 >&2
		ls -l "$work/artifacts" | grep " $t-" >&2
		say "keep the input as tests/fuzz-corpus/<target>/crash-*.bin and report it"
		status=1
	fi
done
exit $status
