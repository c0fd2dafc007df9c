#!/bin/bash
# t_badinput: bad input is refused clearly, changing nothing (SPEC G6, §2).
# csdfs-mkfs with bad options (non-zero exit, exactly one stderr line, nothing
# created), overwrite refusal and --force; csdfs on a missing, foreign,
# truncated, corrupted, newer-version, LMDB-damaged or already-mounted volume
# (refused, non-zero, a message with the right keyword, no daemon left, no
# mount, the container untouched); csdfs-fsck usage (16), missing volume (8),
# mounted volume (8), corrupt superblock (4 or 8, no silent repair).
# Message keywords are matched case-insensitively; see README.md.
. "$(dirname "$0")/lib.sh"

[ $PLAIN = 1 ] && skip_test "every check here is about csdfs itself (plain mode)"
require_csdfs
require_tools od dd truncate md5sum timeout
setup

MB=(--size 64M)

# nlines FILE: number of lines (a last line without newline counts)
nlines() { grep -c '' "$1"; }

# --- csdfs-mkfs ---

# mkfs_refused LABEL ARGS...: must fail, one stderr line, create nothing
mkfs_refused() {
	local label=$1 target=$WORK/badvol rc
	shift
	rm -rf "$target"
	timeout -k 5 60 "$CSDFS_MKFS" "$@" "$target" >"$WORK/out" 2>"$WORK/err"
	rc=$?
	if [ $rc = 0 ]; then
		fail "mkfs $label: accepted (exit 0)"
	elif [ $rc -ge 124 ]; then
		fail "mkfs $label: exit $rc (crash or hang)"
	elif [ "$(nlines "$WORK/err")" != 1 ]; then
		fail "mkfs $label: $(nlines "$WORK/err") lines on stderr, expected exactly 1: $(head -c 300 "$WORK/err" | tr '\n' '|')"
	else
		pass "mkfs $label: refused (exit $rc): $(cat "$WORK/err")"
	fi
	if [ -e "$target" ]; then
		fail "mkfs $label: created '$target' anyway"
		rm -rf "$target"
	fi
}

mkfs_refused "--size abc" --size abc
mkfs_refused "--size 0" --size 0
mkfs_refused "--size -5G" --size -5G
mkfs_refused "--size 10Q" --size 10Q
mkfs_refused "--size 16E (more than 2^64 bytes)" --size 16E
mkfs_refused "--size 5P (above the 4P maximum)" --size 5P
check_grep_i "mkfs --size 5P: names the maximum" 'too large \(maximum 4P\)' "$WORK/err"
# every size up to the maximum parses; these fail only for the host's room
# (a preallocation of 1P to 4P fails at once), leaving nothing behind
for s in 1P 4P 4PiB 4096T; do
	mkfs_refused "--size $s (more than the host holds)" --size $s
	check_grep_i "mkfs --size $s: a host-space refusal, not a bad size" \
		'host filesystem (has no room|cannot hold)' "$WORK/err"
done
mkfs_refused "--size 4K (too small to hold a volume)" --size 4K
mkfs_refused "--codec gzip" --size 64M --codec gzip
mkfs_refused "--codec zstd:99" --size 64M --codec zstd:99
mkfs_refused "--codec zstd:abc" --size 64M --codec zstd:abc
mkfs_refused "--codec lz4:65" --size 64M --codec lz4:65
check_grep_i "mkfs --codec lz4:65: names the valid codecs" \
	"unknown codec 'lz4:65' \(use zstd, .*lz4:N \(N 1\.\.64" "$WORK/err"
mkfs_refused "--chunk 3K" --size 64M --chunk 3K
mkfs_refused "--chunk 2K" --size 64M --chunk 2K
mkfs_refused "--chunk 256K" --size 64M --chunk 256K
mkfs_refused "--chunk abc" --size 64M --chunk abc
mkfs_refused "--bogus-option" --size 64M --bogus-option
if timeout 30 "$CSDFS_MKFS" >/dev/null 2>&1; then
	fail "mkfs without VOLUME: accepted"
