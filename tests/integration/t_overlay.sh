#!/bin/bash
# t_overlay: csdfs as the upper layer and work dir of a real overlayfs mount
# (a container engine's storage on a compressing drive; issue 18 point 4).
# The lower layer is a plain directory of the host. overlayfs refuses an
# upper layer on FUSE unless it has d_type, trusted.* xattrs and
# renameat2(RENAME_WHITEOUT) ("upper fs missing required features"). Checks:
#   - copy-up: a lower file written through the merged dir is copied whole
#     to the upper layer, the lower file stays as it was; a chmod copies up
#     too (metadata);
#   - whiteouts: rm of a lower file leaves a character device 0/0 in the
#     upper layer and the name is gone from the merged dir;
#   - opaque directories: rm -r of a lower directory and mkdir again gives
#     an upper directory with trusted.overlay.opaque=y, lower entries hidden;
#   - rename of a lower file: copy-up plus a whiteout at the old name
#     (RENAME_WHITEOUT); with redirect_dir=on,metacopy=on a renamed lower
#     directory gets trusted.overlay.redirect and a chmod copies up only
#     metadata (trusted.overlay.metacopy), data still read from the lower;
#   - after the overlay is unmounted and csdfs remounted, the upper layer is
#     intact and an overlay mounted on it again shows the same merged tree;
#     csdfs-fsck is clean.
# Skips (77) only without /dev/fuse, without root or without overlayfs.
. "$(dirname "$0")/lib.sh"

require_csdfs
require_tools getfattr stat cmp mount umount
[ "$(id -u)" = 0 ] || skip_test "mounting overlayfs needs root"
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null
grep -qw overlay /proc/filesystems || skip_test "overlayfs is not available (no overlay module)"
setup

LOWER=$WORK/lower
MERGED=$WORK/merged
# The overlay goes before csdfs's mount (lib.sh's cleanup then handles
# csdfs): the overlay pins the FUSE mount while it stands.
umount_overlay() {
	mountpoint -q "$MERGED" 2>/dev/null || return 0
	timeout -k 5 30 umount "$MERGED" 2>/dev/null || umount -l "$MERGED" 2>/dev/null
}
trap 'rc=$?; umount_overlay; (exit $rc); cleanup' EXIT

xv() { getfattr --absolute-names --only-values -n "$2" -- "$1" 2>/dev/null; }
kind() { stat -c '%F %t:%T' -- "$1" 2>&1; }

# mount_overlay UPPER WORK [OPTIONS]: overlay of $LOWER and UPPER at $MERGED
mount_overlay() {
	local out
	mkdir -p "$1" "$2" "$MERGED"
	if out=$(timeout -k 5 30 mount -t overlay overlay \
		-o "lowerdir=$LOWER,upperdir=$1,workdir=$2${3:+,$3}" "$MERGED" 2>&1); then
		pass "overlay mounted (upper and work dir on the tested fs${3:+, $3})"
		return 0
	fi
	fail "overlay mount${3:+ ($3)}: $out"
	dmesg 2>/dev/null | grep overlayfs | tail -n 5 | sed 's/^/    dmesg| /'
	return 1
}

mkfs_vol --size 512M
mount_vol || finish

# The lower layer, and a copy of it to compare against.
mkdir -p "$LOWER/dir/deep" "$LOWER/tree/sub"
{ seq 1 60000; head -c 200000 /dev/urandom; } >"$LOWER/big"
echo "to be removed" >"$LOWER/doomed"
echo "to be moved" >"$LOWER/movme"
printf '#!/bin/sh\necho run\n' >"$LOWER/script"
chmod 755 "$LOWER/script"
echo a >"$LOWER/dir/a"
echo b >"$LOWER/dir/deep/b"
echo t >"$LOWER/tree/sub/t"
seq 1 20000 >"$LOWER/meta"
cp -a "$LOWER" "$REF/lower"
UP=$MNT/upper

mount_overlay "$UP" "$MNT/work" || finish

# ---------- copy-up of data and of metadata ----------

echo "appended through the overlay" >>"$MERGED/big"
cat "$REF/lower/big" >"$REF/big"
echo "appended through the overlay" >>"$REF/big"
check_files_equal "merged file reads old and new data" "$REF/big" "$MERGED/big"
check_files_equal "copy-up: the upper layer holds the whole file" "$REF/big" "$UP/big"
check_files_equal "copy-up: the lower file is unchanged" "$REF/lower/big" "$LOWER/big"
chmod 700 "$MERGED/script"
check_eq "chmod through the overlay" 700 "$(stat -c %a "$MERGED/script")"
check_eq "metadata copy-up: the upper copy has the new mode" 700 "$(stat -c %a "$UP/script" 2>&1)"
check_files_equal "metadata copy-up: the upper copy has the data" "$REF/lower/script" "$UP/script"
check_eq "metadata copy-up: the lower mode is unchanged" 755 "$(stat -c %a "$LOWER/script")"

