#!/bin/bash
# t_crash: crash consistency at random points (SPEC G2 durability, G3 atomic
# 16 KiB writes, G4 consistency; README.md in this directory explains it).
#
# One volume; each crash point: pagecheck (4 threads) overwrites random
# 16 KiB pages, single raw ones or runs of up to 4 compressible ones, with
# fsyncs in between, while a churn thread creates, truncates, punches,
# renames and unlinks files beside them. Then the daemon, run under
# powercut_preload.so, dies by SIGKILL: after a random 0.2-1.5 s, or by its
# own hand just before its N-th write/sync of data.mdb, of the container or
# of either (that lands inside group commits). Half the points stop there
# (process crash: every write the daemon made stays); the other half also
# run powercut on the container and data.mdb (power cut: every write not yet
# made durable is dropped or kept, page by page, in a random combination).
# Then: csdfs-fsck --verify-data must be clean, the volume must mount, and
# pagecheck verify must find no torn page, no lost acknowledged page and
# nothing unreadable.
#
# Counter-checks, proving each half of the harness has teeth:
# - COUNTER_POINTS (default 20): a second volume mounted with -o test_torn
#   (its container I/O through the tearing backend: a write lands 4 KiB at
#   once and the rest later, and a flush does not wait for the rest) is
#   crashed with kill -9; pagecheck MUST see damage there (torn pages, or
#   pages csdfs refuses to return because their checksum no longer matches)
#   at least once.
# - LIAR_POINTS (default 3): a power cut by a disk that ignores flushes
#   (powercut --ignore-sync on the container, undo logs never truncated):
#   fsck, mount or verify MUST notice at least once.
#
# Every mount compacts in the background at CRASH_COMPACT_DEAD percent of dead
# space (default 1: as often as the daemon allows), so crash points land
# inside compaction passes too; user.csdfs.compact_chunks, read before each
# workload and after each remount, counts the points whose compaction moved
# chunks that survived the crash (at least one must).
#
# Environment: CRASH_POINTS (default 100; the slow suite 2000), COUNTER_POINTS,
# LIAR_POINTS, CRASH_SEED (default random; every point prints its own seed),
# CRASH_FILES, CRASH_PAGES, CRASH_THREADS, CRASH_TMPDIR (default /dev/shm
# when usable: the simulation needs no real disk and tmpfs fsyncs are free),
# CRASH_KEEP_DIR (on a failure, copy the volume, undo logs and logs there),
# PAGECHECK POWERCUT POWERCUT_PRELOAD (built tools; compiled from source into
# the work dir when unset), plus lib.sh's CSDFS_BIN CSDFS_MKFS CSDFS_FSCK.
T_NAME=t_crash
# shellcheck source=tests/crash/crash_lib.sh
. "$(dirname "$0")/crash_lib.sh"

CRASH_POINTS=${CRASH_POINTS:-100}
COUNTER_POINTS=${COUNTER_POINTS:-20}
LIAR_POINTS=${LIAR_POINTS:-3}
CRASH_SEED=${CRASH_SEED:-$(( (RANDOM << 15 | RANDOM) ))}
CRASH_FILES=${CRASH_FILES:-4}
CRASH_PAGES=${CRASH_PAGES:-64}
CRASH_THREADS=${CRASH_THREADS:-4}
CRASH_COMPACT_DEAD=${CRASH_COMPACT_DEAD:-1}
DAEMON_OPTS=(-o compact_dead="$CRASH_COMPACT_DEAD")   # every start_daemon
FSCK_OPTS=(--verify-data)

require_csdfs
require_tools awk timeout
setup
crash_tools
PAGECHECK=$(tool PAGECHECK pagecheck pagecheck.c -lpthread) || exit $?

STATE=$WORK/pagecheck.state
EVIDENCE_LOGS+=(verify.log workload.log)
WL_PID=
log "seed $CRASH_SEED, $CRASH_POINTS crash points + $COUNTER_POINTS in-place + $LIAR_POINTS lying-disk counter-checks," \
	"$CRASH_FILES files x $CRASH_PAGES pages x $CRASH_THREADS threads, fsck ${FSCK_OPTS[*]}"

