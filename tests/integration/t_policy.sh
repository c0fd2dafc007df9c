#!/bin/bash
# t_policy: codec and chunk-size policy (issue "Honest numbers", point 5).
# - user.csdfs.codec / chunk_size set on a directory are inherited by new
#   children, and user.csdfs.policy says where each value came from;
# - bad values are refused (EINVAL), chunk_size of a non-empty file EBUSY;
# - after a policy change, csdfs-recompress rewrites online only the chunks
#   that do not match, shows progress, leaves contents and mtime unchanged,
#   and the codec mix of the file and of its directory follows;
# - everything survives a remount and fsck is clean.
. "$(dirname "$0")/lib.sh"

[ $PLAIN = 1 ] && skip_test "policy attributes are csdfs's own (plain mode)"
require_csdfs
require_tools getfattr setfattr cmp stat
setup
RECOMPRESS=${CSDFS_RECOMPRESS:-$(dirname "$CSDFS_BIN")/csdfs-recompress}
[ -x "$RECOMPRESS" ] || die "csdfs-recompress not found at $RECOMPRESS"

xv() { getfattr --only-values -n "$2" -- "$1" 2>/dev/null; }
mkfs_vol --size 256M
mount_vol || finish

D=$MNT/d
mkdir "$D"
check "set codec lz4 on a directory" setfattr -n user.csdfs.codec -v lz4 "$D"
check "set chunk_size 64K on the directory" setfattr -n user.csdfs.chunk_size -v 65536 "$D"
check_eq "directory policy reads back as set" \
	"codec=lz4 (set) chunk_size=65536 (set)" "$(xv "$D" user.csdfs.policy)"
for f in /usr/share/common-licenses/*; do cat "$f"; done >"$WORK/text"
for _ in 1 2 3; do cat "$WORK/text"; done >"$WORK/text3"
cp "$WORK/text3" "$D/f"
check_eq "new file inherits the directory's policy" \
	"codec=lz4 (inherited) chunk_size=65536 (inherited)" "$(xv "$D/f" user.csdfs.policy)"
mix=$(xv "$D/f" user.csdfs.codec)
case $mix in lz4=*) pass "file codec mix is lz4 ($mix)" ;; *) fail "file codec mix: '$mix'" ;; esac
check_eq "a new subdirectory inherits too" "codec=lz4 (inherited) chunk_size=65536 (inherited)" \
	"$(mkdir "$D/sub" && xv "$D/sub" user.csdfs.policy)"

if setfattr -n user.csdfs.codec -v zstd:99 "$D/f" 2>/dev/null; then
	fail "codec zstd:99 accepted"
else
	pass "codec zstd:99 refused"
fi
if setfattr -n user.csdfs.chunk_size -v 3000 "$D" 2>/dev/null; then
	fail "chunk_size 3000 accepted"
else
	pass "chunk_size 3000 refused"
fi
if setfattr -n user.csdfs.chunk_size -v 16384 "$D/f" 2>/dev/null; then
	fail "chunk_size of a non-empty file changed"
else
	pass "chunk_size of a non-empty file refused"
fi
if setfattr -n user.csdfs.physical -v 1 "$D/f" 2>/dev/null; then
	fail "user.csdfs.physical written"
else
	pass "user.csdfs.physical is read-only"
fi

mtime=$(stat -c %Y.%y "$D/f")
phys0=$(xv "$D/f" user.csdfs.physical)
check "switch the file to zstd:9" setfattr -n user.csdfs.codec -v zstd:9 "$D/f"
check_eq "policy of the file now 'set'" "codec=zstd:9 (set) chunk_size=65536 (inherited)" \
	"$(xv "$D/f" user.csdfs.policy)"
left=$(xv "$D/f" user.csdfs.recompress)
if [ "${left:-0}" -gt 0 ]; then
	pass "$left chunks do not match the new policy"
else
	fail "no chunk to recompress after the policy change ('$left')"
fi
"$RECOMPRESS" "$D/f" >"$WORK/recompress.out" 2>&1
rc=$?
check_eq "csdfs-recompress exit status" 0 "$rc"
if grep -q "chunks rewritten" "$WORK/recompress.out"; then
	pass "csdfs-recompress shows progress"
else
	fail "csdfs-recompress printed: $(head -c 300 "$WORK/recompress.out")"
fi
check_eq "no chunk left to recompress" 0 "$(xv "$D/f" user.csdfs.recompress)"
mix=$(xv "$D/f" user.csdfs.codec)
case $mix in "zstd:9="*) pass "file codec mix is now zstd:9 ($mix)" ;; *) fail "codec mix after recompress: '$mix'" ;; esac
check_files_equal "contents unchanged by recompress" "$WORK/text3" "$D/f"
check_eq "mtime unchanged by recompress" "$mtime" "$(stat -c %Y.%y "$D/f")"
phys1=$(xv "$D/f" user.csdfs.physical)
if [ "$phys1" -le "$phys0" ]; then
	pass "zstd:9 is no larger than lz4 ($phys0 -> $phys1 bytes)"
else
	fail "zstd:9 larger than lz4 ($phys0 -> $phys1)"
fi
case $(xv "$D" user.csdfs.codec) in
*"zstd:9="*) pass "directory codec mix follows ($(xv "$D" user.csdfs.codec))" ;;
*) fail "directory codec mix: '$(xv "$D" user.csdfs.codec)'" ;;
esac
"$RECOMPRESS" "$MNT/nonexistent" >/dev/null 2>&1
check_eq "csdfs-recompress on a missing path fails" 1 "$?"

remount || finish
check_eq "policy survives a remount" "codec=zstd:9 (set) chunk_size=65536 (inherited)" \
	"$(xv "$D/f" user.csdfs.policy)"
check_files_equal "contents after remount" "$WORK/text3" "$D/f"
umount_vol
fsck_clean "after policy changes and recompress"
finish
