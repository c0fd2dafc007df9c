#!/bin/bash
# t_persist: everything survives an unmount and a daemon crash (SPEC G2, G4).
# Builds a tree with data, holes, directories, hard links, symlinks, a fifo, a
# device node, xattrs, odd modes, foreign owners and explicit timestamps;
# records it (find -printf, md5sums, xattrs, inode numbers and ctimes);
# unmount + remount and compare; change things, make them durable, kill -9
# the daemon, remount and compare; then crash again with unsynced writes and
# an open unlinked file: the volume must still mount, fsck clean, the durable
# tree intact; last, an fsync of one file must cover the writes to another
# that came before it (G2's order). csdfs-fsck must be clean after every stop.
. "$(dirname "$0")/lib.sh"

require_csdfs
require_tools find md5sum getfattr setfattr mkfifo truncate
setup
mkfs_vol --size 1G
mount_vol || finish
ROOT_USER=0
[ "$(id -u)" = 0 ] && ROOT_USER=1

T=$MNT/tree

build_tree() {
	mkdir -p "$T"/a/b/c "$T"/d "$T"/e "$T"/empty_dir
	head -c 100000 /dev/urandom >"$T/a/rand"
	head -c 3000000 /dev/zero >"$T/a/zeros"
	yes 'persist me, please' | head -c 500000 >"$T/a/text"
	: >"$T/a/empty"
	head -c 1048583 /dev/urandom >"$T/a/b/c/deep"
	printf x >"$T/a/b/tiny"
	truncate -s 100M "$T/e/sparse"
	printf 'middle of nowhere' | dd of="$T/e/sparse" bs=1 seek=50000000 conv=notrunc status=none
	ln "$T/a/rand" "$T/d/rand.link"
	ln "$T/a/rand" "$T/d/rand.link2"
	ln -s ../a/rand "$T/d/sym"
	ln -s /nonexistent/target "$T/d/dangling"
	ln -s b "$T/a/dirlink"
	mkfifo -m 0640 "$T/d/fifo"
	[ $ROOT_USER = 1 ] && mknod -m 0600 "$T/d/null" c 1 3
	setfattr -n user.color -v blue "$T/a/rand"
	setfattr -n user.bin -v 0x00ff10ee "$T/a/text"
	setfattr -n user.empty "$T/a/empty"
	setfattr -n user.dir -v yes "$T/a/b"
	setfattr -n user.big -v "0x$(head -c 2000 /dev/urandom | od -An -tx1 -v | tr -d ' \n')" "$T/a/b/c/deep"
	chmod 0640 "$T/a/text"
	chmod 4755 "$T/a/b/tiny"
	chmod 1777 "$T/e"
	chmod 0751 "$T/a/b"
	chmod 0000 "$T/a/zeros"
	if [ $ROOT_USER = 1 ]; then
		chown 1234:5678 "$T/a/text"
		chown -h 1234:5678 "$T/d/sym"
		chown 4321:8765 "$T/a/b"
	fi
	touch -d '2001-02-03 04:05:06.123456789' "$T/a/rand"
	touch -d '1969-07-20 20:17:40' "$T/a/text"
	touch -h -d '1999-12-31 23:59:59.5' "$T/d/sym"
	touch -d '2038-01-19 03:14:08' "$T/e/sparse"
	# directories last: creating entries moves their mtime
	touch -d '2010-01-01 00:00:00' "$T/a/b/c" "$T/a/b" "$T/d" "$T/empty_dir"
}

# record NAME: everything we promise to keep, one file per aspect
record() {
	local r=$WORK/rec.$1
	(cd "$MNT" && find tree -printf '%p|%y|%m|%U|%G|%n|%s|%T@|%l\n' | LC_ALL=C sort) >"$r.meta"
	(cd "$MNT" && find tree -printf '%p|%i|%C@\n' | LC_ALL=C sort) >"$r.inoctime"
	(cd "$MNT" && find tree -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum) >"$r.md5" 2>&1
	(cd "$MNT" && find tree ! -type l -print0 | LC_ALL=C sort -z |
		xargs -0 getfattr -h -d -m '^user\.' -e hex 2>&1) >"$r.xattr"
	(cd "$MNT" && find tree -type l -printf '%p -> %l\n' | LC_ALL=C sort) >"$r.links"
}

# compare A B LABEL
compare() {
	local aspect what
	for aspect in meta md5 xattr links inoctime; do
		case $aspect in
		meta) what="type, mode, owner, nlink, size, mtime of $(wc -l <"$WORK/rec.$1.meta") entries" ;;
		md5) what="file contents (md5)" ;;
		xattr) what="user xattrs" ;;
		links) what="symlink targets" ;;
		inoctime) what="inode numbers and ctimes" ;;
		esac
		if diff -u "$WORK/rec.$1.$aspect" "$WORK/rec.$2.$aspect" >"$WORK/diff"; then
			pass "$3: $what unchanged"
		else
			fail "$3: $what changed"
			grep '^[-+][^-+]' "$WORK/diff" | head -n 12 | sed 's/^/    /'
		fi
	done
}

# make_durable: sync, then fsync every file and directory (the kernel does not
# forward sync(2)/syncfs(2) to a FUSE daemon, so fsync is the contract here)
make_durable() {
	sync
	(cd "$MNT" && find tree \( -type f -o -type d \) -print0 | xargs -0 sync --) &&
		sync "$MNT"
}

log "[$((SECONDS - T_START)) s] build tree"
build_tree
check "tree built" test -f "$T/a/b/c/deep"
make_durable
record r0
n=$(wc -l <"$WORK/rec.r0.meta")
m=$(wc -l <"$WORK/rec.r0.md5")
x=$(grep -c '^user\.' "$WORK/rec.r0.xattr")
if [ "$n" -ge 20 ] && [ "$m" -ge 9 ] && [ "$x" -ge 5 ]; then
	pass "recorded $n entries, $m file checksums, $x xattrs"
