#!/usr/bin/env bash
# t_install: csdfs as a user installs and runs it. tools/install.sh stages
# the programs and man pages into a temp DESTDIR; that tree is then bound
# over /usr/local, where mount(8), man(1) and systemd look, and used through
# the system's own entry points: `mount -t fuse.csdfs`, a line of
# examples/fstab through `mount -T FSTAB`, `man`, bare command names, the
# systemd unit (systemd-analyze verify; start/stop where systemd runs) and
# `tools/deps.sh --check` on a /dev/fuse closed to unprivileged users.
#
# Everything runs in a private mount namespace (unshare -m): the binds over
# /usr/local and /dev/fuse and every mount made here are seen by nothing
# else on the machine and end with the test.
set -uo pipefail

if [ "${CSDFS_T_INSTALL_NS:-0}" != 1 ]; then
	[ "$(id -u)" = 0 ] || { echo "t_install: SKIP: needs root (mount namespace)"; exit 77; }
	command -v unshare >/dev/null 2>&1 || { echo "t_install: SKIP: no unshare"; exit 77; }
	# A chroot whose / is not a mount point cannot make its mounts private;
	# binding over /usr/local there would reach the machine's own tree.
	if ! err=$(unshare --mount --propagation private true 2>&1); then
		echo "t_install: SKIP: no private mount namespace here ($err)"
		exit 77
	fi
	CSDFS_T_INSTALL_NS=1 exec unshare --mount --propagation private bash "$0" "$@"
fi

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

require_csdfs
require_tools mount umount findmnt meson
[ -n "${CSDFS_BUILD_DIR:-}" ] || die "CSDFS_BUILD_DIR is not set (meson sets it)"
setup

# The daemon mount(8) starts is not our child: find it by the volume path.
mount_daemon() { daemons_using "$VOL" | head -n 1; }

# wait_gone PID SECONDS: true once PID has exited
wait_gone() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		pid_alive "$1" || return 0
		sleep 0.1
	done
	return 1
}

# mounted_by_mount LABEL MOUNT-ARGS...: mount(8) mounts $VOL on $MNT as
# fuse.csdfs; writes, reads back, unmounts with umount(8), waits for the
# daemon to exit and checks fsck. $1 also names the expected mount option.
mounted_by_mount() {
	local label=$1 opt=$2 pid
	shift 2
	if ! bounded 30 mount "$@" >"$WORK/mount.log" 2>&1; then
		fail "$label: mount $* failed: $(tr '\n' '|' <"$WORK/mount.log")"
		return 1
	fi
	pid=$(mount_daemon)
	[ -z "$pid" ] || EXTRA_DAEMONS+=("$pid")
	check_eq "$label: the daemon is the installed csdfs" /usr/local/bin/csdfs \
		"$(readlink "/proc/${pid:-0}/exe")"
	check_eq "$label: $MNT is of type fuse.csdfs" fuse.csdfs \
		"$(findmnt -n -o FSTYPE --mountpoint "$MNT")"
	check_eq "$label: source is the volume" "csdfs:$VOL" \
		"$(findmnt -n -o SOURCE --mountpoint "$MNT")"
	if [ -n "$opt" ]; then
		check "$label: mounted with $opt" \
			grep -qw "$opt" <<<"$(findmnt -n -o OPTIONS --mountpoint "$MNT")"
	fi
	head -c 1048576 /usr/bin/bash >"$WORK/sample" 2>/dev/null ||
		head -c 1048576 /bin/sh >"$WORK/sample"
	bounded 30 cp "$WORK/sample" "$MNT/sample" && bounded 30 sync "$MNT/sample"
	check_files_equal "$label: a file written reads back" "$WORK/sample" "$MNT/sample"
	check "$label: umount $MNT" bounded 30 umount "$MNT"
	if [ -n "$pid" ]; then
		check "$label: the daemon exits after umount" wait_gone "$pid" 60
	else
		fail "$label: no csdfs daemon found for '$VOL'"
	fi
	fsck_clean "$label"
}

# ---------- tools/install.sh into a DESTDIR ----------

