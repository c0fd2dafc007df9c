#!/bin/bash
# t_concurrency: concurrent writers and readers with byte verification
# (rw_stress), on one shared file (4 writers interleaved 4 KiB by 4 KiB, so
# every 16 KiB chunk is rewritten by all of them at once), on one file with
# O_DIRECT and 32 KiB ownership groups, and on separate files; 4 O_DIRECT
# writers of one file, verified by fio, reaching csdfs in parallel; then several
# processes creating, renaming, linking and removing names in one directory
# while another lists it. The final states are verified again after a remount.
. "$(dirname "$0")/lib.sh"

require_csdfs
setup
RW=$(helper rw_stress) || exit 1
mkfs_vol --size 2G
mount_vol || finish

# stress LABEL DIR ARGS...: one rw_stress run as one check
stress() {
	local label=$1 dir=$2 out
	shift 2
	mkdir -p "$dir"
	out="$WORK/rw.$label.out"
	if bounded 180 "$RW" "$@" "$dir" >"$out" 2>&1; then
		pass "$label: $(grep -E '^rw_stress: (same|diff|namespace)' "$out" | head -n 1 | sed 's/^rw_stress: //')$(grep -oE ', [0-9]+ transient' "$out" | sed 's/$/ torn buffered reads healed on re-read/')"
	else
		fail "$label (exit $?)"
		sed 's/^/    /' "$out" | head -n 30
	fi
}

log "[$((SECONDS - T_START)) s] data: same file, 4 KiB interleaved owners, buffered"
stress same-file-interleaved "$MNT/s1" -w 4 -r 4 -t 3 -s 8 -m same -g 1 -S "$WORK/state.s1"
log "[$((SECONDS - T_START)) s] data: same file, O_DIRECT, 32 KiB groups"
stress same-file-direct "$MNT/s2" -w 4 -r 4 -t 3 -s 8 -m same -g 8 -D -S "$WORK/state.s2"
log "[$((SECONDS - T_START)) s] data: one file per writer, buffered"
stress different-files "$MNT/s3" -w 4 -r 4 -t 2 -s 8 -m diff -S "$WORK/state.s3"

# 4 random readers of one file nobody writes: every partly read chunk's
# rest goes to the kernel's page cache, which must never wait on a page
# another reader's READ holds (this hung within a second when the stores
# ran on the worker threads)
if command -v fio >/dev/null; then
	log "[$((SECONDS - T_START)) s] data: 4 random readers of one file, page-cache stores"
	bounded 60 fio --name=w --filename="$MNT/rr" --rw=write --bs=1M --size=64m \
		--buffer_compress_percentage=50 --refill_buffers --end_fsync=1 >"$WORK/rr.out" 2>&1
	for round in 1 2 3; do
		sync
		echo 3 >/proc/sys/vm/drop_caches 2>/dev/null
		if ! bounded 60 fio --name=r --filename="$MNT/rr" --rw=randread --bs=4k --size=64m \
			--runtime=3 --time_based --numjobs=4 --group_reporting >>"$WORK/rr.out" 2>&1; then
			break
		fi
	done
	check_eq "4 random readers, 3 rounds of 3 s: all finished" 3 "$round"
	[ "$round" = 3 ] || finish    # the mount is stuck: nothing more to learn
	rm -f "$MNT/rr"
else
	skip_check "4 random readers (fio missing)"
fi