else
	fail "recording the tree failed: $n entries, $m checksums, $x xattrs"
fi

log "[$((SECONDS - T_START)) s] clean unmount and remount"
if [ $PLAIN = 0 ]; then
	umount_vol
	fsck_clean "after clean unmount"
	mount_vol || finish
fi
record r1
compare r0 r1 "after remount"
if [ "$(head -c 17 <(dd if="$T/e/sparse" bs=1 skip=50000000 count=17 status=none))" = "middle of nowhere" ] &&
	[ -z "$(head -c 1000000 "$T/e/sparse" | tr -d '\0')" ]; then
	pass "sparse file: data in the middle, zeros around it"
else
	fail "sparse file content wrong after remount"
fi

log "[$((SECONDS - T_START)) s] changes, made durable, then kill -9"
yes 'appended after remount' | head -c 70000 >>"$T/a/text"
mv "$T/a/b/tiny" "$T/e/tiny2"
rm "$T/d/rand.link2"
setfattr -n user.color -v green "$T/a/rand"
setfattr -x user.bin "$T/a/text"
chmod 0600 "$T/a/rand"
[ $ROOT_USER = 1 ] && chown 42:43 "$T/e/sparse"
touch -d '2020-02-02 02:02:02.222' "$T/a/b/c/deep"
mkdir "$T/new"
for i in 1 2 3 4 5; do head -c $((i * 7000)) /dev/urandom >"$T/new/n$i"; done
dd if=/dev/urandom of="$T/a/b/c/deep" bs=4096 seek=7 count=3 conv=notrunc status=none
truncate -s 12345 "$T/a/zeros"
touch -d '2011-11-11 11:11:11' "$T/new" "$T/d"
make_durable
record r2
if [ $PLAIN = 0 ]; then
	kill9
	fsck_clean "after kill -9 of a synced volume (before remount)"
	mount_vol || finish
fi
record r3
compare r2 r3 "after kill -9"

log "[$((SECONDS - T_START)) s] crash with unsynced writes and an open unlinked file"
mkdir "$MNT/unsynced"
for i in $(seq 1 40); do
	head -c 4096 /dev/urandom >"$WORK/u$i"
	cp "$WORK/u$i" "$MNT/unsynced/u$i"
done
exec 7<>"$MNT/orphan"
head -c 4194304 /dev/urandom >&7
sync "$MNT/orphan"
rm "$MNT/orphan"
sync "$MNT"
if [ $PLAIN = 0 ]; then
	kill9
	exec 7>&-
	fsck_clean "after kill -9 with unsynced writes and an open unlinked file (before remount)"
	mount_vol || finish
else
	exec 7>&-
fi
record r4
compare r2 r4 "durable tree after a crash with unsynced writes"
# each 4 KiB file written by one write: absent, empty or complete (SPEC G3)
bad=0
present=0
for i in $(seq 1 40); do
	f=$MNT/unsynced/u$i
	[ -e "$f" ] || continue
	present=$((present + 1))
	s=$(stat -c %s "$f")
	if [ "$s" != 0 ] && ! cmp -s "$f" "$WORK/u$i"; then
		bad=$((bad + 1))
		echo "    u$i: size $s, content neither empty nor what was written"
	fi
done
check_eq "unsynced 4 KiB files are absent, empty or complete ($present of 40 present)" 0 "$bad"
check "open unlinked file is gone after the crash" test ! -e "$MNT/orphan"

# G2's order: an fsync of one file also makes durable every write to any
# file that the daemon completed before the synced file's last write (it
# completes an O_DIRECT write before the write returns). InnoDB's
# innodb_flush_method=O_DIRECT_NO_FSYNC (examples/mysql/my.cnf) rests on it:
# its 16 KiB page writes are never fsynced; the redo log's write and fsync,
# which come after them, must cover them. commit_ms=60000: no group commit
# makes anything durable behind the test's back.
if [ $PLAIN = 0 ]; then
	log "[$((SECONDS - T_START)) s] an fsync covers the earlier writes of other files"
	remount -o commit_ms=60000 || finish
	O=$MNT/order
	mkdir "$O"
	head -c 131072 /dev/zero >"$O/space"
	head -c 16384 /dev/zero >"$O/log"
	sync "$O/space" "$O/log" "$O"
	head -c 16384 /dev/urandom >"$WORK/page.before"
	head -c 16384 /dev/urandom >"$WORK/page.after"
	head -c 4096 /dev/urandom >"$WORK/redo"
	dd if="$WORK/page.before" of="$O/space" bs=16k seek=2 oflag=direct conv=notrunc status=none
	dd if="$WORK/redo" of="$O/log" bs=4k oflag=direct conv=notrunc,fdatasync status=none
	dd if="$WORK/page.after" of="$O/space" bs=16k seek=5 oflag=direct conv=notrunc status=none
	kill9
	fsck_clean "after kill -9 behind an fsync of another file (before remount)"
	mount_vol || finish
	check "the page written before the other file's fdatasync survived the crash" \
		cmp -s -n 16384 -i 32768:0 "$O/space" "$WORK/page.before"
	check "the synced file itself survived the crash" cmp -s -n 4096 "$O/log" "$WORK/redo"
	# counter-check: the kill does lose a write no fsync covered, so the
	# first check could fail
	check "the page written after that fdatasync is lost (the crash drops unsynced writes)" \
		cmp -s -n 16384 -i 81920 "$O/space" /dev/zero
fi

if [ $PLAIN = 0 ]; then
	umount_vol
	fsck_clean "final (orphan reclaimed)"
fi
finish
