#!/bin/bash
# t_manyfiles: one directory with 50 000 files (CSDFS_MANYFILES overrides):
# create, exact listing, stat and read a sample, remount, list again, delete
# everything (find -delete reads the directory while removing from it), the
# directory must end up empty and removable, fsck clean.
. "$(dirname "$0")/lib.sh"

require_csdfs
require_tools seq xargs touch find shuf
setup
mkfs_vol --size 1G
mount_vol || finish

N=${CSDFS_MANYFILES:-50000}
D=$MNT/many
mkdir "$D"
seq -f 'f%06g' 1 "$N" >"$WORK/names"

phase() { log "[$((SECONDS - T_START)) s] $*"; }

phase "create $N empty files"
if (cd "$D" && bounded 240 xargs -a "$WORK/names" touch); then
	pass "create $N files with touch"
else
	fail "create $N files with touch"
fi
phase "write content into every 100th file"
for ((i = 1; i <= N; i += 100)); do
	printf 'content of file %d\n' $i >"$D/$(printf 'f%06d' $i)"
done

# expected_size INDEX
expected_size() {
	if (($1 % 100 == 1)); then
		printf 'content of file %d\n' "$1" | wc -c
	else
		echo 0
	fi
}

verify_listing() {
	local label=$1
	phase "list ($label)"
	local n
	n=$(ls "$D" | wc -l)
	check_eq "ls | wc -l ($label)" "$N" "$n"
	if ls -f "$D" | grep -v '^\.\.\?$' | LC_ALL=C sort | cmp -s - "$WORK/names"; then
		pass "listing has exactly the created names ($label)"
	else
		fail "listing differs from the created names ($label):"
		ls -f "$D" | grep -v '^\.\.\?$' | LC_ALL=C sort | diff - "$WORK/names" | head -n 10 | sed 's/^/    /'
	fi
	n=$(find "$D" -mindepth 1 -type f | wc -l)
	check_eq "find -type f count ($label)" "$N" "$n"
	# stat and read a random sample
	local bad=0 i name sz
	for i in $(shuf -i 1-"$N" -n 200 --random-source=<(yes)) 1 $N; do
		name=$(printf 'f%06d' "$i")
		sz=$(stat -c %s "$D/$name" 2>&1) || {
			bad=$((bad + 1))
			echo "    stat $name: $sz"
			continue
		}
		if [ "$sz" != "$(expected_size "$i")" ]; then
			bad=$((bad + 1))
			echo "    $name: size $sz, expected $(expected_size "$i")"
		elif ((i % 100 == 1)) && [ "$(cat "$D/$name")" != "content of file $i" ]; then
			bad=$((bad + 1))
			echo "    $name: wrong content"
		fi
	done
	check_eq "stat + read of 202 sampled files ($label)" 0 "$bad"
	if stat "$D/f999999x" >/dev/null 2>&1; then
		fail "lookup of a missing name succeeds ($label)"
	else
		pass "lookup of a missing name fails ($label)"
	fi
}

verify_listing "after create"
if [ $PLAIN = 0 ]; then
	phase "remount"
	remount || finish
	verify_listing "after remount"
fi

phase "delete all"
if bounded 240 find "$D" -mindepth 1 -delete; then
	pass "find -delete of $N files"
else
	fail "find -delete of $N files"
fi
check_eq "directory empty after deleting everything" "0" "$(ls -A "$D" | wc -l)"
check "rmdir of the emptied directory" rmdir "$D"
check_eq "mount root empty" "" "$(ls -A "$MNT")"
if [ $PLAIN = 0 ]; then
	umount_vol
	fsck_clean "after creating and deleting $N files"
fi
phase "done"
finish