dest=$WORK/dest
# meson install rewrites the build's install log, which 'ninja uninstall'
# reads: keep the one of the user's own install.
ilog=$CSDFS_BUILD_DIR/meson-logs/install-log.txt
if [ -f "$ilog" ]; then
	cp -p "$ilog" "$WORK/install-log.txt"
	CLEANUP_HOOKS+=("cp -p '$WORK/install-log.txt' '$ilog'")
else
	CLEANUP_HOOKS+=("rm -f '$ilog'")
fi
if CSDFS_SKIP_DEPS=1 bounded 300 bash "$REPO_ROOT/tools/install.sh" --prefix /usr/local \
	--destdir "$dest" --build "$CSDFS_BUILD_DIR" >"$WORK/install.log" 2>&1; then
	pass "install.sh --destdir"
else
	fail "install.sh --destdir: $(tail -n 5 "$WORK/install.log" | tr '\n' '|')"
	finish
fi
for f in csdfs csdfs-mkfs csdfs-fsck csdfs-stat csdfs-recompress; do
	check "installed: /usr/local/bin/$f is executable" test -x "$dest/usr/local/bin/$f"
done
for f in man8/csdfs.8 man8/csdfs-mkfs.8 man8/csdfs-fsck.8 man8/csdfs-recompress.8 \
	man5/csdfs.5 man1/csdfs-stat.1; do
	check "installed: /usr/local/share/man/$f" test -s "$dest/usr/local/share/man/$f"
done

# From here on the staged tree is /usr/local, as after a real install.
mkdir -p "$dest/usr/local/sbin" "$dest/usr/local/lib" "$dest/usr/local/etc"
if ! mount --bind "$dest/usr/local" /usr/local; then
	fail "cannot bind '$dest/usr/local' over /usr/local"
	finish
fi

check "csdfs-stat --help by bare name" env PATH=/usr/local/bin:/usr/bin:/bin \
	csdfs-stat --help
if command -v man >/dev/null 2>&1; then
	# (Debian's /usr/local/man is a link to share/man: compare real paths)
	check_eq "man -w csdfs finds the installed page" "$dest/usr/local/share/man/man8/csdfs.8" \
		"$(readlink -f "$(man -w csdfs 2>&1)" | sed "s|^/usr/local/|$dest/usr/local/|")"
	check_eq "man -w 5 csdfs finds the format page" "$dest/usr/local/share/man/man5/csdfs.5" \
		"$(readlink -f "$(man -w 5 csdfs 2>&1)" | sed "s|^/usr/local/|$dest/usr/local/|")"
	check "man csdfs-mkfs renders" bash -c 'man -P cat csdfs-mkfs 2>/dev/null | grep -q csdfs-mkfs'
else
	skip_check "man: man-db is not installed"
fi

# ---------- mount(8): -t fuse.csdfs and an fstab line ----------

# mount(8) drops PATH; mount.fuse3 runs "csdfs VOLUME MOUNTPOINT -o ..." through
# /bin/sh, whose default PATH has /usr/local/bin: the installed csdfs, not
# the build's.
CSDFS_MKFS=/usr/local/bin/csdfs-mkfs
CSDFS_FSCK=/usr/local/bin/csdfs-fsck
mkfs_vol --size 256M
mounted_by_mount "mount -t fuse.csdfs" "" -t fuse.csdfs "$VOL" "$MNT"

# The line from examples/fstab with this test's volume and mount point.
example=$REPO_ROOT/examples/fstab
line=$(grep -E '^[^#[:space:]].*[[:space:]]fuse\.csdfs[[:space:]]' "$example" | head -n 1)
if [ -z "$line" ]; then
	fail "fstab: no fuse.csdfs line in '$example'"
else
	read -r _ _ fstype opts dump pass <<<"$line"
	printf '%s %s %s %s %s %s\n' "$VOL" "$MNT" "$fstype" "$opts" "$dump" "$pass" \
		>"$WORK/fstab"
	log "fstab line: $(cat "$WORK/fstab")"
	mounted_by_mount "fstab (mount -T)" allow_other -T "$WORK/fstab" "$MNT"
fi

# ---------- tools/deps.sh --check and /dev/fuse's mode ----------

