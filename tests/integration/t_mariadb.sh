#!/usr/bin/env bash
# t_mariadb: a real MariaDB (Debian's mariadb-server) on a csdfs datadir, run
# the way the database engineers will run it: O_DIRECT and no doublewrite
# buffer (csdfs's atomic 16 KiB writes make that safe, G3).
#
#   1. mkfs + mount a 2 GiB volume; mariadb-install-db into $MNT/data
#   2. start mariadbd (private socket, no networking), load 100 000 rows with
#      the SEQUENCE engine, record COUNT(*), CHECKSUM TABLE and a SUM
#   3. slow clean shutdown (everything flushed into the tablespaces), unmount
#      and remount csdfs, start again: the numbers must be unchanged
#   4. a committed UPDATE, then kill -9 mariadbd: InnoDB crash recovery on
#      csdfs must bring the update back and CHECK TABLE must pass
#   5. clean shutdown, unmount (the daemon exits 0), csdfs-fsck is clean
#
# The cleanup trap always stops mariadbd (mariadb-admin shutdown, then kill)
# BEFORE lib.sh unmounts, so a failed check never leaves a server holding the
# mount. Skips (77) without mariadbd/mariadb-install-db or /dev/fuse.
# CSDFS_TEST_PLAIN=1 runs the same on a plain directory.

# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROWS=100000

# ---------- requirements ----------

# mariadbd lives in /usr/sbin, which an unprivileged PATH may lack.
find_prog() {
	local p
	p=$(command -v "$1" 2>/dev/null) && { printf '%s\n' "$p"; return 0; }
	for p in /usr/sbin/"$1" /usr/local/sbin/"$1" /usr/libexec/"$1"; do
		[ -x "$p" ] && { printf '%s\n' "$p"; return 0; }
	done
	return 1
}

MARIADBD=$(find_prog mariadbd) || skip_test "mariadbd is not installed (apt-get install mariadb-server)"
INSTALL_DB=$(find_prog mariadb-install-db) || skip_test "mariadb-install-db is not installed"
require_tools mariadb mariadb-admin timeout
require_csdfs

setup

# ---------- mariadbd control ----------

MY_PID=
MY_USER=$(id -un)
MY_SOCK=$WORK/my.sock
MY_SOCKDIR=
# A unix socket path must fit in sun_path (108 bytes).
if [ "${#MY_SOCK}" -gt 100 ]; then
	MY_SOCKDIR=$(mktemp -d /tmp/t_my.XXXXXX) || die "mktemp failed"
	MY_SOCK=$MY_SOCKDIR/my.sock
fi
MY_ERR=$WORK/mariadbd.err
MY_TMP=$WORK/mytmp
mkdir -p "$MY_TMP"

# Options shared by mariadb-install-db and mariadbd; --no-defaults keeps the
# host's /etc/mysql out of the test.
MY_OPTS=(--user="$MY_USER" --datadir="$MNT/data" --tmpdir="$MY_TMP"
	--innodb-flush-method=O_DIRECT --innodb-doublewrite=0
	--innodb-page-size=16k --innodb-buffer-pool-size=64M
	--innodb-log-file-size=32M)

client_opts=(--no-defaults --user=root --socket="$MY_SOCK")

# sql STATEMENTS: run them, print results tab-separated without headers
sql() {
	bounded 300 mariadb "${client_opts[@]}" --batch --skip-column-names -e "$1"
}

ping_ok() {
	timeout 10 mariadb-admin "${client_opts[@]}" --connect-timeout=2 ping >/dev/null 2>&1
}

show_my_err() {
	[ -s "$MY_ERR" ] || return 0
	log "last lines of the mariadbd error log:"
	tail -n 25 "$MY_ERR" | sed 's/^/    mariadbd| /'
}