else
	pass "mkfs without VOLUME: refused"
fi

for b in "$CSDFS_MKFS" "$CSDFS_BIN" "$CSDFS_FSCK"; do
	if timeout 30 "$b" --help >"$WORK/out" 2>&1 && [ -s "$WORK/out" ]; then
		pass "${b##*/} --help: exit 0 with text"
	else
		fail "${b##*/} --help: exit $? / $(wc -c <"$WORK/out") bytes"
	fi
done

# a good volume, then overwrite refusal and --force
GOOD=$WORK/good
if "$CSDFS_MKFS" "${MB[@]}" "$GOOD" >"$WORK/out" 2>&1; then
	pass "mkfs ${MB[*]} good volume"
else
	MB=(--size 256M)
	"$CSDFS_MKFS" "${MB[@]}" "$GOOD" >"$WORK/out" 2>&1 || die "cannot make any volume: $(cat "$WORK/out")"
	pass "mkfs ${MB[*]} good volume (64M refused)"
fi
check_eq "volume directory is private (0700)" 700 "$(stat -c %a "$GOOD")"
check_eq "container is private (0600)" 600 "$(stat -c %a "$GOOD/container")"
perms=$(find "$GOOD/meta" -type f -printf '%m\n' | sort -u | tr '\n' ' ')
check_eq "LMDB files are private (0600)" "600 " "$perms"
csize=$(stat -c %s "$GOOD/container")
cblocks=$(stat -c %b "$GOOD/container")
if [ $((cblocks * 512)) -ge $((csize * 9 / 10)) ]; then
	pass "container is preallocated ($((cblocks * 512)) of $csize bytes allocated)"
else
	fail "container is not preallocated ($((cblocks * 512)) of $csize bytes allocated)"
fi

# fingerprint VOLDIR: what must not change when a command refuses
fingerprint() {
	{
		stat -c '%s' "$1/container" 2>/dev/null
		head -c 1048576 "$1/container" 2>/dev/null | md5sum
		find "$1" -type f ! -name '*lock*' -print0 2>/dev/null | sort -z |
			xargs -0 -r md5sum 2>/dev/null | grep -v container
	} | md5sum
}

fp=$(fingerprint "$GOOD")
timeout 60 "$CSDFS_MKFS" "${MB[@]}" "$GOOD" >"$WORK/out" 2>"$WORK/err"
rc=$?
if [ $rc != 0 ] && [ "$(nlines "$WORK/err")" = 1 ]; then
	pass "mkfs over an existing volume without --force: refused (exit $rc): $(cat "$WORK/err")"
else
	fail "mkfs over an existing volume without --force: exit $rc, stderr: $(tr '\n' '|' <"$WORK/err")"
fi
check_grep_i "mkfs overwrite refusal names the problem" 'already|exist|force' "$WORK/err"
check_eq "existing volume untouched by the refused mkfs" "$fp" "$(fingerprint "$GOOD")"
mkdir "$WORK/notvol"
echo keep >"$WORK/notvol/precious"
if timeout 60 "$CSDFS_MKFS" "${MB[@]}" "$WORK/notvol" >/dev/null 2>"$WORK/err"; then
	fail "mkfs on a non-empty non-volume directory: accepted"
else
	pass "mkfs on a non-empty non-volume directory: refused: $(head -n 1 "$WORK/err")"
fi
check_eq "non-volume directory untouched" "keep" "$(cat "$WORK/notvol/precious" 2>&1)"
check_eq "non-volume directory gained nothing" "precious" "$(ls -A "$WORK/notvol" | tr '\n' ' ' | sed 's/ $//')"
check "mkfs --force over an existing volume" timeout 120 "$CSDFS_MKFS" --force "${MB[@]}" "$GOOD"

