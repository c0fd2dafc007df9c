# tools/bench-lib/mysql.sh: Debian's mariadbd as tools/bench and
# tools/mysql-study run it (private socket, seeds/003 settings), and the CPU
# counters read around a run. Sourced, not run.
#
# The caller sets: die/say, run_bg (peers.sh); my_sock, my_pid, my_pool,
# my_log, dir, logs, and sb (the sysbench command line, used by my_golden).

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

# InnoDB's O_DIRECT writes fail with EINVAL on passthrough_ll (issue 19.1;
# docs/bench/README.md): there InnoDB flushes with fsync
flush_of() { if [ "$1" = passthrough ]; then echo fsync; else echo O_DIRECT; fi; }

my_opts() { # DATADIR DOUBLEWRITE [FLUSH_METHOD]
	printf '%s\n' --no-defaults --user=root --datadir="$1" --tmpdir="$1/../mysql-tmp" \
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