# ---------- whiteouts ----------

rm "$MERGED/doomed"
check_eq "rm of a lower file: a whiteout (char device 0/0) in the upper layer" \
	"character special file 0:0" "$(kind "$UP/doomed")"
check "rm of a lower file: the name is gone from the merged dir" \
	test ! -e "$MERGED/doomed"
check "rm of a lower file: not listed in the merged dir" \
	bash -c "! ls -a '$MERGED' | grep -qx doomed"
check "rm of a lower file: the lower file is still there" test -f "$LOWER/doomed"

# ---------- opaque directories ----------

rm -r "$MERGED/dir"
check "rm -r of a lower dir: gone from the merged dir" test ! -e "$MERGED/dir"
mkdir "$MERGED/dir"
check_eq "mkdir again: the upper dir is opaque" y "$(xv "$UP/dir" trusted.overlay.opaque)"
check_eq "mkdir again: the lower entries are hidden" "" "$(ls -A "$MERGED/dir")"
echo new >"$MERGED/dir/new"
check_eq "mkdir again: new entries show" "new" "$(ls -A "$MERGED/dir")"
check "mkdir again: the lower dir is untouched" test -f "$LOWER/dir/deep/b"

# ---------- rename of a lower file ----------

mv "$MERGED/movme" "$MERGED/moved"
check_files_equal "rename of a lower file: the new name has its data" \
	"$REF/lower/movme" "$MERGED/moved"
check "rename of a lower file: the old name is gone" test ! -e "$MERGED/movme"
check_eq "rename of a lower file: a whiteout at the old name (RENAME_WHITEOUT)" \
	"character special file 0:0" "$(kind "$UP/movme")"
check_files_equal "rename of a lower file: copied up to the upper layer" \
	"$REF/lower/movme" "$UP/moved"
check_eq "the merged dir lists what it should" "big dir meta moved script tree" \
	"$(ls "$MERGED" | tr '\n' ' ' | sed 's/ $//')"

umount_overlay
check "overlay unmounted" bash -c "! mountpoint -q '$MERGED'"

# ---------- redirect_dir and metacopy ----------

UP2=$MNT/upper2
if mount_overlay "$UP2" "$MNT/work2" redirect_dir=on,metacopy=on; then
	mv "$MERGED/tree" "$MERGED/tree2"
	check_eq "rename of a lower dir: redirect xattr on the upper dir" \
		"tree" "$(xv "$UP2/tree2" trusted.overlay.redirect | sed 's|^/||')"
	check_files_equal "rename of a lower dir: its lower contents show" \
		"$REF/lower/tree/sub/t" "$MERGED/tree2/sub/t"
	chmod 600 "$MERGED/meta"
	check "metacopy: chmod copies up metadata only" \
		bash -c "getfattr --absolute-names -m '^trusted.overlay.metacopy$' -d '$UP2/meta' 2>/dev/null | grep -q metacopy"
	size=$(stat -c %s "$LOWER/meta")
	check_eq "metacopy: the upper file has the full size" "$size" "$(stat -c %s "$UP2/meta")"
	check "metacopy: the upper file holds no data (zeros)" \
		cmp -s "$UP2/meta" <(head -c "$size" /dev/zero)
	check_files_equal "metacopy: the data still reads" "$REF/lower/meta" "$MERGED/meta"
	umount_overlay
fi

# ---------- the upper layer survives a remount of csdfs ----------

umount_vol || finish
fsck_clean "after the overlay"
mount_vol || finish
check_files_equal "remount: upper copy-up intact" "$REF/big" "$UP/big"
check_eq "remount: the whiteout is intact" "character special file 0:0" "$(kind "$UP/doomed")"
check_eq "remount: the opaque xattr is intact" y "$(xv "$UP/dir" trusted.overlay.opaque)"
if [ -d "$UP2" ]; then
	check_eq "remount: the redirect xattr is intact" "tree" \
		"$(xv "$UP2/tree2" trusted.overlay.redirect | sed 's|^/||')"
fi
if mount_overlay "$UP" "$MNT/work"; then
	check_files_equal "overlay again: copied-up file" "$REF/big" "$MERGED/big"
	check "overlay again: removed file stays removed" test ! -e "$MERGED/doomed"
	check_eq "overlay again: opaque dir" "new" "$(ls -A "$MERGED/dir")"
	check_files_equal "overlay again: renamed file" "$REF/lower/movme" "$MERGED/moved"
	umount_overlay
fi
check_files_equal "the lower layer is unchanged at the end" "$REF/lower/big" "$LOWER/big"
check "the lower tree is unchanged at the end" diff -r "$REF/lower" "$LOWER"
umount_vol
fsck_clean "at the end"
finish
