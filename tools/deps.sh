#!/usr/bin/env bash
# Install the Debian 12 packages csdfs needs for one purpose.
#
# Idempotent: packages already installed are left alone and apt is not even
# touched when nothing is missing. Also makes sure /dev/fuse exists, that
# /etc/fuse.conf allows 'allow_other' for unprivileged mounts, and says when
# /dev/fuse is closed to unprivileged users (no udev to open it up).
#
# Usage: tools/deps.sh [PURPOSE] [--check]
#   build     compile csdfs and its unit tests
#   demo      build + fuse3, attr, fio            (tools/demo.sh)
#   install   build + fuse3, man-db               (tools/install.sh)
#   test      build + everything the test suites use (tools/test.sh; default)
#   bench     build + fuse3, fio, btrfs, MariaDB, sysbench, ... (tools/bench)
#   --check   only report what is missing; exit 1 if anything is.
# Run as root, or as a user who may sudo.
set -euo pipefail

prog=deps.sh

build_pkgs=(libfuse3-dev libzstd-dev liblz4-dev liblmdb-dev check
	    meson ninja-build pkg-config gcc)
demo_pkgs=(fuse3 attr fio)
install_pkgs=(fuse3 man-db)
test_pkgs=(fuse3 fio attr mariadb-server mariadb-client sysbench util-linux
	   procps psmisc libcap2-bin dbench stress-ng rsync jq man-db libmariadb-dev)
bench_pkgs=(fuse3 fio attr jq util-linux gnuplot-nox btrfs-progs
	    btrfs-compsize mariadb-server mariadb-client sysbench)

usage() { sed -n '2,17s/^# \{0,1\}//p' "$0"; }

check_only=0
purpose=
for arg in "$@"; do
	case $arg in
	--check) check_only=1 ;;
	-h | --help)
		usage
		exit 0
		;;
	build | demo | install | test | bench)
		[ -z "$purpose" ] || {
			echo "$prog: more than one purpose ('$purpose', '$arg')" >&2
			exit 2
		}
		purpose=$arg
		;;
	-*)
		echo "$prog: unknown option '$arg' (try --help)" >&2
		exit 2
		;;
	*)
		echo "$prog: unknown purpose '$arg' (build, demo, install, test or bench)" >&2
		exit 2
		;;
	esac
done
purpose=${purpose:-test}
want=("${build_pkgs[@]}")
case $purpose in
demo) want+=("${demo_pkgs[@]}") ;;
install) want+=("${install_pkgs[@]}") ;;
test) want+=("${test_pkgs[@]}") ;;
bench) want+=("${bench_pkgs[@]}") ;;
esac

die() {
	echo "$prog: $*" >&2
	exit 1
}

sudo_cmd=()
if [ "$(id -u)" -ne 0 ] && [ "$check_only" -eq 0 ]; then
	command -v sudo >/dev/null 2>&1 ||
		die "not root and 'sudo' is not installed; run this script as root"
	sudo_cmd=(sudo)
fi

# The packages whose dpkg status is not "install ok installed".
missing=()
for pkg in "${want[@]}"; do
	status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
	[ "$status" = "install ok installed" ] || missing+=("$pkg")
done

# fuse_closed: true when /dev/fuse exists but is not open to everyone. Without
# udev (a container, a chroot, a minimal root) the kernel leaves it 0600, and
# fusermount3 then fails for every unprivileged user; root mounts still work.
fuse_closed() {
	local mode
	[ -c /dev/fuse ] || return 1
	mode=$(stat -c '%a' /dev/fuse)
	[ $((8#$mode & 8#6)) -ne 6 ]
}
fuse_closed_msg() {
	echo "'/dev/fuse' is mode $(stat -c '%04a' /dev/fuse): only root can mount csdfs" \
		"(for other users: chmod 0666 /dev/fuse, as udev's fuse rule does)"
}

if [ "$check_only" -eq 1 ]; then
	rc=0
	if [ "${#missing[@]}" -gt 0 ]; then
		echo "$prog: missing packages for '$purpose': ${missing[*]}"
		rc=1
	fi
	if [ "$purpose" != build ]; then	# compiling needs no FUSE at run time
		[ -c /dev/fuse ] || { echo "$prog: /dev/fuse is missing"; rc=1; }
		if fuse_closed; then
			echo "$prog: $(fuse_closed_msg)"
			rc=1
		fi
		grep -Eq '^[[:space:]]*user_allow_other' /etc/fuse.conf 2>/dev/null ||
			{ echo "$prog: 'user_allow_other' is not set in /etc/fuse.conf"; rc=1; }
	fi
	if { [ "$purpose" = test ] || [ "$purpose" = bench ]; } &&
		! getent hosts localhost >/dev/null 2>&1; then
		echo "$prog: 'localhost' does not resolve (mariadb-install-db needs it)"
		rc=1
	fi
	[ "$rc" -eq 0 ] && echo "$prog: all dependencies for '$purpose' present"
	exit "$rc"
fi

if [ "${#missing[@]}" -gt 0 ]; then
	command -v apt-get >/dev/null 2>&1 ||
		die "missing packages (${missing[*]}) and no apt-get: install them by hand"
	log=$(mktemp "${TMPDIR:-/tmp}/csdfs-deps.XXXXXX")
	echo "$prog: installing for '$purpose': ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	if ! "${sudo_cmd[@]}" apt-get update >"$log" 2>&1; then
		tail -n 20 "$log" >&2
		die "'apt-get update' failed (full log: $log)"
	fi
	if ! "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y --no-install-recommends \
		-o Dpkg::Options::=--force-confdef \
		-o Dpkg::Options::=--force-confold \
		"${missing[@]}" >>"$log" 2>&1; then
		tail -n 20 "$log" >&2
		die "'apt-get install ${missing[*]}' failed (full log: $log)"
	fi
	rm -f "$log"
fi

[ "$purpose" = build ] && exit 0

# /dev/fuse: the module may simply not be loaded yet. Without it the
# integration tests skip (exit 77) rather than fail, so only warn.
if [ ! -c /dev/fuse ]; then
	if command -v modprobe >/dev/null 2>&1; then
		"${sudo_cmd[@]}" modprobe fuse >/dev/null 2>&1 || true
	fi
	if [ ! -c /dev/fuse ]; then
		echo "$prog: warning: /dev/fuse is missing (modprobe fuse failed);" \
			"mount tests will be skipped" >&2
	fi
fi
# Root mounts (the demo, the tests, fstab, systemd) work either way, so the
# device is left as the system made it.
if fuse_closed; then
	echo "$prog: warning: $(fuse_closed_msg)" >&2
fi

# mariadb-install-db refuses to run unless 'localhost' resolves; a root made
# by debootstrap has no /etc/hosts at all.
if { [ "$purpose" = test ] || [ "$purpose" = bench ]; } &&
	! getent hosts localhost >/dev/null 2>&1; then
	echo "$prog: 'localhost' does not resolve: adding it to /etc/hosts"
	printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' |
		"${sudo_cmd[@]}" tee -a /etc/hosts >/dev/null ||
		die "cannot add 'localhost' to /etc/hosts"
fi

# allow_other for non-root mounts (fusermount3 refuses it otherwise).
fuse_conf=/etc/fuse.conf
if ! grep -Eq '^[[:space:]]*user_allow_other' "$fuse_conf" 2>/dev/null; then
	echo "$prog: enabling 'user_allow_other' in $fuse_conf"
	echo user_allow_other | "${sudo_cmd[@]}" tee -a "$fuse_conf" >/dev/null ||
		die "cannot append 'user_allow_other' to $fuse_conf"
fi

exit 0
