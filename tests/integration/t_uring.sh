#!/bin/bash
# t_uring: FUSE requests over io_uring (Linux >= 6.14 with the fuse module's
# enable_uring parameter; csdfs uses it whenever the kernel offers it).
# Checks that the daemon really serves through the per-CPU rings (its log,
# its ring threads, the number of requests that came over them), that data
# written through them verifies byte for byte (fio crc32c: buffered and
# O_DIRECT, 4 KiB..1 MiB, so the largest request and reply fill a whole
# ring buffer, with fsyncs), that names, attributes and xattrs work, that
# requests blocked in fsync do not hold up readers, and that the daemon
# exits promptly on unmount and on SIGTERM under load. Then the same data
# read back with -o nouring and with the kernel parameter off.
. "$(dirname "$0")/lib.sh"

require_csdfs
[ $PLAIN = 1 ] && skip_test "io_uring is a csdfs transport; nothing to test on a plain directory"
PARAM=/sys/module/fuse/parameters/enable_uring
[ -e "$PARAM" ] || skip_test "this kernel has no FUSE over io_uring ($PARAM absent; needs Linux >= 6.14)"
[ -w "$PARAM" ] || skip_test "changing $PARAM needs root"
require_tools fio getfattr setfattr
setup
ORIG=$(cat "$PARAM")
# the parameter is the kernel's, not ours: put it back however we end
CLEANUP_HOOKS+=("echo $ORIG >$PARAM")
echo Y >"$PARAM"
mkfs_vol --size 2G
mount_vol || finish

check_grep_i "the daemon serves over io_uring" 'serving FUSE requests over io_uring' "$WORK/daemon.log"
# the kernel wants a queue for every possible CPU (hot-pluggable ones too)
possible=$(($(tr ',' '\n' </sys/devices/system/cpu/possible | sed 's/.*-//' | sort -n | tail -n 1) + 1))
online=$(nproc)
rings=$(ps -L -o comm= -p "$DAEMON_PID" | grep -c '^csdfs-ring')
queues=$(ps -L -o comm= -p "$DAEMON_PID" | sed -n 's/^csdfs-ring//p' | sort -u | wc -l)
check_eq "one ring queue per possible CPU ($possible), each with threads" "$possible" "$queues"
check "at least 4 ring threads per online CPU's queue ($rings in all, $online CPUs online)" \
	test "$rings" -ge $((4 * online))

# fio verify: write with crc32c headers, read back and check every block
verify_job() { # NAME ARGS...
	local name=$1
	shift
	# each job its own file (fio's default name: NAME.JOB.0)
	if bounded 180 fio --name="$name" --directory="$MNT" --size=48m \
		--verify=crc32c --verify_fatal=1 --buffer_compress_percentage=50 --refill_buffers \
		"$@" >"$WORK/$name.out" 2>&1; then
		pass "fio verify $name: $(grep -oE '(READ|WRITE): bw=[^ ]+' "$WORK/$name.out" | tr '\n' ' ')"
	else
		fail "fio verify $name (exit $?)"
		sed 's/^/    /' "$WORK/$name.out" | tail -n 20
	fi
}
log "[$((SECONDS - T_START)) s] data through the rings"
verify_job buffered-mixed --rw=randwrite --bsrange=4k-1m --numjobs=1 --fsync=16
verify_job direct-1m --rw=write --bs=1m --direct=1 --ioengine=libaio --iodepth=8
verify_job direct-4k-4jobs --rw=randwrite --bs=4k --direct=1 --ioengine=psync --numjobs=4 \
	--size=8m --fsync=64

# the same bytes re-read after the page cache is gone
sync
echo 3 >/proc/sys/vm/drop_caches
if bounded 120 fio --name=buffered-mixed --directory="$MNT" \
	--size=48m --rw=randwrite --bsrange=4k-1m --verify=crc32c --verify_only \
	--buffer_compress_percentage=50 --refill_buffers >"$WORK/reverify.out" 2>&1; then
	pass "re-verify after dropping caches"
else
	fail "re-verify after dropping caches"
	tail -n 20 "$WORK/reverify.out" | sed 's/^/    /'
fi

# names, attributes, extended attributes: every other opcode
log "[$((SECONDS - T_START)) s] namespace through the rings"
mkdir -p "$MNT/ns/sub" &&
	for i in $(seq 1 200); do printf 'file %d\n' "$i" >"$MNT/ns/f$i"; done
