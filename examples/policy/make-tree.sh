#!/bin/bash
# make-tree.sh: build a small demonstration tree with per-directory codecs on
# a mounted csdfs volume, to look at with csdfs-stat (see README.md here).
#
#   make-tree.sh MOUNTPOINT [NAME]
#
# Creates MOUNTPOINT/NAME (default: policy-demo) holding three directories,
# each with its codec policy set BEFORE any file is created (new files
# inherit the policy of their directory; existing data is not rewritten):
#
#   lz4/     user.csdfs.codec=lz4      fast, lighter compression
#   zstd9/   user.csdfs.codec=zstd:9   slower, denser
#   none/    user.csdfs.codec=none     stored raw (all-zero chunks still become holes)
#
# and in each directory three files of different compressibility:
#
#   text     the licence texts in /usr/share/common-licenses (about 230 KiB)
#   zeros    1 MiB of zero bytes (never stored: holes)
#   random   1 MiB from /dev/urandom (incompressible: stored raw by every codec)
#
# Needs: setfattr/getfattr (package attr). Exits non-zero, changing nothing,
# if MOUNTPOINT is not a csdfs mount or NAME already exists there.
set -eu

usage() {
	echo "usage: $0 MOUNTPOINT [NAME]" >&2
	exit 2
}
if [ $# -lt 1 ] || [ $# -gt 2 ]; then usage; fi
case $1 in -h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
mnt=$1
top=$mnt/${2:-policy-demo}

if ! command -v setfattr >/dev/null || ! command -v getfattr >/dev/null; then
	echo "$0: setfattr/getfattr not found (install the 'attr' package)" >&2
	exit 1
fi
[ -d "$mnt" ] || {
	echo "$0: '$mnt' is not a directory" >&2
	exit 1
}
# every inode of a csdfs mount answers the virtual xattr user.csdfs.policy
getfattr --absolute-names --only-values -n user.csdfs.policy -- "$mnt" >/dev/null 2>&1 || {
	echo "$0: '$mnt' is not on a mounted csdfs volume (no user.csdfs.policy)" >&2
	exit 1
}
[ ! -e "$top" ] || {
	echo "$0: '$top' already exists" >&2
	exit 1
}

# text: the licence texts, or generated lines where they are absent
make_text() {
	if [ -d /usr/share/common-licenses ]; then
		find /usr/share/common-licenses -maxdepth 1 -type f | LC_ALL=C sort | xargs cat
	else
		seq -f 'line %g of a generated text: compressible, but not trivially so' 1 4000
	fi
}

mkdir -- "$top"
for spec in lz4:lz4 zstd9:zstd:9 none:none; do
	dir=$top/${spec%%:*}
	codec=${spec#*:}
	mkdir -- "$dir"
	setfattr -n user.csdfs.codec -v "$codec" -- "$dir"
	make_text >"$dir/text"
	head -c 1048576 /dev/zero >"$dir/zeros"
	head -c 1048576 /dev/urandom >"$dir/random"
	sync -- "$dir/text" "$dir/zeros" "$dir/random" "$dir"
	printf '%-8s %s\n' "${spec%%:*}/" "$(getfattr --absolute-names --only-values -n user.csdfs.policy -- "$dir/text")"
done
echo "made $top; now try: csdfs-stat -r $top; csdfs-stat -f $mnt"