# my_start LABEL: start mariadbd in the background, wait (120 s) for a ping
my_start() {
	local i rc
	echo "=== start $(date +%T) ($1) ===" >>"$MY_ERR"
	"$MARIADBD" --no-defaults "${MY_OPTS[@]}" --socket="$MY_SOCK" \
		--skip-networking --pid-file="$WORK/mariadbd.pid" \
		--log-error="$MY_ERR" >>"$WORK/mariadbd.out" 2>&1 &
	MY_PID=$!
	EXTRA_DAEMONS+=("$MY_PID")
	for ((i = 0; i < 240; i++)); do
		if ping_ok; then
			pass "mariadbd answers ping ($1)"
			return 0
		fi
		if ! pid_alive "$MY_PID"; then
			wait "$MY_PID" 2>/dev/null
			rc=$?
			MY_PID=
			fail "mariadbd exited with status $rc before answering ($1)"
			show_my_err
			return 1
		fi
		sleep 0.5
	done
	fail "mariadbd did not answer ping within 120 s ($1)"
	show_my_err
	return 1
}

# my_stop: clean shutdown; returns mariadbd's exit status (1 if it had to be killed)
my_stop() {
	local i rc
	[ -n "$MY_PID" ] || return 0
	bounded 180 mariadb-admin "${client_opts[@]}" shutdown >/dev/null 2>&1
	for ((i = 0; i < 240; i++)); do
		pid_alive "$MY_PID" || break
		sleep 0.5
	done
	if pid_alive "$MY_PID"; then
		log "mariadbd still running 120 s after shutdown; killing it"
		kill -9 "$MY_PID" 2>/dev/null
		{ wait "$MY_PID"; } 2>/dev/null
		MY_PID=
		return 1
	fi
	wait "$MY_PID" 2>/dev/null
	rc=$?
	MY_PID=
	return "$rc"
}

# my_kill9: crash the server (not csdfs)
my_kill9() {
	[ -n "$MY_PID" ] || return 1
	kill -9 "$MY_PID" 2>/dev/null
	{ wait "$MY_PID"; } 2>/dev/null
	MY_PID=
	rm -f "$MY_SOCK"
}

# The server must be gone before lib.sh's cleanup unmounts: stop it, then
# hand over to cleanup with the original exit status.
# shellcheck disable=SC2317 # invoked by the trap
t_cleanup() {
	local rc=$? i
	trap - EXIT
	if [ -n "$MY_PID" ] && pid_alive "$MY_PID"; then
		timeout 60 mariadb-admin "${client_opts[@]}" shutdown >/dev/null 2>&1
		for ((i = 0; i < 60; i++)); do
			pid_alive "$MY_PID" || break
			sleep 0.5
		done
		pid_alive "$MY_PID" && kill -9 "$MY_PID" 2>/dev/null
		{ wait "$MY_PID"; } 2>/dev/null
		MY_PID=
	fi
	[ -n "$MY_SOCKDIR" ] && rm -rf "$MY_SOCKDIR"
	(exit "$rc")
	cleanup
}
trap t_cleanup EXIT

# table_state: "count checksum sum(n)" of the test table
table_state() {
	local c k s
	c=$(sql "SELECT COUNT(*) FROM t.r") || return 1
	k=$(sql "CHECKSUM TABLE t.r EXTENDED" | cut -f2) || return 1
	s=$(sql "SELECT SUM(n) FROM t.r") || return 1
	printf '%s %s %s\n' "$c" "$k" "$s"
}

# ---------- 1. volume and datadir ----------

mkfs_vol --size 2G
mount_vol || exit 1

if bounded 300 "$INSTALL_DB" --no-defaults "${MY_OPTS[@]}" \
	--auth-root-authentication-method=normal --skip-test-db \
	>"$WORK/install-db.log" 2>&1; then
	pass "mariadb-install-db on $([ "$PLAIN" = 1 ] && echo plain dir || echo csdfs)"
else
	fail "mariadb-install-db (exit $?): $(tail -n 5 "$WORK/install-db.log" | tr '\n' '|')"
	exit 1
fi

# ---------- 2. load ----------

my_start "first start" || exit 1

