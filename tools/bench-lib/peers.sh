# tools/bench-lib/peers.sh: the file systems tools/bench and tools/mysql-study
# measure side by side (plain directory, btrfs-zstd on a loop image,
# libfuse's passthrough_ll, csdfs volumes): build, mount, measure the size
# of, check and tear down. Sourced, not run.
#
# The caller sets: die/say; dir (work directory), logs, bin (csdfs-mkfs and
# csdfs), events (JSON lines of incidents), vol_size, btrfs_img,
# btrfs_img_f, btrfs_mnt, btrfs_method (compsize or btrfs-df-estimate),
# pt_src_c, pt_opts, pt_tmp; the arrays mnt_of, codec_of,
# daemon_pid, fs_dead; loopdev, child_pid.

# the FUSE peers: each a daemon this file starts, waits for and unmounts
fuse_fs="csdfs-lz4 csdfs-zstd1 csdfs-none passthrough passthrough-od"
# pt_src_of FS: the host directory a passthrough peer serves
pt_src_of() { echo "$dir/$1-src"; }
# pt_bin_of FS: the name of its passthrough_ll build in pt_tmp (pt_build)
pt_bin_of() { case $1 in passthrough) echo passthrough_ll ;; passthrough-od) echo passthrough_od ;; esac; }

# is_mounted DIR: from the mount table, not stat(), which fails with ENOTCONN
# on a FUSE mount whose daemon died
is_mounted() {
	awk -v m="$1" '$2 == m { f = 1 } END { exit !f }' /proc/self/mounts
}

# stop_child: the fio/sysbench we are waiting on, if any
stop_child() {
	[ -n "$child_pid" ] || return 0
	if kill -0 "$child_pid" 2>/dev/null; then
		kill -TERM "$child_pid" 2>/dev/null
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			kill -0 "$child_pid" 2>/dev/null || break
			sleep 1
		done
		kill -KILL "$child_pid" 2>/dev/null
	fi
	wait "$child_pid" 2>/dev/null
	child_pid=
}

