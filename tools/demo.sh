#!/usr/bin/env bash
# Show csdfs at work: build it, make a volume, mount it, fill it with a few
# hundred MiB of ordinary data and print what it costs on disk.
#
# Safe to run again: an existing volume is reused, a mounted one too, and
# the sample data is replaced. Unmount with: fusermount3 -u MOUNTPOINT
#
# Environment (defaults in brackets):
#   CSDFS_DEMO_VOL      volume directory        [<repo>/demo/vol]
#   CSDFS_DEMO_MNT      mount point             [<repo>/demo/mnt]
#   CSDFS_DEMO_SIZE     container size          [2G]
#   CSDFS_DEMO_CODEC    codec for the volume    [zstd:1]
#   CSDFS_DEMO_DATA_MB  MiB of /usr files       [300]
#   CSDFS_DEMO_FIO_MB   MiB of fio data per file, 0 = none  [128]
#   CSDFS_SKIP_DEPS=1   do not run tools/deps.sh
set -euo pipefail

prog=demo.sh
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Paths given by the caller are relative to where they called from.
abspath() {
	case $1 in
	/*) printf '%s\n' "$1" ;;
	*) printf '%s\n' "$PWD/$1" ;;
	esac
}
vol=$(abspath "${CSDFS_DEMO_VOL:-$root/demo/vol}")
mnt=$(abspath "${CSDFS_DEMO_MNT:-$root/demo/mnt}")
cd "$root"
size=${CSDFS_DEMO_SIZE:-2G}
codec=${CSDFS_DEMO_CODEC:-zstd:1}
data_mb=${CSDFS_DEMO_DATA_MB:-300}
fio_mb=${CSDFS_DEMO_FIO_MB:-128}
build=$root/build

die() {
	echo "$prog: $*" >&2
	exit 1
}
step() { printf '\n== %s\n' "$*"; }

case "$data_mb$fio_mb" in
*[!0-9]*) die "CSDFS_DEMO_DATA_MB and CSDFS_DEMO_FIO_MB must be whole numbers" ;;
esac

# --- dependencies and build -------------------------------------------------
if [ "${CSDFS_SKIP_DEPS:-0}" != 1 ]; then
	step "dependencies (tools/deps.sh demo)"
	bash tools/deps.sh demo
fi

step "build ($build/)"
log=$(mktemp "${TMPDIR:-/tmp}/csdfs-demo-build.XXXXXX")
if [ ! -f "$build/meson-private/coredata.dat" ]; then
	rm -rf "$build"
	meson setup "$build" >"$log" 2>&1 ||
		{ tail -n 30 "$log" >&2; die "'meson setup $build' failed (log: $log)"; }
fi
ninja -C "$build" >"$log" 2>&1 ||
	{ tail -n 30 "$log" >&2; die "'ninja -C $build' failed (log: $log)"; }
rm -f "$log"
csdfs=$build/csdfs
mkfs=$build/csdfs-mkfs
for b in "$csdfs" "$mkfs"; do
	[ -x "$b" ] || die "'$b' was not built"
done
echo "built $csdfs, $mkfs, $build/csdfs-fsck"

# --- volume and mount -------------------------------------------------------
step "volume $vol"
if [ -e "$vol/container" ]; then
	echo "'$vol' already holds a volume: reusing it" \
		"(remove it with 'rm -rf $vol' after unmounting for a fresh one)"
else
	mkdir -p "$(dirname "$vol")"
	"$mkfs" --size "$size" --codec "$codec" "$vol" ||
		die "csdfs-mkfs --size $size --codec $codec '$vol' failed"
fi

step "mount at $mnt"
mkdir -p "$mnt"
if mountpoint -q "$mnt"; then
	echo "'$mnt' is already mounted: reusing it"
else
	"$csdfs" "$vol" "$mnt" || die "mounting '$vol' on '$mnt' failed"
	# csdfs returns once the mount is ready; be tolerant of a slow start.
	for _ in $(seq 50); do
		mountpoint -q "$mnt" && break
		sleep 0.1
	done
	mountpoint -q "$mnt" || die "'$mnt' is not a mount point after starting csdfs"
	echo "mounted"
fi
grep -F " $mnt " /proc/self/mounts | head -n 1 || true

# --- sample data ------------------------------------------------------------
sample=$mnt/sample
step "writing sample data to $sample"
rm -rf "$sample"
mkdir -p "$sample"

# Text-ish trees first, each copied whole while it fits the budget.
budget=$((data_mb * 1024 * 1024))
copied=0
start=$(date +%s.%N)
for src in /usr/share/doc /usr/share/perl /usr/lib/python3 /usr/include \
	/usr/share/i18n /usr/share/mysql /usr/share/zoneinfo /usr/share/locale \
	/usr/share/perl5 /usr/lib/x86_64-linux-gnu/perl-base /usr/share/man; do
	[ -d "$src" ] || continue
	sz=$(du -sb "$src" 2>/dev/null | cut -f1)
	[ -n "$sz" ] || continue
	[ $((copied + sz)) -le "$budget" ] || continue
	name=$(printf '%s' "${src#/}" | tr / _)
	if cp -a "$src" "$sample/$name" 2>/dev/null; then
		copied=$((copied + sz))
		printf '  %-40s %8s\n' "$src" "$(numfmt --to=iec "$sz")"
	else
		echo "$prog: warning: copying '$src' reported errors" >&2
	fi
done

# Data of known compressibility, as the CSD reviews use: fio's 2:1 buffers
# and incompressible random buffers.
fio_files=()
if [ "$fio_mb" -gt 0 ] && command -v fio >/dev/null 2>&1; then
	for pct in 50 0; do
		f=$sample/fio-compress$pct.bin
		fio --name=demo --filename="$f" --rw=write --bs=1M \
			--size="${fio_mb}M" --ioengine=psync \
			--buffer_compress_percentage="$pct" --refill_buffers \
			--end_fsync=1 --output=/dev/null ||
			die "fio failed writing '$f'"
		fio_files+=("$f")
		copied=$((copied + fio_mb * 1024 * 1024))
		printf '  %-40s %8s\n' "fio buffer_compress_percentage=$pct" "${fio_mb}M"
	done
elif [ "$fio_mb" -gt 0 ]; then
	echo "  (fio not installed: no 2:1 sample)"
fi
sync
end=$(date +%s.%N)
awk -v b="$copied" -v s="$start" -v e="$end" 'BEGIN {
	t = e - s; if (t <= 0) t = 0.001
	printf "  wrote %.0f MiB in %.1f s (%.0f MiB/s, including sync)\n",
	       b / 1048576, t, b / 1048576 / t }'

# --- numbers ----------------------------------------------------------------
step "df -h $mnt"
df -h "$mnt"
echo "  (df counts logical space: Size is the volume's logical capacity, Used the"
echo "  files' stored chunks, a whole chunk each; du below shows what they take)"

step "du: physical (du -sh) vs logical (du -sh --apparent-size)"
printf '  physical  %s\n' "$(du -sh "$mnt" | cut -f1)"
printf '  logical   %s\n' "$(du -sh --apparent-size "$mnt" | cut -f1)"

xattr() {
	getfattr --absolute-names --only-values -n "user.csdfs.$1" "$2" 2>/dev/null || echo -
}
human() {
	case "$1" in
	'' | *[!0-9]*) echo "${1:--}" ;;
	*) numfmt --to=iec-i --suffix=B --format=%.1f "$1" ;;
	esac
}

text_file=$(find "$sample" -type f \( -name '*.py' -o -name '*.pm' -o -name '*.h' \
	-o -name '*.txt' \) -size +32k 2>/dev/null | head -n 1 || true)
rows=("$mnt" "$sample")
[ -n "$text_file" ] && rows+=("$text_file")
rows+=("${fio_files[@]}")

step "xattrs (getfattr -n user.csdfs.{logical,physical,stored,ratio,codec})"
fmt='  %-34s %10s %10s %10s %7s %8s  %s\n'
# shellcheck disable=SC2059 # the format is ours
printf "$fmt" path logical physical stored ratio savings codec
for p in "${rows[@]}"; do
	l=$(xattr logical "$p")
	ph=$(xattr physical "$p")
	sv=$(awk -v l="$l" -v p="$ph" 'BEGIN {
		if (l ~ /^[0-9]+$/ && p ~ /^[0-9]+$/ && l > 0)
			printf "%.1f%%", 100 * (1 - p / l); else print "-" }')
	shown=${p#"$mnt"}
	shown=${shown:-/}
	[ "${#shown}" -le 34 ] || shown="...${shown: -31}"
	# shellcheck disable=SC2059
	printf "$fmt" "$shown" "$(human "$l")" "$(human "$ph")" \
		"$(human "$(xattr stored "$p")")" "$(xattr ratio "$p")" "$sv" \
		"$(xattr codec "$p")"
done
echo "  ratio = logical / physical; savings = 1 - physical / logical;"
echo "  physical counts whole 4 KiB blocks, stored the exact compressed bytes (csdfs(5))"

step "volume status (getfattr -n user.csdfs.NAME $mnt)"
for a in capacity_logical capacity_physical used_physical free_physical \
	app_bytes_written dev_bytes_written; do
	printf '  %-22s %s\n' "$a" "$(human "$(xattr "$a" "$mnt")")"
done
for a in write_amplification checksum_errors atomic_write_unit warnings; do
	v=$(xattr "$a" "$mnt")
	printf '  %-22s %s\n' "$a" "${v:-(none)}"
done

step "done"
cat <<EOF
The volume stays mounted at $mnt; look around, e.g.
  getfattr -n user.csdfs.ratio $mnt
  getfattr -n user.csdfs.atomic_write_unit $mnt
Unmount it with:
  fusermount3 -u $mnt
then check it offline with (-v prints what it checked; silence means clean):
  $build/csdfs-fsck -v $vol
Run this script again to reuse the volume; 'rm -rf $vol' (unmounted) starts afresh.
EOF
