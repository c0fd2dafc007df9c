# shellcheck shell=bash
# crash_lib.sh: the crash drivers' shared machinery (t_crash.sh,
# t_mariadb_crash.sh; README.md here). Set T_NAME, then source it: it picks
# the temp dir (tmpfs when it has room), sources lib.sh and defines
#   tool VAR NAME SRC [LIBS...]   a private copy of a built helper, or compile it
#   crash_tools                   after setup: private csdfs binaries, POWERCUT,
#                                 POWERCUT_PRELOAD, PLOG (the undo log dir)
#   start_daemon PRELOAD [OPTS]   mount, under the power-cut recorder if PRELOAD=1
#   run_for MS                    wait, or less if the daemon dies
#   crash [PID...]                kill -9 those, the daemon and WL_PID together
#   power_cut SEED KEEP_PROB      revert un-synced writes after a crash
#   power_point                   the same for a point planned as a power cut
#   keep_evidence WHY             print and keep the evidence of a failure
CRASH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# Every point SIGKILLs two of our background jobs on purpose, and bash would
# announce each death ("line N: PID Killed ..."): drop those notices.
exec 2> >(grep --line-buffered -Ev '^[^ ]+: line [0-9]+: +[0-9]+ Killed ' >&2)

if [ -z "${CRASH_TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ] &&
	[ "$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 }')" -gt $((2 << 20)) ] 2>/dev/null; then
	CRASH_TMPDIR=/dev/shm
fi
[ -n "${CRASH_TMPDIR:-}" ] && export TMPDIR=$CRASH_TMPDIR
# shellcheck source=tests/integration/lib.sh
. "$CRASH_DIR/../integration/lib.sh"

# tool VAR NAME SRC [LIBS...]: a private copy (a rebuild during the run must
# not pull it away) of the built tool named by $VAR, else compile SRC. Runs
# in $(...): messages go to stderr, the exit status says 1 or 77.
tool() {
	local var=$1 name=$2 src=$CRASH_DIR/$3 out
	shift 3
	mkdir -p "$WORK/bin"
	out=${!var:-}
	if [ -n "$out" ] && [ -e "$out" ] && ! [ "$src" -nt "$out" ]; then
		cp "$out" "$WORK/bin/$name" || { log "cannot copy '$out'" >&2; exit 1; }
		printf '%s\n' "$WORK/bin/$name"
		return 0
	fi
	if ! command -v gcc >/dev/null 2>&1; then
		log "SKIP: $name is not built (set $var) and there is no gcc" >&2
		exit 77
	fi
	out=$WORK/bin/$name
	if [ "$name" = powercut_preload.so ]; then
		gcc -O2 -Wall -shared -fPIC -U_FORTIFY_SOURCE -o "$out" "$src" "$@" >&2
	else
		gcc -O2 -Wall -D_FILE_OFFSET_BITS=64 -o "$out" "$src" "$@" >&2
	fi || { log "cannot compile '$src'" >&2; exit 1; }
	printf '%s\n' "$out"
}
# crash_tools: private copies of the binaries under test (other work may
# rebuild build/ during a long run) and of the power-cut pair. Call after setup.
crash_tools() {
	local b
	mkdir -p "$WORK/bin"
	for b in CSDFS_BIN CSDFS_MKFS CSDFS_FSCK; do
		cp "${!b}" "$WORK/bin/" || die "cannot copy ${!b}"
		printf -v "$b" '%s' "$WORK/bin/$(basename "${!b}")"
	done
	POWERCUT=$(tool POWERCUT powercut powercut.c) || exit $?
	POWERCUT_PRELOAD=$(tool POWERCUT_PRELOAD powercut_preload.so powercut_preload.c -ldl -lpthread) || exit $?
	PLOG=$WORK/undo
}

# start_daemon PRELOAD [OPTS...]: csdfs -f on $VOL/$MNT, with the power-cut
# recorder when PRELOAD=1 (fresh undo logs; KEEP_ALL=1 keeps them whole;
# KILL_AT/KILL_FILE: self-kill at that event once armed), and wait for the mount.
# DAEMON_OPTS (an array a driver may set) goes before OPTS on every mount.
start_daemon() {
	local pre=$1 i
	shift
	echo "=== mount $(date +%T.%N) preload=$pre${KILL_AT:+ kill_at=$KILL_AT${KILL_FILE:+ in $KILL_FILE}} $* ===" \
		>>"$WORK/daemon.log"
	if [ "$pre" = 1 ]; then
		rm -rf "$PLOG"
		mkdir -p "$PLOG"
		# A sanitizer build wants its runtime first; the preload only
		# wraps write/sync calls, so let it come first anyway.
		ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
		LD_PRELOAD=$POWERCUT_PRELOAD POWERCUT_LOG=$PLOG POWERCUT_KEEP_ALL=${KEEP_ALL:-0} \
			POWERCUT_KILL_AT=${KILL_AT:-0} POWERCUT_KILL_FILE=${KILL_FILE:-} \
			"$CSDFS_BIN" -f ${DAEMON_OPTS[@]+"${DAEMON_OPTS[@]}"} "$@" "$VOL" "$MNT" >>"$WORK/daemon.log" 2>&1 &
	else
		"$CSDFS_BIN" -f ${DAEMON_OPTS[@]+"${DAEMON_OPTS[@]}"} "$@" "$VOL" "$MNT" >>"$WORK/daemon.log" 2>&1 &
	fi
	DAEMON_PID=$!
	for ((i = 0; i < 500; i++)); do
		if mountpoint -q "$MNT"; then
			timeout 10 stat "$MNT" >/dev/null 2>&1 && return 0
			break
		fi
		pid_alive "$DAEMON_PID" || break
		sleep 0.02
	done
	DAEMON_PID=
	return 1
}

# crash [PID...]: SIGKILL the PIDs (other users of the mount: a server and
# its clients), the daemon and the workload (WL_PID) in one kill (the daemon
# may already be dead), reap them all, detach the dead mount. DAEMON_STATUS:
# how the daemon ended (137 = SIGKILL, ours or its own).
crash() {
	local p
	kill -9 "$@" "$DAEMON_PID" ${WL_PID:+"$WL_PID"} 2>/dev/null
	wait "$DAEMON_PID" 2>/dev/null
	DAEMON_STATUS=$?
	for p in "$@" ${WL_PID:+"$WL_PID"}; do
		{ wait "$p"; } 2>/dev/null
	done
	DAEMON_PID=
	WL_PID=
	detach_dead "$MNT"
}

# run_for MS: wait MS milliseconds, or less if the daemon dies
# await_self_kill: after the load died of the daemon's self-kill, give the
# daemon up to 10 s to be gone (a thread in a host fdatasync finishes it
# before SIGKILL takes it; on a loaded CI disk that took over 2 s). 0 if
# it is gone.
await_self_kill() {
	local i
	for ((i = 0; i < 100; i++)); do
		pid_alive "$DAEMON_PID" || return 0
		sleep 0.1
	done
	return 1
}

run_for() {
	local end=$((${EPOCHREALTIME/./} / 1000 + $1))
	while [ $((${EPOCHREALTIME/./} / 1000)) -lt $end ]; do
		pid_alive "$DAEMON_PID" || return 0
		sleep 0.02
	done
}

# power_cut SEED KEEP_PROB: after a crash, drop un-synced writes from the
# container, data.mdb and the durability record (powercut, output in
# $WORK/powercut.log). Sets PC_PAGES (pages reverted), PC_MDB_PAGES (of
# data.mdb) and PC_SUMMARY ("container 3/10, data.mdb 0/2, ...").
power_cut() {
	"$POWERCUT" --log "$PLOG" --seed "$1" --keep-prob "$2" --keep-log \
		"$VOL/container" "$VOL/meta/data.mdb" "$VOL/meta/synced" \
		>"$WORK/powercut.log" 2>&1 || return 1
	PC_PAGES=$(awk '/dirty pages reverted/ { s += $3 } END { print s + 0 }' "$WORK/powercut.log")
	PC_MDB_PAGES=$(awk '/data.mdb: .* dirty pages reverted/ { print $3 }' "$WORK/powercut.log")
	PC_MDB_PAGES=${PC_MDB_PAGES:-0}
	PC_SUMMARY=$(awk '/dirty pages reverted/ {
		n = split($2, p, "/"); sub(/:$/, "", p[n])
		printf "%s%s %s/%s", sep, p[n], $3, $5; sep = ", " }' "$WORK/powercut.log")
}

# power_point: after the crash of a point whose $mode is power, cut power
# with its $seed and $keep; adds the cut to the run's totals (PC_TOTAL pages
# reverted, PC_CUTS cuts that reverted any, PC_MDB_CUTS any of data.mdb) and
# to the point's description ($what). False when powercut failed.
PC_TOTAL=0
PC_CUTS=0
PC_MDB_CUTS=0
# shellcheck disable=SC2154 # mode, seed and keep: the caller's point
power_point() {
	: >"$WORK/powercut.log"
	[ "$mode" = power ] || return 0
	power_cut "$seed" "$keep" || return 1
	PC_TOTAL=$((PC_TOTAL + PC_PAGES))
	[ "$PC_PAGES" -gt 0 ] && PC_CUTS=$((PC_CUTS + 1))
	[ "$PC_MDB_PAGES" -gt 0 ] && PC_MDB_CUTS=$((PC_MDB_CUTS + 1))
	what+=", pages reverted: $PC_SUMMARY"
	return 0
}

# keep_evidence WHY: print the logs named in EVIDENCE_LOGS (in $WORK) and the
# daemon's; copy the volume, the state file ($STATE: what the workload had
# acknowledged), the undo logs and every log to $CRASH_KEEP_DIR if set
EVIDENCE_LOGS=(powercut.log fsck.log)
keep_evidence() {
	local f
	log "evidence for: $1"
	for f in "${EVIDENCE_LOGS[@]}"; do
		[ -s "$WORK/$f" ] || continue
		log "--- $f"
		head -n 40 "$WORK/$f" | sed 's/^/    | /'
	done
	show_daemon_log
	if [ -n "${CRASH_KEEP_DIR:-}" ]; then
		mkdir -p "$CRASH_KEEP_DIR" &&
			cp -a "$VOL" "$STATE" "$WORK"/*.log "$WORK"/*.err "$CRASH_KEEP_DIR"/ 2>/dev/null
		[ -d "$PLOG" ] && cp -a "$PLOG" "$CRASH_KEEP_DIR"/
		log "volume, state file, undo logs and logs copied to $CRASH_KEEP_DIR"
	fi
}