# start_workload SEED SYNC_EVERY FILES PAGES [OPTIONS...]: pagecheck write in
# the background (for far longer than we let it run: it must still be alive
# at the crash)
start_workload() {
	"$PAGECHECK" write --dir "$MNT" --state "$STATE" --seconds 600 --seed "$1" \
		--sync-every "$2" --files "$3" --pages "$4" --threads "$CRASH_THREADS" \
		"${@:5}" >"$WORK/workload.log" 2>&1 &
	WL_PID=$!
	BG_PIDS+=("$WL_PID")
}

# plan_point N: draw point N's parameters from its seed. The self-kill event
# is chosen here because the daemon that will run point N is started (and
# verifies point N-1) before point N begins.
plan_point() {
	seed=$((CRASH_SEED + $1))
	RANDOM=$seed
	mode=kill
	((RANDOM % 2)) && mode=power
	ms=$((200 + RANDOM % 1301))
	sync_every=$((2 << (RANDOM % 4 * 2)))	# 2, 8, 32 or 128
	keep=$(echo "0.0 0.3 0.5 0.8" | cut -d' ' -f$((RANDOM % 4 + 1)))
	# raw single-page writes, or runs of up to 4 pages of 2:1 data that
	# csdfs packs into shared extents
	shape=()
	((RANDOM % 2)) && shape=(--multi 4 --compress)
	# a quarter of the points: half the files O_DSYNC, each write acked
	((RANDOM % 4)) || shape+=(--dsync)
	KILL_AT=
	KILL_FILE=
	if ((RANDOM % 2)); then
		# crash at the Nth write/sync (of one file, or of both)
		case $((RANDOM % 4)) in
		0) KILL_FILE=data.mdb KILL_AT=$((1 + RANDOM % 300)) ;;
		1) KILL_FILE=container KILL_AT=$((1 + RANDOM % 1500)) ;;
		2) KILL_AT=$((1 + RANDOM % 2000)) ;;
		3) KILL_FILE=synced KILL_AT=$((1 + RANDOM % 100)) ;;
		esac
		ms=1500	# the timer is only the fallback
	fi
}

# chunks compaction has moved on the mounted volume (durably, after a crash)
compacted() {
	getfattr --only-values -n user.csdfs.compact_chunks "$MNT" 2>/dev/null || echo 0
}

# ---------- crash points ----------

mkfs_vol --size 256M
plan_point 1
start_daemon 1 || die "first mount failed"
ok_kill=0
ok_power=0
self_kills=0
compact_points=0
compact_before=$(compacted)
for ((pt = 1; pt <= CRASH_POINTS; pt++)); do
	what="point $pt/$CRASH_POINTS: $mode"
	if [ -n "$KILL_AT" ]; then
		what+=" at event $KILL_AT${KILL_FILE:+ of $KILL_FILE}"
	else
		what+=" after ${ms} ms"
	fi
	what+=", sync every $sync_every, ${shape[*]:-single raw pages}, seed $seed"
	[ $mode = power ] && what+=", keep $keep"

	touch "$PLOG/arm"
	start_workload "$seed" "$sync_every" "$CRASH_FILES" "$CRASH_PAGES" "${shape[@]}" --churn
	run_for "$ms"
	# A daemon that kills itself at its event just as the timer ends is
	# still being torn down here, and its workload then dies of the
	# aborted requests: give it a moment to be gone. The workload is
	# looked at once, before the daemon: looked at after, it may have died
	# of a self-kill that came between the two looks.
	wl_dead=0
	pid_alive "$WL_PID" || wl_dead=1
	[ -n "$KILL_AT" ] && [ $wl_dead = 1 ] && await_self_kill
	if pid_alive "$DAEMON_PID"; then
		[ -n "$KILL_AT" ] && what+=" (not reached: timer after ${ms} ms)"
		if [ $wl_dead = 1 ]; then
			wait "$WL_PID"
			fail "$what: the workload died before the crash (exit $?)"
			WL_PID=
			keep_evidence "workload died"
			break
		fi
	elif [ -n "$KILL_AT" ]; then
		self_kills=$((self_kills + 1))
	fi
	if ! crash; then
		fail "$what: $MNT still mounted after the crash"
		break
	fi
	if [ "$DAEMON_STATUS" != 137 ]; then
		fail "$what: the daemon died on its own with status $DAEMON_STATUS"
		keep_evidence "daemon died"
		break
	fi
	if ! power_point; then
		fail "$what: powercut failed"
		keep_evidence "powercut failed"
		break
	fi
	timeout -k 5 120 "$CSDFS_FSCK" "${FSCK_OPTS[@]}" "$VOL" >"$WORK/fsck.log" 2>&1
	rc=$?
	if [ $rc != 0 ]; then
		fail "$what: csdfs-fsck exited $rc"
		keep_evidence "fsck not clean"
		break
	fi
	this="$what"
	plan_point $((pt + 1))
	if ! start_daemon 1; then
		fail "$this: the volume does not mount after the crash"
		keep_evidence "mount failed"
		break
	fi
	timeout -k 5 120 "$PAGECHECK" verify --dir "$MNT" --state "$STATE" >"$WORK/verify.log" 2>&1
	rc=$?
	if [ $rc != 0 ]; then
		fail "$this: pagecheck verify exited $rc: $(tail -n 1 "$WORK/verify.log")"
		keep_evidence "verify failed"
		break
	fi
	compact_now=$(compacted)
	if [ "$compact_now" -gt "$compact_before" ]; then
		compact_points=$((compact_points + 1))
		this+=", compaction moved $((compact_now - compact_before)) chunks"
	fi
	compact_before=$compact_now
	pass "$this; $(sed -n 's/^pagecheck: verify: //p' "$WORK/verify.log")"
	if [[ $this == *": power"* ]]; then ok_power=$((ok_power + 1)); else ok_kill=$((ok_kill + 1)); fi
