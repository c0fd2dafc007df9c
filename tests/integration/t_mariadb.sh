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
# mariadb_lib.sh starts and stops the server; its EXIT trap stops mariadbd
# BEFORE lib.sh unmounts, so a failed check never leaves a server holding the
# mount. Skips (77) without mariadbd/mariadb-install-db or /dev/fuse.
# CSDFS_TEST_PLAIN=1 runs the same on a plain directory.

# shellcheck source=tests/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROWS=100000

# shellcheck source=tests/integration/mariadb_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/mariadb_lib.sh"

my_require
require_csdfs

setup
my_init "$MNT/data"

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

my_install_db || exit 1

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
