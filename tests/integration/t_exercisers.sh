#!/bin/bash
# t_exercisers: exercisers someone else wrote, from Debian's packages, on a
# real mount, so that our own tests are not the only judge of our code:
#   - fio with verify=crc32c: buffered random writes of mixed sizes, O_DIRECT
#     16 KiB writes through libaio at depth 8, writes through mmap, and
#     overwrites verified as they go (verify_backlog); every block read back
#     at the end of its job, then again from the daemon after a remount
#     (verify_only), and a control: a changed byte must fail that check;
#   - dbench's client load (the NetBench file operations) with 4 clients;
#   - stress-ng's file system stressors with --verify, all at once.
# Then the volume is unmounted and must be fsck clean.
. "$(dirname "$0")/lib.sh"

require_csdfs
require_tools fio dbench stress-ng
setup
mkfs_vol --size 2G
mount_vol || finish

# ---------- fio with verification ----------

FV=$MNT/fv
mkdir -p "$FV"
cat >"$WORK/verify.fio" <<EOF
[global]
directory=$FV
size=48m
verify=crc32c
verify_fatal=1
do_verify=1
refill_buffers=1
buffer_compress_percentage=50
buffer_compress_chunk=4k
fallocate=none
end_fsync=1

[buffered-mixed-sizes]
rw=randwrite
bsrange=512-128k
ioengine=psync

[direct-16k-aio]
rw=randwrite
bs=16k
direct=1
ioengine=libaio
iodepth=8

[mmap-4k]
rw=randwrite
bs=4k
ioengine=mmap

[backlog-overwrite]
rw=randwrite
bs=4k
ioengine=psync
verify_backlog=256
loops=2
EOF

# fio_verify LABEL [fio args]: one run of the job file as one check
fio_verify() {
	local label=$1 out
	shift
	out="$WORK/fio.$label.out"
	if bounded 300 fio "$WORK/verify.fio" --output="$out" "$@" >"$out.err" 2>&1 &&
		! grep -q 'verify failed' "$out" "$out.err"; then
		pass "fio $label: $(grep -c 'err= 0' "$out") jobs verified"
	else
		fail "fio $label"
		grep -hE 'err=|verify failed|Expected|Received' "$out" "$out.err" | head -n 12 |
			sed 's/^/    /'
	fi
}

log "[$((SECONDS - T_START)) s] fio: write and verify (4 jobs, 192 MiB)"
fio_verify "write+verify"
if [ $PLAIN = 0 ]; then
	remount || finish
	sync
	echo 3 >/proc/sys/vm/drop_caches 2>/dev/null
fi
log "[$((SECONDS - T_START)) s] fio: verify again$([ $PLAIN = 0 ] && echo ' after a remount')"
fio_verify "verify-only" --verify_only

# the control: one changed byte must be caught
printf 'changed' | dd of="$FV/direct-16k-aio.0.0" bs=1 seek=40000 conv=notrunc status=none
bounded 300 fio "$WORK/verify.fio" --verify_only --output="$WORK/fio.control.out" \
	>"$WORK/fio.control.err" 2>&1
rc=$?
if [ $rc != 0 ] && grep -q 'verify failed at file .*direct-16k-aio' \
	"$WORK/fio.control.out" "$WORK/fio.control.err"; then
	pass "fio verify_only catches a byte changed through the mount (exit $rc)"
else
	fail "fio verify_only missed a changed byte (exit $rc)"
fi

# ---------- dbench ----------

log "[$((SECONDS - T_START)) s] dbench: 4 clients, 15 s"
mkdir -p "$MNT/db"
bounded 180 dbench -D "$MNT/db" -t 15 4 >"$WORK/dbench.out" 2>&1
rc=$?
tput=$(awk '/^Throughput/ { print $2 " MB/s" }' "$WORK/dbench.out")
errs=$(grep -ciE 'error|failed to (open|create|write|read)|unexpected' "$WORK/dbench.out" |
	awk '{ print $1 }')
# dbench only warns when it cannot make its SysV barrier semaphore
errs=$((errs - $(grep -c 'barrier semaphore' "$WORK/dbench.out")))
if [ $rc = 0 ] && [ -n "$tput" ] && [ "$errs" = 0 ]; then
	pass "dbench 4 clients: $tput, no errors"
else
	fail "dbench (exit $rc, throughput '${tput:-none}', $errs error lines)"
	grep -iE 'error|failed|unexpected' "$WORK/dbench.out" | head -n 10 | sed 's/^/    /'
fi
rm -rf "$MNT/db"

# ---------- stress-ng ----------

log "[$((SECONDS - T_START)) s] stress-ng: file system stressors with --verify, 10 s"
mkdir -p "$MNT/sng"
bounded 300 stress-ng --temp-path "$MNT/sng" --timeout 10s --verify \
	--metrics-brief --hdd 2 --hdd-bytes 32m --fallocate 1 --fallocate-bytes 32m \
	--dentry 1 --dir 1 --rename 1 --link 1 --symlink 1 --seek 1 --seek-size 32m \
	--xattr 1 --lockf 1 --flock 1 --filename 1 --readahead 1 --readahead-bytes 32m \
	--sync-file 1 --sync-file-bytes 32m --copy-file 1 --copy-file-bytes 128m \
	--mmap 1 --mmap-file --mmap-bytes 16m >"$WORK/stress-ng.out" 2>&1
rc=$?
if [ $rc = 0 ] && grep -q 'successful run completed' "$WORK/stress-ng.out"; then
	pass "stress-ng: 16 file system stressors, 17 instances, verified"
else
	fail "stress-ng (exit $rc)"
	grep -E 'fail|error|FAIL|verif' "$WORK/stress-ng.out" | head -n 15 | sed 's/^/    /'
fi
rm -rf "$MNT/sng"

if [ $PLAIN = 0 ]; then
	umount_vol
	fsck_clean "after the exercisers"
fi
finish