# 4 O_DIRECT writers of one file, each in its own quarter: csdfs opens
# O_DIRECT files for parallel direct writes, so the kernel sends their
# writes together instead of one at a time under the inode's lock (the
# connection's count of requests in flight shows it); fio verifies every
# block it wrote
if command -v fio >/dev/null; then
	log "[$((SECONDS - T_START)) s] data: 4 O_DIRECT writers of one file, in parallel"
	bounded 60 fio --name=w --filename="$MNT/pw" --rw=write --bs=1M --size=64m \
		--buffer_compress_percentage=50 --refill_buffers --end_fsync=1 >"$WORK/pw.out" 2>&1
	# the connection's counters live in fusectl, which a fresh machine
	# may not have mounted yet
	fusectl_mounted || true
	inflight=/sys/fs/fuse/connections/$(stat -c %d "$MNT")/waiting
	(
		peak=0
		while [ ! -e "$WORK/pw.done" ]; do
			v=$(cat "$inflight" 2>/dev/null || echo 0)
			[ "$v" -gt "$peak" ] && peak=$v && echo "$peak" >"$WORK/pw.peak"
			sleep 0.02
		done
	) &
	sampler=$!
	BG_PIDS+=($sampler)
	bounded 120 fio --name=pp --filename="$MNT/pw" --size=16m --offset_increment=16m \
		--numjobs=4 --bs=16k --rw=randwrite --direct=1 --ioengine=psync --number_ios=1000 \
		--buffer_compress_percentage=50 --refill_buffers --output="$WORK/pp.out"
	touch "$WORK/pw.done"
	wait "$sampler"
	if [ $PLAIN = 1 ]; then
		skip_check "requests in flight (plain directory)"
	elif [ ! -e "$inflight" ]; then
		skip_check "requests in flight (no fusectl: not root, or it cannot be mounted)"
	else
		# only writes run then: one at a time would be 1, now and then 2
		peak=$(cat "$WORK/pw.peak" 2>/dev/null || echo 0)
		check "4 O_DIRECT writers of one file: up to $peak requests in flight at once (>= 3)" \
			test "$peak" -ge 3
	fi
	check "4 O_DIRECT writers of one file: fio verify=crc32c" \
		bounded 180 fio --name=pd --filename="$MNT/pw" --size=16m --offset_increment=16m \
		--numjobs=4 --bs=16k --rw=randwrite --direct=1 --ioengine=psync --number_ios=1000 \
		--verify=crc32c --do_verify=1 --verify_fatal=1 --verify_state_save=0 \
		--buffer_compress_percentage=50 --refill_buffers \
		--output="$WORK/pd.out"
	rm -f "$MNT/pw"
else
	skip_check "4 O_DIRECT writers of one file (fio missing)"
fi

log "[$((SECONDS - T_START)) s] namespace: 4 processes in one directory"
stress namespace "$MNT/ns" -P 4 -t 3
(cd "$MNT/ns" && ls -A | LC_ALL=C sort) >"$WORK/ns.before"
(cd "$MNT/ns" && find . -type f -exec md5sum {} + | LC_ALL=C sort) >"$WORK/ns.md5.before"

# a shell-level race too: 4 writers append lines to one O_APPEND file
log "[$((SECONDS - T_START)) s] namespace: concurrent O_APPEND writers"
apids=()
for p in 1 2 3 4; do
	(for ((i = 0; i < 500; i++)); do echo "writer $p line $i"; done >>"$MNT/ns_append.log") &
	apids+=($!)
	BG_PIDS+=($!)
done
wait "${apids[@]}"	# not a bare wait: the daemon is our child too
n=$(wc -l <"$MNT/ns_append.log")
bad=$(grep -cvE '^writer [1-4] line [0-9]+$' "$MNT/ns_append.log")
check_eq "O_APPEND from 4 processes: 2000 whole lines" "2000 0" "$n $bad"

if [ $PLAIN = 0 ]; then
	log "[$((SECONDS - T_START)) s] remount and verify final states"
	remount || finish
fi
for s in s1 s2 s3; do
	if bounded 120 "$RW" -V "$WORK/state.$s" "$MNT/$s" >"$WORK/rw.verify.$s.out" 2>&1; then
		pass "final content of $s verified after remount"
	else
		fail "final content of $s after remount"
		sed 's/^/    /' "$WORK/rw.verify.$s.out" | head -n 20
	fi
done
(cd "$MNT/ns" && ls -A | LC_ALL=C sort) >"$WORK/ns.after"
(cd "$MNT/ns" && find . -type f -exec md5sum {} + | LC_ALL=C sort) >"$WORK/ns.md5.after"
if cmp -s "$WORK/ns.before" "$WORK/ns.after" && cmp -s "$WORK/ns.md5.before" "$WORK/ns.md5.after"; then
	pass "namespace directory ($(wc -l <"$WORK/ns.after") entries) unchanged after remount"
else
	fail "namespace directory changed across remount"
	diff "$WORK/ns.before" "$WORK/ns.after" | head -n 10 | sed 's/^/    /'
fi

if [ $PLAIN = 0 ]; then
	umount_vol
	fsck_clean "after concurrency tests"
fi
finish