# A compressible schema (the Percona study pads rows with repetitive
# VARCHARs), plus an incompressible column.
if sql "CREATE DATABASE t;
	CREATE TABLE t.r (id INT PRIMARY KEY, pad VARCHAR(200) NOT NULL,
	                  h CHAR(32) NOT NULL, n BIGINT NOT NULL) ENGINE=InnoDB;
	INSERT INTO t.r
	  SELECT seq, REPEAT(CHAR(65 + seq % 26), 20 + seq % 120), MD5(seq), seq * 7
	  FROM t.seq_1_to_$ROWS;" >"$WORK/load.log" 2>&1; then
	pass "load $ROWS rows"
else
	fail "load $ROWS rows: $(head -c 400 "$WORK/load.log")"
	show_my_err
	exit 1
fi

before=$(table_state) || before=
read -r count checksum sum <<<"$before"
check_eq "row count after load" "$ROWS" "${count:-}"
case ${checksum:-} in
'' | NULL | 0) fail "CHECKSUM TABLE gave '${checksum:-}'" ;;
*) pass "CHECKSUM TABLE = $checksum" ;;
esac
log "before remount: count=$count checksum=$checksum sum=$sum"

# Slow shutdown: every page is written to its tablespace, not left in redo,
# so the restart really reads the data back from csdfs.
sql "SET GLOBAL innodb_fast_shutdown = 0" >/dev/null
if my_stop; then
	pass "clean shutdown (innodb_fast_shutdown=0)"
else
	fail "clean shutdown: mariadbd exited non-zero"
	show_my_err
fi

# ---------- 3. remount, restart, compare ----------

if [ "$PLAIN" = 1 ]; then
	skip_check "unmount + remount csdfs (plain mode)"
else
	# shellcheck disable=SC2119 # remount with the default options
	remount || exit 1
	pass "unmount + remount csdfs"
fi

my_start "after remount" || exit 1
after=$(table_state) || after=
check_eq "count, checksum and sum unchanged across remount" "$before" "$after"

out=$(sql "CHECK TABLE t.r EXTENDED" | cut -f4 | tail -n 1)
check_eq "CHECK TABLE after remount" "OK" "$out"

# Physical footprint of the datadir: csdfs must save space on it.
logical=$(du -s --block-size=1 --apparent-size "$MNT/data" | cut -f1)
physical=$(du -s --block-size=1 "$MNT/data" | cut -f1)
log "datadir: logical $logical bytes, physical $physical bytes"
if [ "$PLAIN" = 1 ]; then
	skip_check "datadir compresses (plain mode)"
elif [ "$physical" -lt "$logical" ]; then
	pass "datadir compresses (physical $physical < logical $logical)"
else
	fail "datadir does not compress: physical $physical >= logical $logical"
fi

# ---------- 4. crash mariadbd (not csdfs), recover ----------

if sql "UPDATE t.r SET n = n + 1 WHERE id <= 1000" >"$WORK/update.log" 2>&1; then
	pass "committed update"
else
	fail "committed update: $(head -c 300 "$WORK/update.log")"
fi
expect_sum=$(sql "SELECT SUM(n) FROM t.r")
my_kill9
my_start "after kill -9 of mariadbd" || exit 1
got_sum=$(sql "SELECT SUM(n) FROM t.r")
check_eq "committed update survives mariadbd crash" "$expect_sum" "$got_sum"
out=$(sql "CHECK TABLE t.r EXTENDED" | cut -f4 | tail -n 1)
check_eq "CHECK TABLE after crash recovery" "OK" "$out"
got_count=$(sql "SELECT COUNT(*) FROM t.r")
check_eq "row count after crash recovery" "$ROWS" "$got_count"

# ---------- 5. shut down, unmount, fsck ----------

if my_stop; then
	pass "final clean shutdown"
else
	fail "final clean shutdown: mariadbd exited non-zero"
	show_my_err
fi
if [ "$PLAIN" = 1 ]; then
	skip_check "unmount + fsck (plain mode)"
else
	umount_vol && pass "unmount (daemon exit 0)"
	fsck_clean "after MariaDB"
fi

finish
