# shellcheck shell=bash
# mariadb_lib.sh: a private mariadbd (Debian's mariadb-server) on a datadir
# below the test's mount, shared by t_mariadb.sh and
# tests/crash/t_mariadb_crash.sh. Source it after lib.sh; don't run it.
#
#   my_require          find mariadbd and mariadb-install-db (skip, 77, without)
#   my_init DATADIR     after setup: socket, error log, tmpdir, MY_OPTS (an
#                       array; append to it before the first start), and the
#                       EXIT trap that stops mariadbd BEFORE lib.sh's cleanup
#                       unmounts, so a failed check never leaves a server
#                       holding the mount
#   my_install_db       mariadb-install-db into DATADIR (a check)
#   my_try_start LABEL  start mariadbd, wait for a ping (bounded); 0 or 1 with
#                       the reason in MY_WHY; no pass/fail
#   my_start LABEL      the same as a check
#   my_stop             clean shutdown (bounded; killed when it hangs)
#   my_kill9            crash the server alone
#   my_forget           after the caller killed and reaped it (MY_PID) itself
#   sql STATEMENTS      run them, results tab-separated without headers
#   my_log_since_start  the error log written since the last start
#   show_my_err         the error log's last lines
#
# --no-defaults everywhere keeps the host's /etc/mysql out of the tests.
# MY_CLIENTS: pids of load clients; the EXIT trap kills them first.

# mariadbd lives in /usr/sbin, which an unprivileged PATH may lack.
find_prog() {
	local p
	p=$(command -v "$1" 2>/dev/null) && { printf '%s\n' "$p"; return 0; }
	for p in /usr/sbin/"$1" /usr/local/sbin/"$1" /usr/libexec/"$1"; do
		[ -x "$p" ] && { printf '%s\n' "$p"; return 0; }
	done
	return 1
}

my_require() {
	MARIADBD=$(find_prog mariadbd) ||
		skip_test "mariadbd is not installed (apt-get install mariadb-server)"
	INSTALL_DB=$(find_prog mariadb-install-db) ||
		skip_test "mariadb-install-db is not installed"
	require_tools mariadb mariadb-admin timeout
}

MY_PID=
MY_CLIENTS=()
MY_SOCKDIR=

my_init() {
	MY_DATADIR=$1
	MY_USER=$(id -un)
	MY_SOCK=$WORK/my.sock
	# A unix socket path must fit in sun_path (108 bytes).
	if [ "${#MY_SOCK}" -gt 100 ]; then
		MY_SOCKDIR=$(mktemp -d /tmp/t_my.XXXXXX) || die "mktemp failed"
		MY_SOCK=$MY_SOCKDIR/my.sock
	fi
	MY_ERR=$WORK/mariadbd.err
	MY_ERR_START=0
	MY_TMP=$WORK/mytmp
	mkdir -p "$MY_TMP"
	# shared by mariadb-install-db and mariadbd
	MY_OPTS=(--user="$MY_USER" --datadir="$MY_DATADIR" --tmpdir="$MY_TMP"
		--innodb-flush-method=O_DIRECT --innodb-doublewrite=0
		--innodb-page-size=16k --innodb-buffer-pool-size=64M
		--innodb-log-file-size=32M)
	client_opts=(--no-defaults --user=root --socket="$MY_SOCK")
	trap my_cleanup EXIT
}

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

my_log_since_start() {
	tail -c +$((MY_ERR_START + 1)) "$MY_ERR" 2>/dev/null
}

my_install_db() {
	if bounded 300 "$INSTALL_DB" --no-defaults "${MY_OPTS[@]}" \
		--auth-root-authentication-method=normal --skip-test-db \
		>"$WORK/install-db.log" 2>&1; then
		pass "mariadb-install-db on $([ "$PLAIN" = 1 ] && echo plain dir || echo csdfs)"
	else
		fail "mariadb-install-db (exit $?): $(tail -n 5 "$WORK/install-db.log" | tr '\n' '|')"
		return 1
	fi
}

# my_gone: the server is a zombie or gone, read without a fork. A wait on a
# live one would never end, and pid_alive once said a server that went on
# to answer was not running (seen once under load, in a sanitizer pass).
my_gone() {
	local st
	read -r st 2>/dev/null <"/proc/$MY_PID/stat" || return 0
	st=${st##*) }
	[ "${st:0:1}" = Z ] && return 0
	log "pid_alive said mariadbd $MY_PID is gone, but its state is '${st:0:1}'"
	return 1
}

my_try_start() {
	local i n rc
	MY_WHY=
	[ -e "$MY_ERR" ] || : >"$MY_ERR"
	MY_ERR_START=$(stat -c %s "$MY_ERR")
	echo "=== start $(date +%T) ($1) ===" >>"$MY_ERR"
	"$MARIADBD" --no-defaults "${MY_OPTS[@]}" --socket="$MY_SOCK" \
		--skip-networking --pid-file="$WORK/mariadbd.pid" \
		--log-error="$MY_ERR" >>"$WORK/mariadbd.out" 2>&1 &
	MY_PID=$!
	EXTRA_DAEMONS+=("$MY_PID")
	n=$((240 * ${CSDFS_TIME_SCALE:-1}))
	for ((i = 0; i < n; i++)); do
		ping_ok && return 0
		if ! pid_alive "$MY_PID" && my_gone; then
			wait "$MY_PID" 2>/dev/null
			rc=$?
			my_forget
			MY_WHY="mariadbd exited with status $rc before answering"
			return 1
		fi
		sleep 0.5
	done
	MY_WHY="mariadbd did not answer ping within $((n / 2)) s"
	return 1
}

my_start() {
	if my_try_start "$1"; then
		pass "mariadbd answers ping ($1)"
		return 0
	fi
	fail "$MY_WHY ($1)"
	show_my_err
	return 1
}

# my_stop: mariadbd's exit status (1 when it had to be killed)
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
		my_forget
		return 1
	fi
	wait "$MY_PID" 2>/dev/null
	rc=$?
	my_forget
	return "$rc"
}

# my_forget: the server is reaped; drop its pid from EXTRA_DAEMONS too, so a
# long run's cleanup never signals a process that got the pid later
my_forget() {
	local p left=()
	for p in "${EXTRA_DAEMONS[@]}"; do
		[ "$p" = "$MY_PID" ] || left+=("$p")
	done
	EXTRA_DAEMONS=("${left[@]}")
	MY_PID=
	rm -f "$MY_SOCK"
}

my_kill9() {
	[ -n "$MY_PID" ] || return 1
	kill -9 "$MY_PID" 2>/dev/null
	{ wait "$MY_PID"; } 2>/dev/null
	my_forget
}

# The EXIT trap: clients, then the server, then lib.sh's cleanup with the
# original exit status.
# shellcheck disable=SC2317 # invoked by the trap
my_cleanup() {
	local rc=$? i p
	trap - EXIT
	for p in "${MY_CLIENTS[@]}"; do
		pid_alive "$p" && kill -9 "$p" 2>/dev/null
	done
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