# A node of the same device with the mode a udev-less root leaves it in.
fuse_node() { # fuse_node MODE: bind a /dev/fuse of that mode in place
	umount /dev/fuse 2>/dev/null
	rm -f "$WORK/fuse-node"
	mknod -m "$1" "$WORK/fuse-node" c 10 229 && mount --bind "$WORK/fuse-node" /dev/fuse
}
if fuse_node 0600; then
	bash "$REPO_ROOT/tools/deps.sh" test --check >"$WORK/deps.out" 2>&1
	check_eq "deps.sh --check fails on a 0600 /dev/fuse" 1 $?
	check_grep_i "deps.sh --check names the 0600 /dev/fuse and the fix" \
		"'/dev/fuse' is mode 0600: only root can mount csdfs.*chmod 0666 /dev/fuse" \
		"$WORK/deps.out"
	fuse_node 0666
	bash "$REPO_ROOT/tools/deps.sh" test --check >"$WORK/deps.out" 2>&1
	check "deps.sh --check says nothing of a 0666 /dev/fuse" \
		bash -c "! grep -q 'dev/fuse' '$WORK/deps.out'"
	umount /dev/fuse
else
	skip_check "deps.sh --check on a 0600 /dev/fuse: cannot bind a device node here"
fi
bash "$REPO_ROOT/tools/deps.sh" frobnicate >"$WORK/deps.out" 2>&1
check_eq "deps.sh: an unknown purpose exits 2" 2 $?
check_grep_i "deps.sh: an unknown purpose is named" "unknown purpose 'frobnicate'" "$WORK/deps.out"

# ---------- the systemd unit ----------

unit=$REPO_ROOT/examples/csdfs@.service
inst=$(systemd-escape --path "$MNT" 2>/dev/null || true)
if command -v systemd-analyze >/dev/null 2>&1 && [ -n "$inst" ]; then
	mkdir -p "$WORK/units"
	cp "$unit" "$WORK/units/csdfs@.service"
	# verify looks up the commands (in /usr/local/bin: the staged install)
	if bounded 60 systemd-analyze verify "$WORK/units/csdfs@$inst.service" \
		>"$WORK/verify.log" 2>&1; then
		pass "systemd-analyze verify csdfs@$inst.service"
	else
		fail "systemd-analyze verify: $(tr '\n' '|' <"$WORK/verify.log")"
	fi
else
	skip_check "systemd-analyze verify: systemd-analyze is not installed"
fi

# Starting the unit needs systemd as PID 1 (it runs csdfs in the machine's
# own mount namespace, where /usr/local is not our staged tree: a drop-in
# points ExecStart at the build's csdfs).
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	run_unit=/run/systemd/system
	conf=/etc/csdfs/$inst.conf
	CLEANUP_HOOKS+=("systemctl stop 'csdfs@$inst.service'; rm -rf '$run_unit/csdfs@.service' \
'$run_unit/csdfs@$inst.service.d' '$conf'; rmdir /etc/csdfs; systemctl daemon-reload")
	mkdir -p /etc/csdfs "$run_unit/csdfs@$inst.service.d"
	cp "$unit" "$run_unit/csdfs@.service"
	printf 'CSDFS_VOLUME=%s\nCSDFS_OPTIONS=allow_other,commit_ms=200\n' "$VOL" >"$conf"
	printf '[Service]\nExecStart=\nExecStart=%s -o ${CSDFS_OPTIONS} ${CSDFS_VOLUME} /%%I\n' \
		"$CSDFS_BIN" >"$run_unit/csdfs@$inst.service.d/bin.conf"
	systemctl daemon-reload
	check "systemctl start csdfs@$inst" bounded 60 systemctl start "csdfs@$inst.service"
	check "the unit's mount is in the machine's namespace" \
		grep -q " $MNT fuse.csdfs " /proc/1/mounts
	check "systemctl stop csdfs@$inst" bounded 150 systemctl stop "csdfs@$inst.service"
	check "the unit's mount is gone after stop" \
		bash -c "! grep -q ' $MNT fuse.csdfs ' /proc/1/mounts"
	fsck_clean "after systemctl stop"
else
	skip_check "systemctl start/stop csdfs@.service: systemd is not running" \
		"(PID 1 is '$(cat /proc/1/comm 2>/dev/null)'; examples/README.md says how to try it)"
fi

finish