# a mkfs that fails for lack of host space leaves nothing behind: next to
# nothing on a tiny tmpfs host, a new directory and an existing empty one
if [ "$(id -u)" = 0 ] && mkdir "$WORK/tiny" && mount -t tmpfs -o size=40m none "$WORK/tiny"; then
	timeout 60 "$CSDFS_MKFS" --size 64M "$WORK/tiny/vol" >"$WORK/out" 2>"$WORK/err"
	rc=$?
	check_eq "mkfs --size 64M on a 40M host: exit 1 ($(head -n 1 "$WORK/err"))" 1 $rc
	check_eq "mkfs on a 40M host: one line on stderr" 1 "$(nlines "$WORK/err")"
	check_grep_i "mkfs on a 40M host: says the host has no room" 'host filesystem has no room' "$WORK/err"
	if [ -e "$WORK/tiny/vol" ]; then
		fail "mkfs on a 40M host: left '$WORK/tiny/vol' behind: $(ls -A "$WORK/tiny/vol" | tr '\n' ' ')"
	else
		pass "mkfs on a 40M host: left nothing behind"
	fi
	mkdir "$WORK/tiny/empty"
	timeout 60 "$CSDFS_MKFS" --size 64M "$WORK/tiny/empty" >"$WORK/out" 2>"$WORK/err"
	check_eq "mkfs into an existing empty directory on a 40M host: exit 1" 1 $?
	check_eq "the existing directory is left empty" "" "$(ls -A "$WORK/tiny/empty")"
	check_eq "host space is all given back" "$(df --output=used "$WORK/tiny" | tail -n 1 | tr -d ' ')" \
		"$(umount "$WORK/tiny" && mount -t tmpfs -o size=40m none "$WORK/tiny" &&
		   df --output=used "$WORK/tiny" | tail -n 1 | tr -d ' ')"
	umount "$WORK/tiny"
	# the same on a host that fits the second try: that mkfs must not take
	# the leftover of the first for a volume
	mount -t tmpfs -o size=100m none "$WORK/tiny"
	timeout 60 "$CSDFS_MKFS" --size 128M "$WORK/tiny/vol" >/dev/null 2>&1
	check_eq "mkfs --size 128M on a 100M host: exit 1" 1 $?
	check "then mkfs --size 64M of the same path succeeds" \
		timeout 60 "$CSDFS_MKFS" --size 64M "$WORK/tiny/vol"
	check "and that volume is fsck-clean" timeout 60 "$CSDFS_FSCK" "$WORK/tiny/vol"
	umount "$WORK/tiny"
else
	skip_check "mkfs on a tiny host: needs root and tmpfs"
fi

# --- csdfs: refused mounts ---

MNT2=$WORK/mnt2
mkdir -p "$MNT2"

# mount_refused LABEL REGEX VOLUME [MOUNTPOINT] [csdfs options...]
mount_refused() {
	local label=$1 re=$2 vol=$3 mnt=${4:-$MNT2} rc pids fp0
	shift 4 2>/dev/null || shift $#
	fp0=$(fingerprint "$vol")
	timeout -k 5 30 "$CSDFS_BIN" "$@" "$vol" "$mnt" >"$WORK/out" 2>"$WORK/err"
	rc=$?
	if [ $rc = 0 ]; then
		fail "mount $label: accepted (exit 0)"
	elif [ $rc -ge 124 ]; then
		fail "mount $label: exit $rc (crash or hang)"
	else
		pass "mount $label: refused (exit $rc)"
	fi
	if [ -s "$WORK/err" ]; then
		check_grep_i "mount $label: message matches /$re/" "$re" "$WORK/err"
	else
		fail "mount $label: nothing on stderr (stdout: $(head -c 200 "$WORK/out"))"
	fi
	log "    message: $(head -n 3 "$WORK/err" | tr '\n' '|')"
	if mountpoint -q "$mnt"; then
		fail "mount $label: $mnt is mounted anyway"
		fusermount3 -u -z "$mnt"
	fi
	sleep 0.2
	pids=$(daemons_using "$vol")
	if [ -n "$pids" ]; then
		fail "mount $label: a csdfs process is left running (pid $pids); killing it"
		for p in $pids; do kill -9 "$p" 2>/dev/null; done
	else
		pass "mount $label: no daemon left"
	fi
	# (a mounted volume's own daemon may legitimately write to it)
	if [ -e "$vol" ] && [ "$vol" != "$VOL" ] && [ "$fp0" != "$(fingerprint "$vol")" ]; then
		fail "mount $label: the volume's files changed"
	fi
}

