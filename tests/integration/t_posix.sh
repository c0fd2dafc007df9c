#!/bin/bash
# t_posix: POSIX behaviour of a mounted volume. Runs posix_check (one named
# check per syscall family) as root, then the permission checks and the whole
# general suite again as an unprivileged user; then unmount, fsck, remount,
# the tree must be unchanged; delete everything, fsck again.
. "$(dirname "$0")/lib.sh"

require_csdfs
require_tools setpriv find sort
setup
PC=$(helper posix_check) || exit 1

# the 6 GiB sparse file must fit the logical capacity; the data is tiny
mkfs_vol --size 2G
mount_vol || finish

# run_pc LABEL CMD...: run a posix_check instance, turn its lines into checks
run_pc() {
	local label=$1 out verdict name rest rc nfail=0
	shift
	out="$WORK/pc.$label.out"
	bounded 1200 "$@" >"$out" 2>&1
	rc=$?
	while IFS=' ' read -r verdict name rest; do
		case $verdict in
		PASS) pass "$label/$name" ;;
		FAIL)
			nfail=$((nfail + 1))
			name=${name%:}
			# ext4 keeps xattrs in one 4 KiB block: a 4 KiB value cannot fit
			if [ $PLAIN = 1 ] && [ "$name" = xattr_4k_value ] &&
				[[ $rest == *ENOSPC* || $rest == *E2BIG* ]]; then
				skip_check "$label/$name: host filesystem limit ($rest)"
			else
				fail "$label/$name: $rest"
			fi
			;;
		*) printf '    %s\n' "$verdict $name $rest" ;;
		esac
	done <"$out"
	if [ $rc -ne 0 ] && [ $nfail -eq 0 ]; then
		fail "$label: posix_check exited $rc without reporting a failed check"
	fi
}

# record what is on the mount, to compare across a remount (no atime)
snapshot() {
	(cd "$MNT" && find . -printf '%p %y %m %U %G %n %s %T@ %C@ %i %l\n' | LC_ALL=C sort)
}

# same_snapshot A B: the same entries with the same metadata; with the
# kernel's writeback cache (the default) the kernel stamps mtime/ctime with
# its coarse clock while csdfs stamps its own, so those two may differ by a
# clock tick or two (allowed: 20 ms); everything else must be identical.
same_snapshot() {
	local tol=0.020
	case " ${CSDFS_MOUNT_OPTS:-} " in *nowriteback_cache*) tol=0 ;; esac
	diff -u "$1" "$2" >"$WORK/snap.diff" && return 0
	[ "$(wc -l <"$1")" = "$(wc -l <"$2")" ] || return 1
	paste -d '\n' "$1" "$2" | awk -v tol="$tol" '
		NR % 2 == 1 { split($0, a, " "); next }
		{
			n = split($0, b, " ")
			for (i = 1; i <= n; i++) {
				if (i == 8 || i == 9) {
					d = a[i] - b[i]
					if (d < 0) d = -d
					if (d > tol) exit 1
				} else if (a[i] != b[i]) exit 1
			}
		}'
}

# --- as root ---
mkdir "$MNT/root"
run_pc root "$PC" -p "" "$MNT/root"

# --- as an unprivileged user ---
if [ "$(id -u)" != 0 ]; then
	skip_check "user: not running as root, cannot switch to a test user"
elif ! ensure_test_user; then
	fail "user: cannot create test user '$TEST_USER'"
else
	as_user_init
	if "$PC" --perm-setup "$MNT" >"$WORK/perm-setup.out" 2>&1; then
		pass "user/perm_setup"
	else
		fail "user/perm_setup: $(tr '\n' '|' <"$WORK/perm-setup.out")"
	fi
	run_pc user "${AS_USER[@]}" "$PC" --perm-user "$MNT"
	if "${AS_USER[@]}" mkdir "$MNT/perm/open/general"; then
		run_pc user "${AS_USER[@]}" "$PC" "$MNT/perm/open/general"
	else
		fail "user: cannot make a directory in a 0777 directory"
	fi
fi

# --- privileges dropped by writes (FUSE_HANDLE_KILLPRIV_V2: csdfs does it) ---
# ext4 semantics: an unprivileged write, truncate or O_TRUNC open drops
# set-user-ID and set-group-ID (with group execute), and security.capability;
# root keeps them on write; chown drops them. Checked through a fresh stat.
if [ "$(id -u)" = 0 ] && [ -n "${AS_USER+x}" ]; then
	K=$MNT/killpriv
	mkdir "$K" && chmod 1777 "$K"
	for f in w r c t o; do echo x >"$K/$f" && chmod 6777 "$K/$f"; done
	"${AS_USER[@]}" sh -c "echo y >>'$K/w'"
	echo y >>"$K/r"
	chown "$TEST_UID" "$K/c"
	"${AS_USER[@]}" truncate -s 0 "$K/t"
	"${AS_USER[@]}" sh -c ": >'$K/o'"
	check_eq "killpriv: write by another user drops suid/sgid" 777 "$(stat -c %a "$K/w")"
	check_eq "killpriv: write by root keeps them" 6777 "$(stat -c %a "$K/r")"
	check_eq "killpriv: chown drops them" 777 "$(stat -c %a "$K/c")"
	check_eq "killpriv: truncate by another user drops them" 777 "$(stat -c %a "$K/t")"
	check_eq "killpriv: O_TRUNC open by another user drops them" 777 "$(stat -c %a "$K/o")"
	if command -v setcap >/dev/null && command -v getcap >/dev/null; then
		echo x >"$K/cap" && chmod 666 "$K/cap"
		if setcap cap_net_raw+ep "$K/cap" 2>"$WORK/setcap.err"; then
			"${AS_USER[@]}" sh -c "echo y >>'$K/cap'"
			check_eq "killpriv: write by another user drops security.capability" "" \
				"$(getcap "$K/cap")"
		else
			fail "killpriv: setcap on csdfs: $(cat "$WORK/setcap.err")"
		fi
	else
		skip_check "killpriv: setcap/getcap not installed"
	fi
	rm -rf "$K"
fi

# --- persistence of everything posix_check left behind ---
if [ $PLAIN = 0 ]; then
	snapshot >"$WORK/snap.before"
	umount_vol
	fsck_clean "after posix checks"
	mount_vol || finish
	snapshot >"$WORK/snap.after"
	if same_snapshot "$WORK/snap.before" "$WORK/snap.after"; then
		pass "remount: metadata of $(wc -l <"$WORK/snap.before") entries unchanged"
	else
		fail "remount: metadata changed across remount (path type mode uid gid nlink size mtime ctime ino):"
		head -n 40 "$WORK/snap.diff" | sed 's/^/    /'
	fi
fi

# --- delete everything, the volume must come back to empty and clean ---
if bounded 300 rm -rf "$MNT/root" "$MNT/perm"; then
	pass "rm -rf of the whole test tree"
else
	fail "rm -rf of the whole test tree"
fi
check_eq "mount root is empty after rm -rf" "" "$(ls -A "$MNT")"
if [ $PLAIN = 0 ]; then
	umount_vol
	fsck_clean "after deleting everything"
fi
finish