# csdfs_umount NAME: fusermount3 -u, then wait for the daemon to exit
# (a csdfs volume or passthrough_ll)
csdfs_umount() {
	local name=$1 m=${mnt_of[$1]:-} pid=${daemon_pid[$1]:-} i rc
	if [ -n "$m" ] && is_mounted "$m"; then
		for ((i = 0; i < 20; i++)); do
			fusermount3 -u "$m" 2>/dev/null && break
			sleep 0.5
		done
		if is_mounted "$m"; then
			say "warning: '$m' stays busy; lazy unmount"
			fusermount3 -uz "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
		fi
	fi
	if [ -n "$pid" ]; then
		for ((i = 0; i < 120; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.5
		done
		if kill -0 "$pid" 2>/dev/null; then
			say "FUSE daemon $pid ($name) still running 60 s after unmount; killing it"
			kill -KILL "$pid" 2>/dev/null
		fi
		wait "$pid" 2>/dev/null
		rc=$?
		[ "$rc" = 0 ] || say "FUSE daemon ($name) exited with status $rc (log: $logs/csdfs-$name.log)"
		unset "daemon_pid[$name]"
	fi
}

btrfs_umount() {
	local i
	if is_mounted "$btrfs_mnt"; then
		for ((i = 0; i < 20; i++)); do
			umount "$btrfs_mnt" 2>/dev/null && break
			sleep 0.5
		done
		is_mounted "$btrfs_mnt" && { say "warning: lazy unmount of '$btrfs_mnt'"; umount -l "$btrfs_mnt"; }
	fi
	# our loop device, and any left by an earlier killed run on the same image
	[ -n "$loopdev" ] && losetup -d "$loopdev" 2>/dev/null
	loopdev=
	if [ -e "$btrfs_img_f" ]; then
		losetup -j "$btrfs_img_f" 2>/dev/null | cut -d: -f1 | while read -r l; do
			losetup -d "$l" 2>/dev/null
		done
	fi
}

drop_caches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

# run_bg SECONDS CMD...: run with a timeout as our tracked child, so a trap
# can stop it; returns its status
run_bg() {
	local t=$1 rc
	shift
	timeout -k 30 "$t" "$@" 8>&- 9>&- &
	child_pid=$!
	wait "$child_pid"
	rc=$?
	child_pid=
	return "$rc"
}

load1() { cut -d' ' -f1 /proc/loadavg; }

# phys_of FS PATH: "physical logical method" for a file or a directory tree
phys_of() {
	local fs=$1 p=$2 phys logical line
	case $fs in
	plain | passthrough*) # passthrough_ll reports the host file's st_blocks
		if [ -d "$p" ]; then
			phys=$(du -sB1 "$p" | cut -f1)
			logical=$(du -sb --apparent-size "$p" | cut -f1)
		else
			read -r phys logical < <(stat -c '%b %s' "$p")
			phys=$((phys * 512))
		fi
		echo "$phys $logical du"
		;;
	btrfs)
		btrfs filesystem sync "$btrfs_mnt" >/dev/null 2>&1 || sync -f "$btrfs_mnt"
		if [ -d "$p" ]; then logical=$(du -sb --apparent-size "$p" | cut -f1)
		else logical=$(stat -c %s "$p"); fi
		if [ "$btrfs_method" = compsize ]; then
			line=$(compsize -b "$p" 2>/dev/null | awk '$1 == "TOTAL" { print $3 }')
			echo "${line:-0} $logical compsize"
		else
			# whole-filesystem estimate: only the benchmark's files live there
			phys=$(btrfs filesystem df -b "$btrfs_mnt" | awk -F'used=' '/^Data/ { print $2 + 0 }')
			logical=$(du -sb --apparent-size "$btrfs_mnt" | cut -f1)
			echo "$phys $logical btrfs-df-estimate"
		fi
		;;
	csdfs-*)
		phys=$(getfattr --only-values -n user.csdfs.physical "$p" 2>/dev/null)
		logical=$(getfattr --only-values -n user.csdfs.logical "$p" 2>/dev/null)
		echo "${phys:-0} ${logical:-0} xattr"
		;;
	esac
}

# csdfs_mount FS: mount the volume (or, for a passthrough peer, its
# passthrough_ll build over its host directory) with a foreground daemon we
# can wait for
csdfs_mount() {
	local fs=$1 m=${mnt_of[$1]} i
	case $fs in
	passthrough*)
		"$pt_tmp/$(pt_bin_of "$fs")" -f -o "source=$(pt_src_of "$fs"),$pt_opts" "$m" >>"$logs/csdfs-$fs.log" 2>&1 8>&- 9>&- & ;;
	*)
		"$bin/csdfs" -f "$dir/$fs.vol" "$m" >>"$logs/csdfs-$fs.log" 2>&1 8>&- 9>&- & ;;
	esac
	daemon_pid[$fs]=$!
	for ((i = 0; i < 100; i++)); do
		is_mounted "$m" && return 0
		kill -0 "${daemon_pid[$fs]}" 2>/dev/null || { say "csdfs ($fs) exited: $(tail -n 3 "$logs/csdfs-$fs.log")"; return 1; }
		sleep 0.1
	done
	say "csdfs ($fs) did not mount within 10 s"
	return 1
}

