#!/bin/bash
# t_policy: codec and chunk-size policy (issue "Honest numbers", point 5).
# - user.csdfs.codec / chunk_size set on a directory are inherited by new
#   children, and user.csdfs.policy says where each value came from;
# - bad values are refused (EINVAL), chunk_size of a non-empty file EBUSY;
# - after a policy change, csdfs-recompress rewrites online only the chunks
#   that do not match, shows progress, leaves contents and mtime unchanged,
#   and the codec mix of the file and of its directory follows;
# - issue 21: a directory's policy reaches the files beneath it that have
#   none of their own, existing ones included (csdfs-recompress -r DIR
#   rewrites them), through subdirectories and after a rename; files with
#   their own setting keep it; setfattr -x clears a setting (back to the
#   parent's, up to the volume default); a bad value is EINVAL plus one
#   daemon log line naming the valid values; csdfs-stat --policy names the
#   directory a value comes from;
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
DINO=$(stat -c %i "$D")
check "set codec lz4 on a directory" setfattr -n user.csdfs.codec -v lz4 "$D"
check "set chunk_size 64K on the directory" setfattr -n user.csdfs.chunk_size -v 65536 "$D"
check_eq "directory policy reads back as set" \
	"codec=lz4 (set) chunk_size=65536 (set)" "$(xv "$D" user.csdfs.policy)"
