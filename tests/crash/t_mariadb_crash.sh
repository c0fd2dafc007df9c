#!/bin/bash
# t_mariadb_crash: csdfs's central promise, end to end: InnoDB with
# innodb_doublewrite=OFF on csdfs loses nothing at a crash (SPEC G2
# durability, G3 atomic 16 KiB writes, G4 consistency; README.md here).
#
# One volume (tmpfs when it has room), one datadir; sysbench's tables are
# prepared once. Each crash: a real mariadbd (innodb_doublewrite=OFF,
# innodb_flush_log_at_trx_commit=1; innodb_flush_method the one
# examples/mysql/my.cnf recommends in crashes 1, 4, 5, 8, 9, ... and
# O_DIRECT_NO_FSYNC in the others, each with both kinds of crash) on a csdfs
# daemon running under powercut_preload.so runs sysbench oltp_write_only
# beside ackinsert, which commits one row per transaction and records each
# id on the host once the server acknowledged its COMMIT. After a random
# (seeded) 1-4 s, mariadbd, its clients and the csdfs daemon die by kill -9
# together; in half the crashes the daemon instead kills itself just before
# its N-th write or sync of a volume file (plan_kill_at) and the rest die
# right after. Every second crash is a power cut (powercut then reverts what
# was not synced in the container, data.mdb and meta/synced). Then:
# csdfs-fsck --verify-data clean, the volume mounts, mariadbd's crash
# recovery answers within a bound, its error log since the restart reports
# no corruption (CORRUPTION_RE below), CHECK TABLE is OK on every table,
# and every acknowledged id is in the table.
#
# Counter-check (MDB_COUNTER, default 3): the same load and crash (a
# self-kill at a write of the container), from a copy of the clean volume,
# on a mount with -o test_torn (the tearing backend: a write lands its first
# 4 KiB at once and the rest later, a flush does not wait), checked the same
# way after a normal remount. At least one iteration must
# report damage (more iterations run, up to MDB_COUNTER_MAX, default 10,
# while none has), else the checks could not see a torn page and the run
# fails.
#
# Environment: MDB_CRASHES (default 10; slow suite 300), MDB_COUNTER(_MAX),
# CRASH_SEED (default random; crash i uses CRASH_SEED + i, counter iteration
# j CRASH_SEED + 100000 + j), MDB_TABLES, MDB_ROWS, MDB_THREADS (sysbench
# shape), CRASH_TMPDIR, CRASH_KEEP_DIR, ACKINSERT POWERCUT POWERCUT_PRELOAD
# (built tools; compiled into the work dir when unset), lib.sh's CSDFS_BIN
# CSDFS_MKFS CSDFS_FSCK and CSDFS_TIME_SCALE.
T_NAME=t_mariadb_crash
# shellcheck source=tests/crash/crash_lib.sh
. "$(dirname "$0")/crash_lib.sh"
# shellcheck source=tests/integration/mariadb_lib.sh
. "$CRASH_DIR/../integration/mariadb_lib.sh"

MDB_CRASHES=${MDB_CRASHES:-10}
MDB_COUNTER=${MDB_COUNTER:-3}
MDB_COUNTER_MAX=${MDB_COUNTER_MAX:-10}
CRASH_SEED=${CRASH_SEED:-$(( (RANDOM << 15 | RANDOM) ))}
MDB_TABLES=${MDB_TABLES:-4}
MDB_ROWS=${MDB_ROWS:-5000}
MDB_THREADS=${MDB_THREADS:-2}
FSCK_OPTS=(--verify-data)
ACKED_TABLE=crash.acked

# What InnoDB (and the server around it) writes when it finds damage. Any of
# these in the log of a restart after a crash fails that crash.
CORRUPTION_RE='\[ERROR\]|\[FATAL\]|Database page corruption|is corrupted|[Cc]orrupt|'
CORRUPTION_RE+='checksum mismatch|registration as a STORAGE ENGINE failed|'
CORRUPTION_RE+='Unknown/unsupported storage engine|is in the future|Failed to read page|'
CORRUPTION_RE+='Missing FILE_CHECKPOINT|marked as crashed|Assertion failure|got signal'

require_csdfs
my_require
require_tools sysbench awk sort comm timeout
[ -n "${ACKINSERT:-}" ] || pkg-config --exists libmariadb 2>/dev/null ||
	skip_test "ackinsert is not built and libmariadb is missing (apt-get install libmariadb-dev)"