done
KILL_AT=
KILL_FILE=
if [ -n "$DAEMON_PID" ] && [ $N_FAIL = 0 ]; then
	umount_vol || fail "clean unmount after the crash points"
	timeout -k 5 120 "$CSDFS_FSCK" "${FSCK_OPTS[@]}" "$VOL" >"$WORK/fsck.log" 2>&1 ||
		fail "csdfs-fsck after the final clean unmount: $(head -n 5 "$WORK/fsck.log")"
fi
log "crash points: $ok_kill process crashes and $ok_power power cuts survived" \
	"($self_kills of them at a chosen write/sync); $PC_TOTAL un-synced pages reverted" \
	"in all, data.mdb pages in $PC_MDB_CUTS cuts; compaction moved chunks in $compact_points"
if [ $N_FAIL = 0 ] && [ "$CRASH_COMPACT_DEAD" != 0 ] && [ "$CRASH_POINTS" -ge 20 ]; then
	if [ $compact_points -gt 0 ]; then
		pass "compaction ran (and its moves survived) in $compact_points of $CRASH_POINTS crash points"
	else
		fail "compaction never moved a chunk in $CRASH_POINTS crash points (compact_dead=$CRASH_COMPACT_DEAD)"
	fi
fi

# ---------- counter-check: torn writes must be seen ----------