for f in /usr/share/common-licenses/*; do cat "$f"; done >"$WORK/text"
for _ in 1 2 3; do cat "$WORK/text"; done >"$WORK/text3"
cp "$WORK/text3" "$D/f"
check_eq "new file inherits the directory's policy" \
	"codec=lz4 (inherited from inode $DINO) chunk_size=65536 (inherited from inode $DINO)" \
	"$(xv "$D/f" user.csdfs.policy)"
mix=$(xv "$D/f" user.csdfs.codec)
case $mix in lz4=*) pass "file codec mix is lz4 ($mix)" ;; *) fail "file codec mix: '$mix'" ;; esac
check_eq "a new subdirectory inherits too" \
	"codec=lz4 (inherited from inode $DINO) chunk_size=65536 (inherited from inode $DINO)" \
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
check_eq "policy of the file now 'set'" \
	"codec=zstd:9 (set) chunk_size=65536 (inherited from inode $DINO)" \
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

# ---------- issue 21: the directory's current policy, existing files included
STAT=${CSDFS_STAT:-$(dirname "$CSDFS_BIN")/csdfs-stat}
mix_is() { # NAME FILE CODEC: every stored byte of FILE is CODEC
	local mix
	mix=$(xv "$2" user.csdfs.codec)
	case $mix in "$3="*" "* | "") fail "$1: codec mix '$mix'" ;;
	"$3="*) pass "$1 ($mix)" ;; *) fail "$1: codec mix '$mix'" ;; esac
}
P=$MNT/p
mkdir -p "$P/sub" "$MNT/q"
PINO=$(stat -c %i "$P")
cp "$WORK/text" "$P/old"
cp "$WORK/text" "$P/sub/deep"
cp "$WORK/text" "$P/own"
check "own setting on one file" setfattr -n user.csdfs.codec -v lz4 "$P/own"
cp "$WORK/text" "$P/own2"   # written before its own setting: must be rewritten
check "own setting after writing" setfattr -n user.csdfs.codec -v none "$P/own2"
mix_is "existing file written with the volume default" "$P/old" zstd:1
: >"$P/early"   # created before the directory's setting, written after it
check "set zstd:9 on the directory after its files were written" \
	setfattr -n user.csdfs.codec -v zstd:9 "$P"
check_eq "an existing file follows its directory" \
	"codec=zstd:9 (inherited from inode $PINO) chunk_size=16384 (default)" "$(xv "$P/old" user.csdfs.policy)"
check_eq "...also in a subdirectory" \
	"codec=zstd:9 (inherited from inode $PINO) chunk_size=16384 (default)" \
	"$(xv "$P/sub/deep" user.csdfs.policy)"
"$RECOMPRESS" -r "$P" >"$WORK/recompress-r.out" 2>&1
check_eq "csdfs-recompress -r DIR exit status" 0 "$?"
if grep -q "old: [1-9][0-9]* chunks rewritten" "$WORK/recompress-r.out"; then
	pass "csdfs-recompress -r rewrote the existing file"
else
	fail "csdfs-recompress -r: $(tr '\n' '|' <"$WORK/recompress-r.out" | head -c 600)"
fi
mix_is "existing file now zstd:9" "$P/old" zstd:9
mix_is "file in the subdirectory now zstd:9" "$P/sub/deep" zstd:9
mix_is "a file with its own setting keeps it" "$P/own" lz4
mix_is "a file set after writing follows its own setting" "$P/own2" none
check_files_equal "contents after recompress -r" "$WORK/text" "$P/old"
cp "$WORK/text" "$P/new"
mix_is "a new file under the directory uses its policy" "$P/new" zstd:9
cat "$WORK/text" >"$P/early"
mix_is "a file made before the setting, written after it, uses it" "$P/early" zstd:9

check "setfattr -x clears the directory's codec" setfattr -x user.csdfs.codec "$P"
check_eq "cleared: back to the volume default" \
	"codec=zstd:1 (default) chunk_size=16384 (default)" "$(xv "$P/old" user.csdfs.policy)"
check_eq "recompress sees the fallback: every chunk" "$(xv "$P/old" user.csdfs.extents)" \
	"$(xv "$P/old" user.csdfs.recompress)"
if setfattr -x user.csdfs.codec "$P" 2>"$WORK/x2.err"; then
	fail "clearing an unset policy succeeded"
else
	check_grep_i "clearing an unset policy: ENODATA" "no such attribute" "$WORK/x2.err"
fi
check "setfattr -x clears a file's own codec" setfattr -x user.csdfs.codec "$P/own"
check_eq "the file falls back" "codec=zstd:1 (default) chunk_size=16384 (default)" \
	"$(xv "$P/own" user.csdfs.policy)"
check "chunk_size 32K on the directory" setfattr -n user.csdfs.chunk_size -v 32K "$P"
check "clear it again" setfattr -x user.csdfs.chunk_size "$P"
: >"$P/empty"
check_eq "a new file after the clear gets the default chunk size" 16384 \
	"$(xv "$P/empty" user.csdfs.chunk_size)"
if setfattr -x user.csdfs.physical "$P/old" 2>/dev/null; then
	fail "removing user.csdfs.physical succeeded"
else
	pass "user.csdfs.physical cannot be removed"
fi

# A rename moves a file under its new directory's policy.
check "set lz4 on another directory" setfattr -n user.csdfs.codec -v lz4 "$MNT/q"
QINO=$(stat -c %i "$MNT/q")
mv "$P/old" "$MNT/q/moved"
check_eq "a renamed file follows its new directory" \
	"codec=lz4 (inherited from inode $QINO) chunk_size=16384 (default)" \
	"$(xv "$MNT/q/moved" user.csdfs.policy)"
check_eq "csdfs-stat --policy names the directory" \
	"$MNT/q/moved: codec=lz4 (inherited from '$MNT/q' (inode $QINO)) chunk_size=16384 (default)" \
	"$("$STAT" --policy "$MNT/q/moved" 2>&1)"
"$STAT" --policy -r "$P" >"$WORK/policy-r.out" 2>&1
check_eq "csdfs-stat --policy -r: one line per entry" \
	"$(find "$P" | wc -l)" "$(grep -c ': codec=' "$WORK/policy-r.out")"
check_grep_i "csdfs-stat --policy -r shows 'set'" "/own2: codec=none \(set\)" "$WORK/policy-r.out"

# Bad values: EINVAL and one log line naming the valid ones.
for bad in zstd:20 zstd:-8 zstd: zst lz4:65 lz4:-1 " lz4" zstd:+3; do
	if setfattr -n user.csdfs.codec -v "$bad" "$P" 2>"$WORK/bad.err"; then
		fail "codec '$bad' accepted"
	else
		check_grep_i "codec '$bad' refused with EINVAL" "invalid argument" "$WORK/bad.err"
	fi
done
check_grep_i "the daemon names the valid codecs" \
	"'zstd:20' is not a codec for 'user.csdfs.codec' on inode $PINO: use zstd, zstd:N \(N -7\.\.19; 0 is zstd's default level\), lz4, lz4:N \(N 1\.\.64, lz4's acceleration: higher is faster and larger\) or none" \
	"$WORK/daemon.log"
setfattr -n user.csdfs.chunk_size -v 5000 "$P" 2>/dev/null
check_grep_i "the daemon names the valid chunk sizes" \
	"'5000' is not a chunk size for 'user.csdfs.chunk_size' on inode $PINO: use a power of two" \
	"$WORK/daemon.log"
check "zstd:0 is zstd's default level" setfattr -n user.csdfs.codec -v zstd:0 "$P"
check_eq "zstd:0 reads back as zstd" "codec=zstd (set) chunk_size=16384 (default)" \
	"$(xv "$P" user.csdfs.policy)"
check "lz4:0 is lz4's default acceleration" setfattr -n user.csdfs.codec -v lz4:0 "$P/own2"
check_eq "lz4:0 reads back as lz4" "codec=lz4 (set) chunk_size=16384 (default)" \
	"$(xv "$P/own2" user.csdfs.policy)"
rm -f "$P/own2"
touch "$P/own2"
check "lz4:2 is accepted" setfattr -n user.csdfs.codec -v lz4:2 "$P/own2"
check_eq "lz4:2 reads back as lz4:2" "codec=lz4:2 (set) chunk_size=16384 (default)" \
	"$(xv "$P/own2" user.csdfs.policy)"
cat "$WORK/text" >"$P/own2"
mix_is "a file written with lz4:2 records it per chunk" "$P/own2" lz4:2
check_files_equal "contents written with lz4:2" "$WORK/text" "$P/own2"

remount || finish
check_eq "a cleared policy stays cleared after a remount" \
	"codec=zstd (inherited from inode $PINO) chunk_size=16384 (default)" \
	"$(xv "$P/own" user.csdfs.policy)"
check_eq "policy survives a remount" \
	"codec=zstd:9 (set) chunk_size=65536 (inherited from inode $DINO)" \
	"$(xv "$D/f" user.csdfs.policy)"
check_files_equal "contents after remount" "$WORK/text3" "$D/f"
umount_vol
fsck_clean "after policy changes and recompress"
finish