setup
crash_tools
# shellcheck disable=SC2046 # pkg-config's words are separate arguments
ACKINSERT=$(tool ACKINSERT ackinsert ackinsert.c \
	$(pkg-config --cflags --libs libmariadb 2>/dev/null || echo -lmariadb)) || exit $?
my_init "$MNT/data"
# Later options win over my_init's. A small buffer pool and redo log, and a
# page cleaner told to keep no dirty page, make InnoDB write its 16 KiB pages
# out (with no doublewrite copy) all through the load, not only its redo: a
# crash then lands among page writes, and the tearing mount of the
# counter-check has pages to tear.
MY_OPTS+=(--innodb-flush-log-at-trx-commit=1 --innodb-buffer-pool-size=32M
	--innodb-log-file-size=8M --innodb-io-capacity=2000
	--innodb-max-dirty-pages-pct=0 --skip-innodb-adaptive-hash-index)
MY_OPTS_BASE=("${MY_OPTS[@]}")
# The flush method we recommend (examples/mysql/my.cnf), and the other one
# csdfs keeps safe: O_DIRECT_NO_FSYNC, where InnoDB never syncs its data
# files and the sync of its redo log must make the pages written before it
# durable (G2 in csdfs(8)).
MY_CNF=$CRASH_DIR/../../examples/mysql/my.cnf
FLUSH_REC=$(sed -n 's/^[[:space:]]*innodb_flush_method[[:space:]]*=[[:space:]]*\([A-Za-z_]*\).*/\1/p' "$MY_CNF")
[ -n "$FLUSH_REC" ] || die "no innodb_flush_method in $MY_CNF"
FLUSH_ALT=O_DIRECT_NO_FSYNC
[ "$FLUSH_REC" != "$FLUSH_ALT" ] || FLUSH_ALT=O_DIRECT
STATE=$WORK/acked.ids	# ids whose COMMIT was acknowledged, on the host
EVIDENCE_LOGS+=(sysbench.log ackinsert.log check.log)
SB_OPTS=(oltp_write_only --db-driver=mysql --mysql-socket="$MY_SOCK" --mysql-user=root
	--mysql-db=sbtest --tables="$MDB_TABLES" --table-size="$MDB_ROWS")
log "seed $CRASH_SEED, $MDB_CRASHES crashes (half power cuts) + $MDB_COUNTER torn-write" \
	"counter-checks; sysbench $MDB_TABLES tables x $MDB_ROWS rows, $MDB_THREADS threads"

# ---------- load, crash, check ----------

# start_load SEED: sysbench and ackinsert in the background, for far longer
# than we let them run (they must still be alive at the crash)
start_load() {
	sysbench "${SB_OPTS[@]}" --threads="$MDB_THREADS" --time=0 --events=0 \
		--rand-seed="$1" --report-interval=1 run >"$WORK/sysbench.log" 2>&1 &
	SB_PID=$!
	"$ACKINSERT" --socket "$MY_SOCK" --table "$ACKED_TABLE" --acked "$STATE" \
		--seconds 3600 --seed "$1" >"$WORK/ackinsert.log" 2>&1 &
	AI_PID=$!
	MY_CLIENTS=("$SB_PID" "$AI_PID")
}

# crash_all: mariadbd, its clients and csdfs die by one kill -9; true when
# the mount is gone and the daemon died of the signal
crash_all() {
	crash ${MY_PID:+"$MY_PID"} "${MY_CLIENTS[@]}" || return 1
	my_forget
	MY_CLIENTS=()
	[ "$DAEMON_STATUS" = 137 ]
}

# load_alive: both clients still running (WHY says which is not)
load_alive() {
	WHY=
	pid_alive "$SB_PID" || WHY+="sysbench exited: $(grep -m 1 -E 'FATAL|error' "$WORK/sysbench.log"); "
	pid_alive "$AI_PID" || WHY+="ackinsert exited: $(tail -n 1 "$WORK/ackinsert.log"); "
	pid_alive "$MY_PID" || WHY+="mariadbd exited; "
	[ -z "$WHY" ]
}