# fs_alive FS: is it still mounted and (csdfs) its daemon running? A csdfs
# daemon found dead is reported (results.json "events", table.txt) and the
# volume mounted again, so that the remaining cells still run.
fs_alive() {
	local fs=$1 rc msg
	[ -z "${fs_dead[$fs]:-}" ] || return 1
	case $fs in
	csdfs-* | passthrough*)
		if ! kill -0 "${daemon_pid[$fs]}" 2>/dev/null || ! is_mounted "${mnt_of[$fs]}"; then
			if kill -0 "${daemon_pid[$fs]}" 2>/dev/null; then
				msg="mount vanished while its daemon runs"
			else
				wait "${daemon_pid[$fs]}" 2>/dev/null
				rc=$?
				msg="daemon exited with status $rc$( [ "$rc" -gt 128 ] && echo " (signal $((rc - 128)))")"
			fi
			msg="$(date +%T) $fs: csdfs $msg; log $logs/csdfs-$fs.log: $(tail -n 2 "$logs/csdfs-$fs.log" | tr '\n' ' ')"
			say "ERROR: $msg"
			jq -nc --arg m "$msg" '{event: $m}' >>"$events"
			fusermount3 -u -z "${mnt_of[$fs]}" 2>/dev/null
			kill -0 "${daemon_pid[$fs]}" 2>/dev/null && kill -KILL "${daemon_pid[$fs]}" 2>/dev/null
			if csdfs_mount "$fs"; then
				say "$fs: volume mounted again"
				jq -nc --arg m "$(date +%T) $fs: volume mounted again (the cells after this use the remounted volume)" \
					'{event: $m}' >>"$events"
			else
				fs_dead[$fs]="csdfs daemon died and the volume would not mount again (log: $logs/csdfs-$fs.log)"
				jq -nc --arg m "$(date +%T) $fs: ${fs_dead[$fs]}" '{event: $m}' >>"$events"
				return 1
			fi
		fi ;;
	btrfs)
		is_mounted "$btrfs_mnt" || { fs_dead[$fs]="btrfs mount vanished"; return 1; } ;;
	esac
	return 0
}