if [ $N_FAIL = 0 ] && [ "$COUNTER_POINTS" -gt 0 ]; then
	[ -n "$DAEMON_PID" ] && crash
	VOL=$WORK/vol_torn
	STATE=$WORK/torn.state
	mkfs_vol --size 256M
	torn_points=0
	for ((pt = 1; pt <= COUNTER_POINTS; pt++)); do
		seed=$((CRASH_SEED + 100000 + pt))
		RANDOM=$seed
		ms=$((300 + RANDOM % 700))
		if ! start_daemon 0 -o test_torn; then
			fail "counter point $pt: mount -o test_torn failed"
			break
		fi
		# every point starts from fresh files: tearing seen is this point's
		rm -f "$MNT"/pc.* "$STATE"
		start_workload "$seed" 16 2 16
		sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
		if ! pid_alive "$WL_PID"; then
			fail "counter point $pt: the workload died before the crash"
			keep_evidence "workload died"
			break
		fi
		crash || { fail "counter point $pt: still mounted after the crash"; break; }
		# Verified by a plain mount: the tear is on disk, not in the backend.
		if ! start_daemon 0; then
			fail "counter point $pt: remount after the torn crash failed"
			break
		fi
		"$PAGECHECK" verify --dir "$MNT" --state "$STATE" --max-report 3 >"$WORK/verify.log" 2>&1
		torn=$(sed -n 's/.* torn \([0-9]*\) .*/\1/p' "$WORK/verify.log")
		ioerr=$(sed -n 's/.* ioerr \([0-9]*\).*/\1/p' "$WORK/verify.log")
		lost=$(sed -n 's/.* lost \([0-9]*\) .*/\1/p' "$WORK/verify.log")
		# Torn chunks a journal segment maps make the open drop that
		# segment and the ones after it: the damage then shows as
		# acknowledged pages lost rather than torn.
		torn=$(( ${torn:-0} + ${ioerr:-0} + ${lost:-0} ))
		log "counter point $pt (kill after ${ms} ms, seed $seed):" \
			"$(sed -n 's/^pagecheck: verify: //p' "$WORK/verify.log")"
		if [ "${torn:-0}" -gt 0 ]; then
			torn_points=$((torn_points + 1))
			[ $torn_points = 1 ] && grep -m 1 -E 'TORN|IOERR|EIO|LOST' "$WORK/verify.log" | sed 's/^/    /'
		fi
		umount_vol || break
	done
	if [ $torn_points -gt 0 ]; then
		pass "counter-check: pagecheck saw torn, unreadable or lost pages after $torn_points of $COUNTER_POINTS torn-write crashes"
	else
		fail "counter-check: no damage seen in $COUNTER_POINTS torn-write crashes: the checker cannot see tearing"
	fi
fi

# ---------- counter-check: a disk that ignores flushes must be noticed ----------

if [ $N_FAIL = 0 ] && [ "$LIAR_POINTS" -gt 0 ]; then
	[ -n "$DAEMON_PID" ] && crash
	VOL=$WORK/vol_liar
	STATE=$WORK/liar.state
	caught=0
	for ((pt = 1; pt <= LIAR_POINTS; pt++)); do
		seed=$((CRASH_SEED + 200000 + pt))
		rm -f "$STATE"
		"$CSDFS_MKFS" --force --size 256M "$VOL" >"$WORK/mkfs.log" 2>&1 ||
			die "mkfs for the lying-disk check: $(head -n 3 "$WORK/mkfs.log")"
		KEEP_ALL=1 start_daemon 1 || die "lying-disk point $pt: mount failed"
		start_workload "$seed" 8 "$CRASH_FILES" "$CRASH_PAGES"
		sleep 0.6
		pid_alive "$WL_PID" || die "lying-disk point $pt: the workload died before the crash"
		crash || die "lying-disk point $pt: still mounted after the crash"
		{
			"$POWERCUT" --log "$PLOG" --seed "$seed" --ignore-sync "$VOL/container" &&
				"$POWERCUT" --log "$PLOG" --seed "$seed" "$VOL/meta/data.mdb" \
					"$VOL/meta/synced"
		} >"$WORK/powercut.log" 2>&1 || die "lying-disk point $pt: powercut failed"
		how=
		timeout -k 5 120 "$CSDFS_FSCK" "${FSCK_OPTS[@]}" "$VOL" >"$WORK/fsck.log" 2>&1 ||
			how+=" fsck exit $?;"
		if start_daemon 0; then
			timeout -k 5 120 "$PAGECHECK" verify --dir "$MNT" --state "$STATE" \
				--max-report 0 >"$WORK/verify.log" 2>&1 ||
				how+=" verify: $(sed -n 's/^pagecheck: verify: //p' "$WORK/verify.log");"
			umount_vol >/dev/null || crash
		else
			how+=" no mount;"
		fi
		log "lying-disk point $pt (seed $seed): ${how:- NOT NOTICED}"
		[ -n "$how" ] && caught=$((caught + 1))
	done
	if [ $caught -gt 0 ]; then
		pass "lying-disk check: $caught of $LIAR_POINTS power cuts that dropped flushed writes were noticed"
	else
		fail "lying-disk check: none of $LIAR_POINTS power cuts that dropped flushed writes was noticed"
	fi
fi

finish