# check_tables: CHECK TABLE ... EXTENDED on every base table; true when each
# ends with status OK and none reports an error. NTABLES: how many.
check_tables() {
	local list
	list=$(sql "SET SESSION group_concat_max_len = 1000000; SELECT GROUP_CONCAT(CONCAT('\`', table_schema, '\`.\`', table_name, '\`'))
		FROM information_schema.tables WHERE table_type = 'BASE TABLE'
		AND table_schema NOT IN ('information_schema', 'performance_schema', 'sys')") || return 1
	NTABLES=$(tr ',' '\n' <<<"$list" | wc -l)
	sql "CHECK TABLE $list EXTENDED" >"$WORK/check.log" 2>&1 || return 1
	awk -F'\t' 'NF < 4 { bad = 1 } $3 == "error" { bad = 1 }
		$3 == "status" { st[$1] = $4 } { seen[$1] = 1 }
		END { for (t in seen) if (st[t] != "OK") bad = 1; exit bad }' "$WORK/check.log"
}

# verify_recovered PRELOAD [MOUNT OPTS]: after a crash, check the volume and
# the server; PROBLEMS lists what is wrong (empty: all well), INFO what was
# seen. Leaves the volume mounted and mariadbd running when it got that far.
verify_recovered() {
	local pre=$1 rc t0 missing acked
	shift
	PROBLEMS=
	INFO=
	timeout -k 5 $((120 * ${CSDFS_TIME_SCALE:-1})) "$CSDFS_FSCK" "${FSCK_OPTS[@]}" "$VOL" \
		>"$WORK/fsck.log" 2>&1
	rc=$?
	[ $rc = 0 ] || PROBLEMS+="csdfs-fsck exited $rc: $(grep -m 1 -v -E '^$|rolled back' "$WORK/fsck.log"); "
	if ! start_daemon "$pre" "$@"; then
		PROBLEMS+="the volume does not mount; "
		return 1
	fi
	t0=${EPOCHREALTIME/./}
	if ! my_try_start "recovery"; then
		PROBLEMS+="crash recovery failed: $MY_WHY: $(my_log_since_start |
			grep -m 1 -E "$CORRUPTION_RE"); "
		return 1
	fi
	INFO+="recovery $(((${EPOCHREALTIME/./} - t0) / 100000))00 ms"
	if my_log_since_start | grep -q -E "$CORRUPTION_RE"; then
		PROBLEMS+="error log: $(my_log_since_start | grep -m 1 -E "$CORRUPTION_RE"); "
	fi
	if check_tables; then
		INFO+=", CHECK TABLE OK on $NTABLES tables"
	else
		PROBLEMS+="CHECK TABLE: $(grep -v -P '\tstatus\tOK$' "$WORK/check.log" | head -n 2 | tr '\t\n' ' |'); "
	fi
	acked=0
	[ -s "$STATE" ] && acked=$(wc -l <"$STATE")
	if sql "SELECT id FROM $ACKED_TABLE" >"$WORK/present.ids" 2>"$WORK/select.log"; then
		missing=$(comm -23 <(sort -u "$STATE") <(sort -u "$WORK/present.ids") | sort -n)
		if [ -n "$missing" ]; then
			PROBLEMS+="$(wc -l <<<"$missing") of $acked acknowledged ids missing:"
			PROBLEMS+=" $(head -n 5 <<<"$missing" | tr '\n' ' '); "
		else
			INFO+=", all $acked acknowledged ids present ($(wc -l <"$WORK/present.ids") rows)"
		fi
	else
		PROBLEMS+="SELECT of the acknowledged ids failed: $(head -n 1 "$WORK/select.log"); "
	fi
	[ -z "$PROBLEMS" ]
}

# plan_kill_at: half the crashes (drawn from RANDOM) let the daemon SIGKILL
# itself just before its N-th write or sync of data.mdb, of the container,
# of the durability record or of any of them (POWERCUT_KILL_AT, counted from
# the arm file): a timer rarely lands inside a group commit, or while
# written data awaits its sync, since InnoDB syncs after every commit.
# Sets KILL_AT and KILL_FILE (empty: the timer alone); start_daemon passes
# them to the daemon that runs the NEXT crash, so draw before mounting.
plan_kill_at() {
	KILL_AT=
	KILL_FILE=
	((RANDOM % 2)) || return 0
	# a slower (sanitizer) build makes fewer calls in the same time
	local scale=${CSDFS_TIME_SCALE:-1}
	case $((RANDOM % 4)) in
	0) KILL_FILE=data.mdb KILL_AT=$((1 + RANDOM % (20000 / scale))) ;;
	1) KILL_FILE=container KILL_AT=$((1 + RANDOM % (30000 / scale))) ;;
	2) KILL_AT=$((1 + RANDOM % (32000 / scale))) ;;
	3) KILL_FILE=synced KILL_AT=$((1 + RANDOM % (5000 / scale))) ;;
	esac
	ms=6000	# the timer is only the fallback
}

