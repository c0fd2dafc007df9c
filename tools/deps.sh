#!/usr/bin/env bash
# Install what csdfs needs to build and to run its test suite on Debian 12.
#
# Idempotent: packages already installed are left alone and apt is not even
# touched when nothing is missing. Also makes sure /dev/fuse exists and that
# /etc/fuse.conf allows 'allow_other' for unprivileged mounts.
#
# Usage: tools/deps.sh [--check]
#   --check   only report what is missing; exit 1 if anything is.
set -euo pipefail

prog=deps.sh

build_pkgs=(libfuse3-dev fuse3 libzstd-dev liblz4-dev liblmdb-dev check
	    meson ninja-build pkg-config gcc)
test_pkgs=(fio attr mariadb-server mariadb-client sysbench util-linux
	   procps psmisc libcap2-bin dbench stress-ng libmariadb-dev)

check_only=0
case "${1:-}" in
'') ;;
--check) check_only=1 ;;
-h | --help)
	sed -n '2,10s/^# \{0,1\}//p' "$0"
	exit 0
	;;
*)
	echo "$prog: unknown option '$1' (try --help)" >&2
	exit 2
	;;
esac

die() {
	echo "$prog: $*" >&2
	exit 1
}

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 ||
		die "not root and 'sudo' is not installed; run this script as root"
	sudo_cmd=(sudo)
fi

# The packages whose dpkg status is not "install ok installed".
missing=()
for pkg in "${build_pkgs[@]}" "${test_pkgs[@]}"; do
	status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
	[ "$status" = "install ok installed" ] || missing+=("$pkg")
done

if [ "$check_only" -eq 1 ]; then
	rc=0
	if [ "${#missing[@]}" -gt 0 ]; then
		echo "$prog: missing packages: ${missing[*]}"
		rc=1
	fi
	[ -c /dev/fuse ] || { echo "$prog: /dev/fuse is missing"; rc=1; }
	grep -Eq '^[[:space:]]*user_allow_other' /etc/fuse.conf 2>/dev/null ||
		{ echo "$prog: 'user_allow_other' is not set in /etc/fuse.conf"; rc=1; }
	[ "$rc" -eq 0 ] && echo "$prog: all dependencies present"
	exit "$rc"
fi

if [ "${#missing[@]}" -gt 0 ]; then
	command -v apt-get >/dev/null 2>&1 ||
		die "missing packages (${missing[*]}) and no apt-get: install them by hand"
	log=$(mktemp "${TMPDIR:-/tmp}/csdfs-deps.XXXXXX")
	echo "$prog: installing ${missing[*]}"
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

# allow_other for non-root mounts (fusermount3 refuses it otherwise).
fuse_conf=/etc/fuse.conf
if ! grep -Eq '^[[:space:]]*user_allow_other' "$fuse_conf" 2>/dev/null; then
	echo "$prog: enabling 'user_allow_other' in $fuse_conf"
	echo user_allow_other | "${sudo_cmd[@]}" tee -a "$fuse_conf" >/dev/null ||
		die "cannot append 'user_allow_other' to $fuse_conf"
fi

exit 0
