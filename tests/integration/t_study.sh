#!/bin/bash
# t_study: tools/mysql-study's option parsing (issue 19.4). Bad input is
# refused before anything is installed, mounted or created, with exit
# status 1 and one line naming the problem; good input is accepted
# (--dry-run prints the cells it would run, and --quick's are the ones the
# docs promise). No MySQL run here: the study itself takes minutes.
. "$(dirname "$0")/lib.sh"

STUDY=$REPO_ROOT/tools/mysql-study
[ -x "$STUDY" ] || die "tools/mysql-study not found at $STUDY"
setup
DIR=$WORK/study-dir

# refused LABEL FRAGMENT ARGS...: exit 1, exactly one line on stderr, which
# names the tool and contains FRAGMENT, nothing on stdout, no work dir
refused() {
	local label=$1 frag=$2 rc
	shift 2
	timeout -k 2 20 "$STUDY" --dir "$DIR" "$@" >"$WORK/out" 2>"$WORK/err"
	rc=$?
	check_eq "$label: exit 1" 1 $rc
	check_eq "$label: one line on stderr ($(head -c 200 "$WORK/err" | tr '\n' '|'))" 1 "$(grep -c '' "$WORK/err")"
	check "$label: the line names the problem" grep -qF "mysql-study: $frag" "$WORK/err"
	check_eq "$label: nothing on stdout" 0 "$(grep -c '' "$WORK/out")"
	check "$label: no work dir made" test ! -e "$DIR"
}

refused "unknown option" "unknown option '--bogus'" --bogus
refused "stray word" "unknown option 'quick'" quick
refused "--fs without value" "--fs needs a value" --fs
refused "--fs followed by an option" "--fs needs a value" --fs --quick
refused "unknown file system" "unknown value 'zfs' in --fs" --fs plain,zfs
refused "unknown workload" "unknown value 'oltp' in --workloads" --workloads ro,oltp
refused "zero threads" "--threads takes positive numbers, not '0'" --threads 1,0
refused "threads not a number" "--threads takes positive numbers, not 'four'" --threads four
refused "threads only commas" "--threads needs a value" --threads ,
refused "lower-case doublewrite" "unknown value 'off' in --doublewrite" --doublewrite off
refused "time with a unit" "--time must be a positive number of seconds, not '5s'" --time 5s
refused "zero time" "--time must be a positive number of seconds, not '0'" --time 0
refused "uring" "--uring must be on or off, not 'yes'" --uring yes

# counter-checks: the same options with good values are accepted
timeout -k 2 20 "$STUDY" --dir "$DIR" --dry-run --quick >"$WORK/out" 2>"$WORK/err"
check_eq "--quick --dry-run: exit 0 ($(head -c 200 "$WORK/err"))" 0 $?
check "--quick: 42 cells of 8 s" grep -qx 'quick study: 42 cells of 8 s' "$WORK/out"
check "--quick: the file systems and doublewrite settings" grep -qx \
	'file systems and doublewrite: plain:ON btrfs:ON passthrough:ON passthrough-od:OFF csdfs-lz4:OFF csdfs-zstd1:OFF csdfs-zstd1:ON' "$WORK/out"
check "--quick: workloads and threads" grep -qx 'workloads: ro wo rw; threads: 1 4' "$WORK/out"
timeout -k 2 20 "$STUDY" --dir "$DIR" --dry-run >"$WORK/out" 2>"$WORK/err"
check "full: 108 cells, every file system with doublewrite ON and OFF" grep -qx 'full study: 108 cells of 30 s' "$WORK/out"
timeout -k 2 20 "$STUDY" --dir "$DIR" --dry-run --fs plain,csdfs-zstd1 --workloads wo \
	--threads 2,16 --doublewrite OFF --time 5 --uring off >"$WORK/out" 2>"$WORK/err"
check_eq "good values: exit 0 ($(head -c 200 "$WORK/err"))" 0 $?
check "good values: the cells asked for" grep -qx 'full study: 4 cells of 5 s' "$WORK/out"
check "good values: nothing on stderr" test ! -s "$WORK/err"
check "--dry-run made no work dir" test ! -e "$DIR"
timeout -k 2 20 "$STUDY" --help >"$WORK/out" 2>&1
check_eq "--help: exit 0" 0 $?
check "--help: usage" grep -q '^usage: tools/mysql-study' "$WORK/out"
finish