# tps: sysbench's last reported rate, for the log ("-" before its first report)
tps() {
	local t
	t=$(sed -n 's/.* tps: \([0-9.]*\) .*/\1/p' "$WORK/sysbench.log" | tail -n 1)
	printf '%s\n' "${t:--}"
}

# ---------- the datadir, prepared once ----------

mkfs_vol --size 1G
start_daemon 0 || die "first mount failed"
my_install_db || exit 1
my_start "first start" || exit 1
sql "CREATE DATABASE sbtest; CREATE DATABASE crash;
	CREATE TABLE $ACKED_TABLE (id BIGINT PRIMARY KEY, pad VARCHAR(255) NOT NULL,
	                           h CHAR(32) NOT NULL, r VARBINARY(2048) NOT NULL) ENGINE=InnoDB" >"$WORK/schema.log" 2>&1 ||
	die "schema: $(head -n 3 "$WORK/schema.log")"
if bounded 600 sysbench "${SB_OPTS[@]}" --threads=1 prepare >"$WORK/prepare.log" 2>&1; then
	pass "sysbench prepare ($MDB_TABLES tables x $MDB_ROWS rows)"
else
	fail "sysbench prepare: $(grep -m 1 -E 'FATAL|error' "$WORK/prepare.log")"
	exit 1
fi
my_stop || die "clean shutdown after prepare failed"
umount_vol || exit 1
# the counter-check starts from this state, not from what the crashes left
cp -a --sparse=always "$VOL" "$WORK/vol_clean" || die "cannot copy the clean volume"

# ---------- crashes ----------

# plan_crash N: crash N's parameters, from its seed (drawn before the mount
# that crash runs on: the daemon takes KILL_AT and KILL_FILE at its start)
plan_crash() {
	seed=$((CRASH_SEED + $1))
	RANDOM=$seed
	mode=kill
	(($1 % 2)) || mode=power
	ms=$((1000 + RANDOM % 3001))
	keep=$(echo "0.0 0.3 0.5 0.8" | cut -d' ' -f$((RANDOM % 4 + 1)))
	plan_kill_at
	# the mariadbd that recovers from crash N-1 runs crash N's load
	flush=$FLUSH_ALT
	(($1 / 2 % 2)) || flush=$FLUSH_REC
	MY_OPTS=("${MY_OPTS_BASE[@]}" --innodb-flush-method="$flush")
}

plan_crash 1
start_daemon 1 || die "mount under the power-cut recorder failed"
my_start "before the first crash" || exit 1
ok_kill=0
ok_power=0
self_kills=0
for ((i = 1; i <= MDB_CRASHES; i++)); do
	BG_PIDS=()	# all reaped: a long run must not signal reused pids at exit
	what="crash $i/$MDB_CRASHES: $mode"
	if [ -n "$KILL_AT" ]; then
		what+=" at event $KILL_AT${KILL_FILE:+ of $KILL_FILE}"
	else
		what+=" after $ms ms"
	fi
	what+=", seed $seed, $flush"
	[ $mode = power ] && what+=", keep $keep"
	acked_before=0
	[ -s "$STATE" ] && acked_before=$(wc -l <"$STATE")

	start_load "$seed"
	touch "$PLOG/arm"	# a self-kill counts events from here
	run_for "$ms"
	died=
	if ! load_alive; then
		# The clients see the daemon's self-kill first, and the daemon
		# may still be on its way out.
		[ -n "$KILL_AT" ] && await_self_kill || died=$WHY
	elif ! pid_alive "$DAEMON_PID" && [ -z "$KILL_AT" ]; then
		died="csdfs exited"
	fi
	if [ -n "$died" ]; then
		crash_all
		fail "$what: the load or the daemon died before the crash: $died (daemon status $DAEMON_STATUS)"
		keep_evidence "died before the crash"
		break
	fi
	if [ -n "$KILL_AT" ]; then
		if pid_alive "$DAEMON_PID"; then
			what+=" (not reached: timer after $ms ms)"
		else
			self_kills=$((self_kills + 1))
		fi
	fi
	what+=", sysbench $(tps) tps"
	if ! crash_all; then
		fail "$what: the crash went wrong (daemon status $DAEMON_STATUS, or still mounted)"
		keep_evidence "crash"
		break
	fi
	if ! power_point; then
		fail "$what: powercut failed"
		keep_evidence "powercut failed"
		break
	fi
	what+=", $(($(wc -l <"$STATE") - acked_before)) commits acknowledged"
	this_mode=$mode
	plan_crash $((i + 1))
	if ! verify_recovered 1; then
		fail "$what: $PROBLEMS"
		log "$INFO"
		show_my_err
		keep_evidence "check after the crash"
		break
	fi
	pass "$what; $INFO"
	if [ "$this_mode" = power ]; then ok_power=$((ok_power + 1)); else ok_kill=$((ok_kill + 1)); fi