# pt_build: compile libfuse's passthrough_ll from the example source
# Debian's libfuse3-dev installs, into a new temporary pt_tmp (the caller's
# cleanup removes it), twice: as it is (the passthrough peer) and with one
# change (passthrough-od): passthrough_ll opens the host file with the
# caller's flags, so InnoDB's O_DIRECT reaches the host with libfuse's
# unaligned buffers and every write fails with EINVAL; passthrough_od drops
# O_DIRECT from the host open only (the kernel's FUSE side still does direct
# I/O for the caller, the host file goes through the page cache as csdfs's
# container does), so InnoDB runs there with the flush method csdfs runs
# with. Sets pt_rev to what was built.
pt_build() {
	local f src n
	pt_tmp=$(mktemp -d /tmp/csdfs-bench-passthrough.XXXXXX) || die "cannot create a temporary directory"
	# it includes passthrough_helpers.h from beside it
	for f in passthrough_ll.c passthrough_helpers.h; do
		src=${pt_src_c%/*}/$f
		if [ -r "$src" ]; then cp "$src" "$pt_tmp/$f"
		else zcat "$src.gz" >"$pt_tmp/$f"; fi || die "cannot copy '$src' (libfuse3-dev)"
	done
	# the two opens of a file's data (lo_open, lo_create) clear O_NOFOLLOW
	# from the caller's flags; clear O_DIRECT there too
	sed 's/\(flags[^&]*\)& ~O_NOFOLLOW/\1\& ~(O_NOFOLLOW | O_DIRECT)/' \
		"$pt_tmp/passthrough_ll.c" >"$pt_tmp/passthrough_od.c" || die "cannot write '$pt_tmp/passthrough_od.c'"
	n=$(grep -c '~(O_NOFOLLOW | O_DIRECT)' "$pt_tmp/passthrough_od.c")
	[ "$n" = 2 ] || die "'$pt_src_c' has $n opens that clear O_NOFOLLOW, not the 2 (lo_open, lo_create) the passthrough-od peer changes"
	for f in passthrough_ll passthrough_od; do
		# shellcheck disable=SC2046 # pkg-config's words are separate arguments
		cc -O2 -o "$pt_tmp/$f" "$pt_tmp/$f.c" $(pkg-config --cflags --libs fuse3) \
			>"$logs/$f-build.log" 2>&1 ||
			die "cannot compile '$pt_tmp/$f.c': $(tail -n 3 "$logs/$f-build.log")"
	done
	pt_rev="$pt_src_c from libfuse3-dev $(dpkg-query -W -f '${Version}' libfuse3-dev 2>/dev/null), sha256 $(sha256sum "$pt_tmp/passthrough_ll.c" | cut -c1-16), cc -O2; options $pt_opts; passthrough-od: the same with O_DIRECT cleared from the host opens (lo_open, lo_create)"
}

# peers_mount FS: make FS (plain, btrfs, passthrough, passthrough-od, csdfs-lz4, csdfs-zstd1, csdfs-none)
# and mount it on ${mnt_of[FS]}
peers_mount() {
	local fs=$1 m
	m=${mnt_of[$fs]}
	case $fs in
	plain)
		mkdir -p "$m" || die "cannot create '$m'"
		;;
	btrfs)
		mkdir -p "$m"
		truncate -s "$btrfs_img" "$btrfs_img_f" || die "cannot create '$btrfs_img_f'"
		loopdev=$(losetup --find --show "$btrfs_img_f") || die "losetup failed"
		mkfs.btrfs -q -f "$loopdev" >"$logs/mkfs.btrfs.log" 2>&1 || die "mkfs.btrfs failed ($logs/mkfs.btrfs.log)"
		mount -o compress=zstd:1 "$loopdev" "$m" || die "cannot mount btrfs on '$m'"
		;;
	passthrough*)
		mkdir -p "$m" "$(pt_src_of "$fs")" || die "cannot create '$m' or '$(pt_src_of "$fs")'"
		csdfs_mount "$fs" || die "cannot mount $fs over '$(pt_src_of "$fs")'"
		;;
	csdfs-*)
		mkdir -p "$m"
		"$bin/csdfs-mkfs" --size "$vol_size" --codec "${codec_of[$fs]}" "$dir/$fs.vol" \
			>"$logs/mkfs-$fs.log" 2>&1 || die "csdfs-mkfs failed: $(cat "$logs/mkfs-$fs.log")"
		csdfs_mount "$fs" || die "cannot mount csdfs ($fs)"
		;;
	esac
}

# uring_apply: set the fuse module's enable_uring (uring_param) to what
# uring (on/off) asks, for every FUSE mount after this; sets transport to a
# description of it. The caller's cleanup writes uring_orig back.
uring_apply() {
	transport="/dev/fuse (read/writev)"
	if [ -w "$uring_param" ]; then
		echo "$([ "$uring" = on ] && echo Y || echo N)" >"$uring_param" || die "cannot set $uring_param"
		[ "$uring" = on ] && transport="io_uring (fuse.enable_uring=Y)"
	elif [ "$uring" = on ]; then
		say "this kernel has no FUSE over io_uring ($uring_param absent): csdfs serves /dev/fuse"
	fi
}

# csdfs_bin_copy: run a copy of csdfs and csdfs-mkfs from DIR/bin, so that
# a rebuild of the build directory during the run (the tree may be shared)
# cannot change what is measured halfway; sets csdfs_rev and bin
csdfs_bin_copy() {
	mkdir -p "$dir/bin" || die "cannot create '$dir/bin'"
	cp "$bin/csdfs" "$bin/csdfs-mkfs" "$dir/bin/" || die "cannot copy the csdfs binaries to '$dir/bin'"
	csdfs_rev="$(git -C "$root" rev-parse --short HEAD 2>/dev/null)$(git -C "$root" diff --quiet HEAD 2>/dev/null ||
		echo ' +uncommitted changes in the tree'); build/csdfs sha256 $(sha256sum "$dir/bin/csdfs" | cut -c1-16), built $(date -r "$bin/csdfs" +'%F %T')"
	bin=$dir/bin
}