# copy_good NAME: a fresh copy of the good volume
copy_good() {
	rm -rf "$WORK/$1"
	cp -a --sparse=always "$GOOD" "$WORK/$1"
	printf '%s\n' "$WORK/$1"
}

# put_byte FILE OFFSET VALUE(0-255)
put_byte() {
	printf "$(printf '\\%03o' "$3")" | dd of="$1" bs=1 seek="$2" count=1 conv=notrunc status=none
}
get_byte() { od -An -tu1 -j "$2" -N1 "$1" | tr -d ' '; }

mount_refused "missing volume" 'not found|no such|does not exist|missing|cannot open' "$WORK/nonexistent"

head -c 1048576 /dev/urandom >"$WORK/randfile"
mount_refused "a random file as volume" 'not a csdfs|not a volume|not a directory|magic|foreign|unrecogni' "$WORK/randfile"

v=$(copy_good foreign)
head -c "$(stat -c %s "$v/container")" /dev/urandom >"$v/container.new" && mv "$v/container.new" "$v/container"
chmod 600 "$v/container"
mount_refused "a volume whose container is random bytes" 'not a csdfs|not a volume|magic|foreign|unrecogni' "$v"

v=$(copy_good trunc)
truncate -s 1M "$v/container"
mount_refused "a truncated container (1 MiB of ${MB[1]})" 'truncat|too small|short|size' "$v"

v=$(copy_good trunc2)
truncate -s 100 "$v/container"
mount_refused "a container truncated inside the superblock (100 bytes)" 'truncat|too small|short|not a csdfs' "$v"

v=$(copy_good flip)
b=$(get_byte "$v/container" 20)
put_byte "$v/container" 20 $((b ^ 0xff))
mount_refused "a superblock with a flipped byte (offset 20, uuid)" 'checksum|corrupt|crc|mismatch' "$v"

v=$(copy_good flip2)
b=$(get_byte "$v/container" 200)
put_byte "$v/container" 200 $((b ^ 0x01))
mount_refused "a superblock with a flipped bit in reserved space (offset 200)" 'checksum|corrupt|crc|mismatch' "$v"

v=$(copy_good version)
ver=$(od -An -tu4 -j 8 -N4 "$v/container" | tr -d ' ')
nv=$((ver + 1))
put_byte "$v/container" 8 $((nv & 255))
put_byte "$v/container" 9 $(((nv >> 8) & 255))
put_byte "$v/container" 10 $(((nv >> 16) & 255))
put_byte "$v/container" 11 $(((nv >> 24) & 255))
check_eq "version u32 at offset 8 bumped" "$nv" "$(od -An -tu4 -j 8 -N4 "$v/container" | tr -d ' ')"
mount_refused "a newer format version ($ver -> $nv)" 'version|newer|unsupported' "$v"