done
if [ "$N_FAIL" = 0 ]; then
	if my_stop; then pass "clean shutdown of mariadbd after the crashes"
	else fail "clean shutdown of mariadbd after the crashes"; show_my_err; fi
	umount_vol && pass "clean unmount after the crashes"
	if timeout -k 5 $((120 * ${CSDFS_TIME_SCALE:-1})) "$CSDFS_FSCK" "${FSCK_OPTS[@]}" "$VOL" \
		>"$WORK/fsck.log" 2>&1; then
		pass "csdfs-fsck after the final clean unmount"
	else
		fail "csdfs-fsck after the final clean unmount: $(head -n 5 "$WORK/fsck.log")"
	fi
fi
KILL_AT=
KILL_FILE=
log "crashes survived: $ok_kill kill -9, $ok_power power cuts ($self_kills of all crashes at a" \
	"chosen write/sync; $PC_TOTAL un-synced pages reverted in all, in $PC_CUTS cuts);" \
	"$(wc -l <"$STATE" 2>/dev/null || echo 0) acknowledged commits checked"

# ---------- counter-check: torn pages must be noticed ----------

if [ "$N_FAIL" = 0 ] && [ "$MDB_COUNTER" -gt 0 ]; then
	[ -n "$DAEMON_PID" ] && crash_all
	VOL=$WORK/vol_torn
	torn_seen=0
	MY_OPTS=("${MY_OPTS_BASE[@]}" --innodb-flush-method="$FLUSH_REC")
	# MDB_COUNTER iterations, and more (up to MDB_COUNTER_MAX) while none
	# has reported damage: a crash may land while the queue holds no tail
	for ((j = 1; j <= MDB_COUNTER || (torn_seen == 0 && j <= MDB_COUNTER_MAX); j++)); do
		BG_PIDS=()
		seed=$((CRASH_SEED + 100000 + j))
		RANDOM=$seed
		# The daemon kills itself just before its N-th write of the
		# container, so the crash lands while the tearing backend still
		# holds the tails of earlier writes (a timer often finds its
		# queue empty, the more so in a slow sanitizer build).
		KILL_FILE=container
		KILL_AT=$((500 + RANDOM % (6000 / ${CSDFS_TIME_SCALE:-1})))
		ms=8000	# the fallback
		what="counter $j (test_torn, kill at event $KILL_AT of the container, seed $seed, $FLUSH_REC)"
		rm -rf "$VOL" "$STATE"
		cp -a --sparse=always "$WORK/vol_clean" "$VOL" || die "cannot copy the clean volume"
		if ! start_daemon 1 -o test_torn; then
			fail "$what: mount -o test_torn failed"
			break
		fi
		KILL_AT=
		KILL_FILE=
		if ! my_try_start "counter $j, test_torn"; then
			fail "$what: mariadbd does not start on the tearing mount: $MY_WHY"
			show_my_err
			break
		fi
		start_load "$seed"
		touch "$PLOG/arm"
		run_for "$ms"
		pid_alive "$DAEMON_PID" && what+=" (not reached: timer after $ms ms)"
		what+=", sysbench $(tps) tps"
		crash_all || { fail "$what: the crash went wrong"; break; }
		# checked on a normal mount: the tear is on disk, not in the backend
		if verify_recovered 0; then
			log "$what: NOT NOTICED; $INFO"
		else
			torn_seen=$((torn_seen + 1))
			log "$what: noticed: $PROBLEMS"
		fi
		# whatever state the damage left: no clean shutdown needed
		[ -n "$DAEMON_PID" ] && crash_all
	done
	counter_runs=$((j - 1))
	if [ "$N_FAIL" = 0 ]; then
		if [ $torn_seen -gt 0 ]; then
			pass "counter-check: damage reported after $torn_seen of $counter_runs torn-write crashes"
		else
			fail "counter-check: no damage reported in $counter_runs torn-write crashes: the checks cannot see torn pages"
		fi
	fi
fi
log "counter-check iterations that reported corruption: ${torn_seen:-0} of ${counter_runs:-0}"

finish
