# tools/bench-lib/mysql.sh: Debian's mariadbd as tools/bench and
# tools/mysql-study run it (private socket, seeds/003 settings), and the CPU
# counters read around a run. Sourced, not run.
#
# The caller sets: die/say, run_bg (peers.sh); root (the repository),
# my_sock, my_pid, my_pool, my_log, dir, logs, and sb (the sysbench command
# line, used by my_golden).
#
# The InnoDB settings come from examples/mysql/my.cnf, the configuration we
# recommend for a csdfs datadir: every peer runs its [mariadbd] lines
# (my_cnf_opts), except the two that a cell chooses itself: the doublewrite
# buffer (the cells name it) and the flush method (flush_of: the
# recommended one on csdfs, what each peer can run safely elsewhere).

my_stop() { # clean shutdown of our mariadbd (kill after 120 s)
	local i
	[ -n "$my_pid" ] || return 0
	timeout 150 mariadb-admin --no-defaults -uroot --socket="$my_sock" shutdown >/dev/null 2>&1
	for ((i = 0; i < 240; i++)); do
		kill -0 "$my_pid" 2>/dev/null || break
		sleep 0.5
	done
	if kill -0 "$my_pid" 2>/dev/null; then
		say "mariadbd $my_pid did not stop; killing it"
		kill -KILL "$my_pid" 2>/dev/null
	fi
	wait "$my_pid" 2>/dev/null
	my_pid=
}

my_cnf=${my_cnf:-$root/examples/mysql/my.cnf}

# my_cnf_lines: "key value" for each setting of my.cnf's [mariadbd] section
# (just "key" for a flag such as skip-log-bin; the value is what follows
# the first "=")
my_cnf_lines() {
	[ -r "$my_cnf" ] || die "cannot read the recommended MariaDB settings '$my_cnf'"
	awk '/^[[:space:]]*\[/ { on = ($0 ~ /\[(mariadbd|mysqld)\]/); next }
		on { sub(/#.*/, ""); e = index($0, "=")
			k = e ? substr($0, 1, e - 1) : $0; v = e ? substr($0, e + 1) : ""
			gsub(/[[:space:]]/, "", k); gsub(/^[[:space:]]+|[[:space:]]+$/, "", v)
			if (k != "") print k (v == "" ? "" : " " v) }' "$my_cnf"
}

# my_cnf_get KEY: its value in my.cnf (empty when it is not set there)
my_cnf_get() { my_cnf_lines | awk -v k="$1" '$1 == k { v = $2 } END { print v }'; }

# my_cnf_opts: my.cnf's settings as mariadbd options, but for those a cell
# sets (datadir, doublewrite, flush method)
my_cnf_opts() {
	my_cnf_lines | awk '$1 != "datadir" && $1 != "innodb_doublewrite" && $1 != "innodb_flush_method" {
		k = $1; sub(/^[^ ]+ ?/, ""); print "--" k ($0 == "" ? "" : "=" $0) }'
}

# The flush method of FS's cells. csdfs: the recommended one (my.cnf), and
# passthrough-od the same (it exists to measure csdfs's own cost on top of
# one FUSE hop in the same flush method). InnoDB's O_DIRECT writes fail
# with EINVAL on passthrough_ll as it is (issue 19.1; docs/bench/README.md):
# there InnoDB flushes with fsync. plain and btrfs: O_DIRECT, the usual
# setting for them and what issue 19 compares with.
flush_of() {
	case $1 in
	passthrough) echo fsync ;;
	csdfs* | passthrough-od) my_cnf_get innodb_flush_method ;;
	*) echo O_DIRECT ;;
	esac
}

my_opts() { # DATADIR DOUBLEWRITE [FLUSH_METHOD]
	printf '%s\n' --no-defaults
	my_cnf_opts
	printf '%s\n' --user=root --datadir="$1" --tmpdir="$1/../mysql-tmp" \
		--socket="$my_sock" --skip-networking --pid-file="$1/../mysqld.pid" \
		--innodb-buffer-pool-size="$my_pool" --innodb-log-file-size="$my_log" \
		--innodb-flush-method="${3:-O_DIRECT}" --innodb-doublewrite="$2" \
		--innodb-flush-log-at-trx-commit=1 --innodb-adaptive-hash-index=0 \
		--performance-schema=0 --skip-log-bin --max-connections=100
}

my_start() { # DATADIR DOUBLEWRITE LOG [FLUSH_METHOD]
	local i opts
	mkdir -p "$1/../mysql-tmp"
	mapfile -t opts < <(my_opts "$1" "$2" "${4:-}")
	mariadbd "${opts[@]}" --log-error="$3" >>"$3.out" 2>&1 8>&- 9>&- &
	my_pid=$!
	for ((i = 0; i < 600; i++)); do
		timeout 10 mariadb-admin --no-defaults -uroot --socket="$my_sock" --connect-timeout=2 ping \
			>/dev/null 2>&1 && return 0
		kill -0 "$my_pid" 2>/dev/null || { wait "$my_pid"; my_pid=; say "mariadbd exited: $(tail -n 5 "$3")"; return 1; }
		sleep 0.5
	done
	say "mariadbd did not answer within 300 s"
	return 1
}

# proc_cpu PID: CPU time of a process so far (all its threads), in clock ticks
proc_cpu() {
	[ -n "$1" ] && [ -r "/proc/$1/stat" ] || { echo ''; return; }
	# the fields after the ")" that ends the command name: utime is the 12th
	sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}

# cpu_busy_total: "busy total" clock ticks of the whole machine so far
cpu_busy_total() {
	awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t }' /proc/stat
}

# my_golden DIR: a fresh datadir in DIR loaded by "${sb[@]}" prepare, then
# shut down slowly so that every page is in the tablespaces, nothing to redo
my_golden() {
	local golden=$1
	rm -rf "$golden" "$dir/mysql-tmp"
	mkdir -p "$golden"
	mariadb-install-db --no-defaults --user=root --datadir="$golden" \
		--auth-root-authentication-method=socket >"$logs/mariadb-install-db.log" 2>&1 ||
		die "mariadb-install-db failed ($logs/mariadb-install-db.log)"
	my_start "$golden" ON "$logs/mariadbd-golden.err" || die "mariadbd would not start on the golden datadir"
	mariadb --no-defaults -uroot --socket="$my_sock" -e "CREATE DATABASE sbtest" || die "CREATE DATABASE failed"
	run_bg 3600 "${sb[@]}" prepare >"$logs/sysbench-prepare.txt" 2>&1 ||
		die "sysbench prepare failed: $(tail -n 5 "$logs/sysbench-prepare.txt")"
	mariadb --no-defaults -uroot --socket="$my_sock" -e "SET GLOBAL innodb_fast_shutdown=0"
	my_stop
	say "mysql: golden datadir $(du -sh --apparent-size "$golden" | cut -f1) (tables $(du -sh --apparent-size "$golden/sbtest" | cut -f1))"
}