ln -s f1 "$MNT/ns/link" && ln "$MNT/ns/f2" "$MNT/ns/hard" && mv "$MNT/ns/f3" "$MNT/ns/sub/moved"
setfattr -n user.k -v value "$MNT/ns/f4" && chmod 640 "$MNT/ns/f5" && rm "$MNT/ns/f6"
check_eq "200 files, a symlink, a hard link, a rename, an unlink" 201 "$(ls "$MNT/ns" | wc -l)"
check_eq "readlink" f1 "$(readlink "$MNT/ns/link")"
check_eq "hard link content and count" "file 2 2" "$(cat "$MNT/ns/hard") $(stat -c %h "$MNT/ns/f2")"
check_eq "renamed file" "file 3" "$(cat "$MNT/ns/sub/moved")"
check_eq "xattr" value "$(getfattr --only-values -n user.k "$MNT/ns/f4")"
check_eq "mode" 640 "$(stat -c %a "$MNT/ns/f5")"

# readers must not wait behind writers blocked in fsync (each ring thread
# has one buffer; a thread in a request takes no other)
log "[$((SECONDS - T_START)) s] fsync writers beside readers"
bounded 120 fio --name=fs --directory="$MNT" --filename=fsyncs.dat --size=16m --rw=randwrite --bs=16k \
	--direct=1 --fsync=1 --numjobs=4 --time_based --runtime=5 >"$WORK/fsw.out" 2>&1 &
fsw=$!
if bounded 60 fio --name=r --directory="$MNT" --filename=direct-1m.0.0 --rw=randread --bs=16k \
	--direct=1 --numjobs=2 --time_based --runtime=4 --size=48m --group_reporting \
	--output-format=terse >"$WORK/rd.out" 2>&1; then
	pass "random reads beside 4 fsync writers: $(awk -F';' '{print $8}' "$WORK/rd.out" | head -n 1) IOPS"
else
	fail "random reads beside 4 fsync writers"
fi
wait "$fsw"
check "4 fsync writers finished" test $? = 0

log "[$((SECONDS - T_START)) s] unmount"
umount_vol || finish
served=$(sed -n 's/^csdfs: \([0-9]*\) requests came over io_uring/\1/p' "$WORK/daemon.log" | tail -n 1)
check "requests came over io_uring (${served:-none})" test "${served:-0}" -gt 10000
fsck_clean "after io_uring"

log "[$((SECONDS - T_START)) s] -o nouring, and the kernel parameter off"
: >"$WORK/daemon.log"
mount_vol -o nouring || finish
if bounded 120 fio --name=direct-1m --directory="$MNT" --filename=direct-1m.0.0 --size=48m \
	--rw=write --bs=1m --verify=crc32c --verify_only --buffer_compress_percentage=50 \
	--refill_buffers >"$WORK/nouring.out" 2>&1; then
	pass "-o nouring: data written over io_uring verifies"
else
	fail "-o nouring: data written over io_uring verifies"
fi
check_eq "-o nouring: no ring threads" 0 "$(ps -L -o comm= -p "$DAEMON_PID" | grep -c '^csdfs-ring')"
umount_vol || finish
check "-o nouring: nothing came over io_uring" sh -c "! grep -q 'over io_uring' '$WORK/daemon.log'"
echo N >"$PARAM"
: >"$WORK/daemon.log"
mount_vol -o uring || finish
check_eq "parameter off: content" "file 7" "$(cat "$MNT/ns/f7")"
check_grep_i "parameter off, -o uring: the daemon says why not" 'does not offer FUSE over io_uring' \
	"$WORK/daemon.log"
umount_vol || finish

# SIGTERM while readers keep every ring busy: the daemon must still end
log "[$((SECONDS - T_START)) s] SIGTERM under load"
echo Y >"$PARAM"
mount_vol || finish
bounded 60 fio --name=r --directory="$MNT" --filename=direct-1m.0.0 --rw=randread --bs=16k \
	--direct=1 --numjobs=4 --time_based --runtime=30 --size=48m >/dev/null 2>&1 &
load=$!
sleep 2
kill -TERM "$DAEMON_PID"
if wait_daemon_exit 15; then
	pass "SIGTERM under load: the daemon exited (status $DAEMON_RC)"
else
	fail "SIGTERM under load: the daemon still runs after 15 s"
fi
DAEMON_PID=
wait "$load" 2>/dev/null
fusermount3 -u -z "$MNT" 2>/dev/null
fsck_clean "after SIGTERM"
finish