v=$(copy_good lmdb)
for f in "$v"/meta/*.mdb; do
	[ -f "$f" ] && head -c "$(stat -c %s "$f")" /dev/urandom >"$f.new" && mv "$f.new" "$f" && chmod 600 "$f"
done
mount_refused "an LMDB environment overwritten with random bytes" '.' "$v"

v=$(copy_good nometa)
rm -rf "$v/meta"
mount_refused "a volume without its meta/ directory" 'meta|lmdb|missing|not found|no such|corrupt|not a csdfs' "$v"

mount_refused "a bad option (-o commit_ms=abc)" 'commit_ms|invalid|bad|option' "$GOOD" "$MNT2" -o commit_ms=abc

# option_refused OPTION REGEX: -o OPTION is refused in one line that names
# the option and its range (REGEX), mounting nothing
option_refused() {
	mount_refused "-o $1" "$2" "$GOOD" "$MNT2" -o "$1"
	check_eq "-o $1: one line on stderr" 1 "$(nlines "$WORK/err")"
	check_grep_i "-o $1: the line starts with 'csdfs: '" '^csdfs: ' "$WORK/err"
}
COMMIT_RANGE="bad value .* for -o commit_ms \\(a whole number from 1 to 60000 ms\\)"
THREADS_RANGE="bad value .* for -o max_threads \\(a whole number from 1 to 256 threads\\)"
for v in -1 0 abc 60001 4294967296 1.5 ' 5' 99999999999999999999999; do
	option_refused "commit_ms=$v" "'$v' for -o commit_ms|$COMMIT_RANGE"
	check_grep_i "-o commit_ms=$v: names the range" "$COMMIT_RANGE" "$WORK/err"
done
for v in -3 0 257 abc; do
	option_refused "max_threads=$v" "$THREADS_RANGE"
done
option_refused "cache_size=-1" "bad value '-1' for -o cache_size \\(a size from 0 to 64G"
option_refused "cache_size=65G" "bad value '65G' for -o cache_size \\(a size from 0 to 64G"
option_refused "readahead=1Z" "bad value '1Z' for -o readahead \\(a size from 0 to 64M"
option_refused "readahead=65M" "bad value '65M' for -o readahead \\(a size from 0 to 64M"
option_refused "max_dirty=17G" "bad value '17G' for -o max_dirty \\(a size from 0 to 16G"
option_refused "max_dirty=-1" "bad value '-1' for -o max_dirty \\(a size from 0 to 16G"
option_refused "bogus" "^csdfs: unknown option 'bogus' \\(csdfs --help"
option_refused "bogus,nonsense" "^csdfs: unknown option 'bogus,nonsense'"
option_refused "commit_ms" "^csdfs: unknown option 'commit_ms'"
option_refused "strictatime" "^csdfs: -o strictatime is not supported: csdfs updates access times as relatime does"
option_refused "norelatime" "^csdfs: -o norelatime is not supported"

# --- already mounted ---
VOL=$GOOD
mount_vol || finish
echo "still works" >"$MNT/probe"
mount_refused "the same volume a second time" 'already mounted|in use|busy|locked|already' "$GOOD" "$MNT2"
check_eq "first mount still works after the refused second mount" "still works" "$(cat "$MNT/probe" 2>&1)"
timeout 60 "$CSDFS_FSCK" "$GOOD" >"$WORK/out" 2>&1
check_eq "csdfs-fsck on a mounted volume exits 8" 8 $?
umount_vol
fsck_clean "good volume after the refused attempts"

# --- csdfs-fsck exit codes ---
timeout 30 "$CSDFS_FSCK" >/dev/null 2>&1
check_eq "csdfs-fsck without arguments exits 16 (usage)" 16 $?
timeout 30 "$CSDFS_FSCK" --bogus-option "$GOOD" >/dev/null 2>&1
check_eq "csdfs-fsck --bogus-option exits 16 (usage)" 16 $?
timeout 30 "$CSDFS_FSCK" "$WORK/nonexistent" >/dev/null 2>&1
check_eq "csdfs-fsck on a missing volume exits 8" 8 $?
v=$WORK/flip
fp=$(fingerprint "$v")
timeout 60 "$CSDFS_FSCK" "$v" >"$WORK/out" 2>&1
rc=$?
if [ $rc = 4 ] || [ $rc = 8 ]; then
	pass "csdfs-fsck on a corrupt superblock exits $rc (4 or 8)"
else
	fail "csdfs-fsck on a corrupt superblock exits $rc, expected 4 or 8: $(head -n 2 "$WORK/out" | tr '\n' '|')"
fi
check_eq "csdfs-fsck without --repair changed nothing" "$fp" "$(fingerprint "$v")"

pids=$(daemons_using "$WORK")
check_eq "no csdfs process left for this test's volumes" "" "$pids"
finish
