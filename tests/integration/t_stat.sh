#!/bin/bash
# t_stat: csdfs-stat, the xattr-only reporting tool (SPEC §2, §5; tests/CLI.md).
# Builds a tree of known compressibility (random, 2:1, all-zero chunks, holes,
# an lz4 directory made with setfattr before its files), syncs, then checks
# that csdfs-stat's numbers agree with three independent sources: the files'
# st_size and st_blocks (stat), the directory roll-up xattrs, and the volume
# counters on the root. Also -f (text and JSON), --watch/--count deltas,
# SIGINT, --sort, an unprivileged run, errors and usage errors.
# Env: CSDFS_STAT (the binary); to exercise this script's fallbacks,
# CSDFS_TEST_JSON=python3|jq|none (the JSON tool) and CSDFS_TEST_NO_FIO=1
# (2:1 data from perl instead of fio).
. "$(dirname "$0")/lib.sh"

CSDFS_STAT=$(abspath "${CSDFS_STAT:-$REPO_ROOT/build/csdfs-stat}")

[ $PLAIN = 1 ] && skip_test "csdfs-stat needs a csdfs mount (plain mode)"
require_csdfs
require_tools getfattr setfattr stat awk find sort dd
[ -x "$CSDFS_STAT" ] || die "binary '$CSDFS_STAT' not found (build first, or set CSDFS_STAT)"
setup
mkfs_vol --size 1G
mount_vol || finish

# A copy every user may run (the build tree may be private to its owner).
mkdir -p "$WORK/bin"
chmod 755 "$WORK/bin"
cp "$CSDFS_STAT" "$WORK/bin/csdfs-stat" && chmod 755 "$WORK/bin/csdfs-stat"
STAT=$WORK/bin/csdfs-stat
OUT=$WORK/out
mkdir -p "$OUT"

# ---------- JSON access ----------
# Validity: python3 -m json.tool, else jq, else a grep for the keys. Reading
# values: jq (fast), else python3 (here ~0.5 s a start); neither = those
# checks are skipped. CSDFS_TEST_JSON=python3|jq|none forces one for both.

have_python3() { command -v python3 >/dev/null 2>&1 && python3 -c 'import json' 2>/dev/null; }
have_jq() { command -v jq >/dev/null 2>&1; }
JSON='' JSON_CHECK=''
case ${CSDFS_TEST_JSON:-} in
python3 | jq) JSON=$CSDFS_TEST_JSON JSON_CHECK=$CSDFS_TEST_JSON ;;
none) ;;
*)
	if have_python3; then JSON_CHECK=python3; elif have_jq; then JSON_CHECK=jq; fi
	if have_jq; then JSON=jq; elif have_python3; then JSON=python3; fi
	;;
esac
log "JSON validity checked with ${JSON_CHECK:-grep}, values read with ${JSON:-nothing}"

# json_valid FILE: FILE is one JSON document
json_valid() {
	case $JSON_CHECK in
	python3) python3 -m json.tool "$1" >/dev/null 2>&1 ;;
	jq) jq -e . "$1" >/dev/null 2>&1 ;;
	*) grep -q '"csdfs_stat"' "$1" && [ "$(head -c 1 "$1")" = '{' ] ;;
	esac
}

# json_lines_valid FILE: every line is one JSON document (--watch --json)
json_lines_valid() {
	case $JSON_CHECK in
	python3) python3 -c 'import json, sys
for l in open(sys.argv[1]):
    json.loads(l)' "$1" 2>/dev/null ;;
	jq) jq -e . "$1" >/dev/null 2>&1 ;;
	*) ! grep -qv '^{"csdfs_stat":' "$1" ;;
	esac
}

# jget FILE PATH: a scalar at PATH (dot separated, numbers index arrays), "null" if null
jget() {
	case $JSON in
	python3) python3 -c 'import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    v = v[int(k)] if isinstance(v, list) else v[k]
if v is None: print("null")
elif isinstance(v, bool): print("true" if v else "false")
elif isinstance(v, (dict, list)): print(json.dumps(v, sort_keys=True))
else: print(v)' "$1" "$2" 2>/dev/null ;;
	jq) jq -r "$(printf '%s' ".$2" | sed -E 's/\.([0-9]+)/[\1]/g') | if type == \"object\" or type == \"array\" then tojson else . end" "$1" 2>/dev/null ;;
	*) echo "?" ;;
	esac
}

# jrows FILE KEY...: the rows of each array KEY (or single object), as TSV:
# name logical physical stored zero extents incompressible files ratio codecs(comma, "-"
# when none) savings
jrows() {
	case $JSON in
	python3) python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
for e in [x for k in sys.argv[2:] for x in (j[k] if isinstance(j[k], list) else [j[k]])]:
    f = [e["name"]] + [e[k] for k in ("logical", "physical", "stored", "zero", "extents", "incompressible", "files", "ratio")]
    f.append(",".join(sorted(e["codec"] or {})) or "-")
    f.append(e["savings"])
    print("\t".join("null" if x is None else str(x) for x in f))' "$@" 2>/dev/null ;;
	jq) jq -r '. as $j | $ARGS.positional[] | $j[.] | (if type == "array" then .[] else . end)
		| [.name, .logical, .physical, .stored, .zero, .extents, .incompressible, .files, .ratio,
		   ((.codec // {}) | keys | join(",") | if . == "" then "-" else . end), .savings] | map(if . == null then "null" else tostring end) | @tsv' "$1" --args "${@:2}" 2>/dev/null ;;
	esac
}

need_json() {
	[ -n "$JSON" ] && return 0
	skip_check "$1 (neither python3 nor jq to read JSON)"
	return 1
}

xv() { getfattr --only-values -n "$2" -- "$1" 2>/dev/null; }

# ---------- the tree ----------

HAVE_FIO=0
command -v fio >/dev/null 2>&1 && [ "${CSDFS_TEST_NO_FIO:-0}" != 1 ] && HAVE_FIO=1
[ $HAVE_FIO = 1 ] || require_tools perl

# gen KIND FILE BYTES: random | half (2:1) | zeros (written) | hole (never written)
# Written in large requests: sub-chunk sequential writes are not packed.
gen() {
	local kind=$1 f=$2 n=$3
	case $kind in
	random) head -c "$n" /dev/urandom | dd of="$f" bs=1M iflag=fullblock status=none ;;
	half)
		if [ $HAVE_FIO = 1 ]; then
			bounded 120 fio --name=g --filename="$f" --rw=write --bs=128k --size="$n" \
				--ioengine=psync --buffer_compress_percentage=50 \
				--buffer_compress_chunk=4k --refill_buffers --fallocate=none \
				>"$WORK/fio.out" 2>&1
		else
			# as fio does it: every 4 KiB, 2 KiB of random bytes then 2 KiB of zeros
			perl -e 'open(R, "<", "/dev/urandom") or die; binmode R; binmode STDOUT;
				for (1 .. $ARGV[0] / 4096) { read(R, $b, 2048) == 2048 or die;
				print $b, "\0" x 2048 }' "$n" |
				dd of="$f" bs=1M iflag=fullblock status=none
		fi
		;;
	zeros) head -c "$n" /dev/zero | dd of="$f" bs=1M iflag=fullblock status=none ;;
	hole) truncate -s "$n" "$f" ;;
	esac
}

T=$MNT/t
log "[$((SECONDS - T_START)) s] building the tree (fio: $HAVE_FIO)"
mkdir -p "$T/rand" "$T/half" "$T/zero" "$T/lz4" "$T/deep/a/b/c" "$T/empty"
check "setfattr user.csdfs.codec=lz4 on a directory before its files" \
	setfattr -n user.csdfs.codec -v lz4 "$T/lz4"
ok=1
gen random "$T/rand/r4m" 4194304 || ok=0
gen random "$T/rand/r-odd" 1048699 || ok=0
gen half "$T/half/h8m" 8388608 || ok=0
gen half "$T/half/h2m" 2097152 || ok=0
gen zeros "$T/zero/zeros4m" 4194304 || ok=0
gen hole "$T/zero/hole16m" 16777216 || ok=0
# no zero byte in the data part: a chunk's zero tail would count as zero bytes
{ head -c 1048576 /dev/urandom | tr '\0' '\1' | dd of="$T/zero/mixed" bs=1M iflag=fullblock status=none &&
	truncate -s 4194304 "$T/zero/mixed"; } || ok=0
gen half "$T/lz4/h4m" 4194304 || ok=0
gen random "$T/lz4/r512k" 524288 || ok=0
gen half "$T/deep/a/b/c/h1m" 1048576 || ok=0
gen random "$T/deep/a/small" 100 || ok=0
: >"$T/deep/a/b/empty-file" || ok=0
echo top >"$MNT/top-file" || ok=0
ln -s rand/r4m "$T/link" || ok=0
mkfifo "$T/fifo" 2>/dev/null || true
check_eq "tree written" 1 "$ok"
sync
sleep 1.5  # one group-commit interval (commit_ms default 1000)

# ---------- -r --json over the whole volume: three sources must agree ----------

log "[$((SECONDS - T_START)) s] csdfs-stat -r --json $MNT"
# the numbers are only comparable while nothing changes: retry until two runs agree
for _ in 1 2 3 4 5; do
	bounded 120 "$STAT" -r --json "$MNT" >"$OUT/all.json" 2>"$OUT/all.err"
	rc=$?
	bounded 120 "$STAT" -r --json "$MNT" >"$OUT/all2.json" 2>/dev/null
	cmp -s "$OUT/all.json" "$OUT/all2.json" && break
	sleep 1
done
check_eq "csdfs-stat -r --json MNT exits 0 ($(head -c 200 "$OUT/all.err"))" 0 "$rc"
check "csdfs-stat -r --json output is valid JSON" json_valid "$OUT/all.json"

sum_size=0 sum_phys=0 nfiles=0
while IFS=' ' read -r size blocks unit; do
	sum_size=$((sum_size + size))
	sum_phys=$((sum_phys + blocks * unit))
	nfiles=$((nfiles + 1))
done < <(find "$MNT" -xdev -type f -exec stat -c '%s %b %B' {} +)
log "stat: $nfiles files, sum st_size $sum_size, sum st_blocks*512 $sum_phys"

if need_json "TOTAL vs stat vs root xattrs"; then
	tl=$(jget "$OUT/all.json" total.logical)
	tp=$(jget "$OUT/all.json" total.physical)
	tf=$(jget "$OUT/all.json" total.files)
	check_eq "TOTAL physical = sum of st_blocks*512" "$sum_phys" "$tp"
	check_eq "TOTAL physical = root user.csdfs.physical" "$(xv "$MNT" user.csdfs.physical)" "$tp"
	check_eq "TOTAL logical = sum of st_size" "$sum_size" "$tl"
	check_eq "TOTAL logical = root user.csdfs.logical" "$(xv "$MNT" user.csdfs.logical)" "$tl"
	check_eq "TOTAL files = number of regular files" "$nfiles" "$tf"
	check_eq "TOTAL files = root user.csdfs.files" "$(xv "$MNT" user.csdfs.files)" "$tf"
	check_eq "TOTAL stored = root user.csdfs.stored" "$(xv "$MNT" user.csdfs.stored)" \
		"$(jget "$OUT/all.json" total.stored)"
	check_eq "TOTAL zero = root user.csdfs.zero" "$(xv "$MNT" user.csdfs.zero)" \
		"$(jget "$OUT/all.json" total.zero)"
	check_eq "one roll-up row (the root) for one directory argument" 1 \
		"$(jrows "$OUT/all.json" rollups | wc -l)"
	check_eq "root roll-up row = TOTAL (every file is in the tree)" \
		"$(jrows "$OUT/all.json" total | cut -f2-)" "$(jrows "$OUT/all.json" rollups | cut -f2-)"
	check_eq "JSON schema version" 1 "$(jget "$OUT/all.json" csdfs_stat)"
	check_eq "JSON mode" recursive "$(jget "$OUT/all.json" mode)"
	check_eq "JSON errors empty" "[]" "$(jget "$OUT/all.json" errors)"

	jrows "$OUT/all.json" entries >"$OUT/rows.tsv"
	check_eq "one entry per regular file (symlink, fifo, dirs left out)" "$nfiles" \
		"$(wc -l <"$OUT/rows.tsv")"
	# per-file values are the file's own xattrs and stat
	bad=
	while IFS=$'\t' read -r name l p s z e i n r _ sv; do
		[ "$l" = "$(stat -c %s "$name")" ] || bad+=" $name:logical"
		[ "$p" = "$(($(stat -c '%b * %B' "$name")))" ] || bad+=" $name:physical"
		[ "$s" = "$(xv "$name" user.csdfs.stored)" ] || bad+=" $name:stored"
		[ "$z" = "$(xv "$name" user.csdfs.zero)" ] || bad+=" $name:zero"
		[ "$e" = "$(xv "$name" user.csdfs.extents)" ] || bad+=" $name:extents"
		[ "$i" = "$(xv "$name" user.csdfs.incompressible)" ] || bad+=" $name:incompressible"
		[ "$n" = 1 ] || bad+=" $name:files"
		# the tool computes ratio/savings itself; the daemon's strings must agree
		x=$(xv "$name" user.csdfs.ratio)
		if [ "$r" = null ]; then
			[ "$x" = inf ] || bad+=" $name:ratio(null/$x)"
		elif ! awk -v a="$r" -v b="$x" 'BEGIN { d = a - b; exit !(d < 0.0051 && d > -0.0051) }'; then
			bad+=" $name:ratio($r/$x)"
		fi
		x=$(xv "$name" user.csdfs.savings)
		awk -v a="$sv" -v b="$x" 'BEGIN { d = a - b; exit !(d < 0.00006 && d > -0.00006) }' ||
			bad+=" $name:savings($sv/$x)"
	done <"$OUT/rows.tsv"
	check_eq "every entry: logical = st_size, physical = st_blocks*512, other fields = xattrs" "" "$bad"

	# row NAME: the TSV fields of one file (relative to $T)
	row() { awk -F'\t' -v n="$T/$1" '$1 == n' "$OUT/rows.tsv"; }
	ratio_of() { row "$1" | cut -f9; }
	for f in rand/r4m rand/r-odd lz4/r512k; do
		r=$(ratio_of "$f")
		if [ -n "$r" ] && fle "$r" 1.02; then
			pass "random data $f: ratio $r <= 1.02"
		else
			fail "random data $f: ratio '$r' > 1.02"
		fi
	done
	r=$(ratio_of rand/r4m)
	if [ -n "$r" ] && fle 0.95 "$r"; then
		pass "4 MiB random data: ratio $r >= 0.95 (not inflated)"
	else
		fail "4 MiB random data: ratio '$r' < 0.95"
	fi
	for f in half/h8m half/h2m lz4/h4m deep/a/b/c/h1m; do
		r=$(ratio_of "$f")
		if [ -n "$r" ] && [ "$r" != null ] && fle 1.6 "$r"; then
			pass "2:1 data $f: ratio $r >= 1.6"
		else
			fail "2:1 data $f: ratio '$r' < 1.6"
		fi
	done
	check_eq "hole file: physical 0, zero = its size" "0 16777216" \
		"$(row zero/hole16m | cut -f3,5 | tr '\t' ' ')"
	check_eq "all-zero file: physical 0, zero = its size" "0 4194304" \
		"$(row zero/zeros4m | cut -f3,5 | tr '\t' ' ')"
	check_eq "1 MiB data + 3 MiB hole: zero = 3 MiB" 3145728 "$(row zero/mixed | cut -f5)"
	check_eq "random file: codec mix is all 'none'" none "$(row rand/r4m | cut -f10)"
	check_eq "empty file: logical 0, physical 0, ratio 1, savings 0" "0 0 1 0" \
		"$(row deep/a/b/empty-file | awk -F'\t' '{ print $2, $3, $9 + 0, $11 + 0 }')"
	for f in lz4/h4m lz4/r512k; do
		c=$(row "$f" | cut -f10)
		if [[ ,$c, == *,lz4,* || ( $f == lz4/r512k && $c == none ) ]]; then
			pass "lz4 directory: $f codec mix '$c'"
		else
			fail "lz4 directory: $f codec mix '$c' (want lz4)"
		fi
	done
	if [[ ,$(row lz4/h4m | cut -f10), == *,lz4,* ]] && [[ ,$(row half/h8m | cut -f10), != *,lz4,* ]]; then
		pass "2:1 data: lz4 in the lz4 directory only"
	else
		fail "2:1 data: codec mixes '$(row lz4/h4m | cut -f10)' (lz4 dir) / '$(row half/h8m | cut -f10)'"
	fi
fi

# ---------- directory roll-ups = sums of their files ----------

log "[$((SECONDS - T_START)) s] directory roll-ups"
if need_json "directory roll-ups"; then
	bad=
	ndirs=0
	while IFS= read -r d; do
		ndirs=$((ndirs + 1))
		if ! bounded 60 "$STAT" -r --json "$d" >"$OUT/dir.json" 2>"$OUT/dir.err"; then
			bad+=" $d:exit($(head -c 100 "$OUT/dir.err"))"
			continue
		fi
		jrows "$OUT/dir.json" total rollups | cut -f2-9 >"$OUT/dir.tsv"
		t=$(sed -n 1p "$OUT/dir.tsv")
		u=$(sed -n 2p "$OUT/dir.tsv")
		[ "$(wc -l <"$OUT/dir.tsv")" = 2 ] || bad+=" ${d#"$MNT"}:$(wc -l <"$OUT/dir.tsv")-rows"
		[ -n "$t" ] && [ "$t" = "$u" ] || bad+=" ${d#"$MNT"}:[total $t] [roll-up $u]"
		x=$(for a in logical physical stored zero extents incompressible files; do
			printf '%s\t' "$(xv "$d" user.csdfs.$a)"; done)
		[ "$(printf '%s\n' "$u" | cut -f1-7)" = "$(printf '%s\n' "${x%$'\t'}")" ] ||
			bad+=" ${d#"$MNT"}:[roll-up row $u] [getfattr $x]"
	done < <(find "$MNT" -xdev -type d)
	check_eq "every directory ($ndirs): roll-up xattrs = sum of its files" "" "$bad"
	bounded 60 "$STAT" --json "$T/lz4" >"$OUT/lz4.json" 2>/dev/null
	c=$(jrows "$OUT/lz4.json" entries | cut -f10)
	if [[ ,$c, == *,lz4,* ]]; then
		pass "lz4 directory roll-up codec mix has lz4 ($c)"
	else
		fail "lz4 directory roll-up codec mix '$c'"
	fi
	check_eq "a directory row has type dir" dir "$(jget "$OUT/lz4.json" entries.0.type)"
fi

# ---------- human output ----------

log "[$((SECONDS - T_START)) s] human output"
bounded 60 "$STAT" "$T/lz4" "$T/half/h8m" >"$OUT/h.txt" 2>&1
check_eq "csdfs-stat DIR FILE exits 0" 0 $?
check_grep_i "header has every column" \
	'^NAME +LOGICAL +PHYSICAL +STORED +RATIO +SAVINGS +ZERO +CODEC MIX$' "$OUT/h.txt"
# (a note under the table explains a '*' after PHYSICAL, see t_numbers)
check_eq "one row per PATH" 3 "$(grep -vc '^\* ' "$OUT/h.txt")"
check_grep_i "lz4 dir row shows lz4 in CODEC MIX" "^$T/lz4 .*lz4" "$OUT/h.txt"
check_grep_i "ratio as N.NNx, savings as N.N%" "h8m +[0-9.]+[KMG] +[0-9.]+[KMG]\*? +[0-9.]+[KMG] +[0-9]+\.[0-9]{2}x +[0-9]+\.[0-9]%" "$OUT/h.txt"
check_grep_i "sizes in K/M/G with one decimal" "h8m +8\.0M " "$OUT/h.txt"
bounded 60 "$STAT" --bytes "$T/half/h8m" >"$OUT/b.txt" 2>&1
check_grep_i "--bytes shows exact bytes" "h8m +8388608 +$(($(stat -c '%b * %B' "$T/half/h8m")))\*? " "$OUT/b.txt"
bounded 60 "$STAT" -r "$T" >"$OUT/r.txt" 2>&1
check_eq "csdfs-stat -r DIR exits 0" 0 $?
check_grep_i "-r prints a TOTAL row" '^TOTAL \(12 files\) ' "$OUT/r.txt"
check_grep_i "-r prints the directory's roll-up row" "^$T \(roll-up\) " "$OUT/r.txt"
tot=$(grep '^TOTAL' "$OUT/r.txt" | sed 's/^TOTAL ([0-9]* files) *//')
rol=$(grep "^$T (roll-up)" "$OUT/r.txt" | sed "s|^$T (roll-up) *||")
check_eq "-r: TOTAL and roll-up rows show the same numbers" "$tot" "$rol"

if need_json "--sort"; then
	bounded 60 "$STAT" -r --json --sort=physical "$T" >"$OUT/s.json" 2>/dev/null
	if jrows "$OUT/s.json" entries | cut -f3 | sort -c -n -r 2>/dev/null; then
		pass "--sort=physical: largest physical first"
	else
		fail "--sort=physical: not in descending order: $(jrows "$OUT/s.json" entries | cut -f3 | tr '\n' ' ')"
	fi
	bounded 60 "$STAT" -r --json --sort=ratio "$T" >"$OUT/s.json" 2>/dev/null
	if jrows "$OUT/s.json" entries | cut -f9 | grep -v null | sort -c -g -r 2>/dev/null; then
		pass "--sort=ratio: largest ratio first"
	else
		fail "--sort=ratio: $(jrows "$OUT/s.json" entries | cut -f9 | tr '\n' ' ')"
	fi
	bounded 60 "$STAT" -r --json "$T" >"$OUT/s.json" 2>/dev/null
	if jrows "$OUT/s.json" entries | cut -f1 | LC_ALL=C sort -c 2>/dev/null; then
		pass "default sort: by name"
	else
		fail "default sort is not by name"
	fi
fi

# ---------- -f: the volume status page ----------

log "[$((SECONDS - T_START)) s] -f"
bounded 60 "$STAT" -f "$MNT" >"$OUT/f.txt" 2>&1
check_eq "csdfs-stat -f MNT exits 0" 0 $?
missing=
for label in "Logical capacity" "Physical capacity" "Logical used" "Physical used" \
	"Compression ratio" "Space savings" "Free physical space" "Write amplification" \
	"Atomic write unit" "Checksum errors" "Warnings" "App bytes written" \
	"Device bytes written" "Metadata size" "Stored"; do
	grep -q "^  $label" "$OUT/f.txt" || missing+=" '$label'"
done
check_eq "-f prints every field" "" "$missing"
check_eq "-f: every field has a value (none '-')" "" \
	"$(grep -E '^  .{22} +- ' "$OUT/f.txt"; grep -E '^  .{22} +-$' "$OUT/f.txt")"
check_grep_i "-f: atomic write unit = the root xattr" \
	"Atomic write unit .*\($(xv "$MNT" user.csdfs.atomic_write_unit) bytes" "$OUT/f.txt"
bounded 60 "$STAT" -f "$T/deep/a" >"$OUT/f2.txt" 2>&1
check_eq "-f on a path inside the volume reports the volume" \
	"$(head -n 1 "$OUT/f.txt")" "$(head -n 1 "$OUT/f2.txt")"

bounded 60 "$STAT" -f --json "$MNT" >"$OUT/f.json" 2>&1
check_eq "csdfs-stat -f --json exits 0" 0 $?
check "-f --json output is valid JSON (${JSON_CHECK:-grep})" json_valid "$OUT/f.json"
missing=
for key in capacity_logical capacity_physical free_physical logical physical stored ratio \
	savings write_amplification atomic_write_unit checksum_errors warnings \
	app_bytes_written dev_bytes_written meta_bytes; do
	grep -q "\"$key\": " "$OUT/f.json" || missing+=" $key"
done
check_eq "-f --json has every key" "" "$missing"
if need_json "-f --json values"; then
	nulls=
	for key in capacity_logical capacity_physical free_physical logical physical stored ratio \
		savings write_amplification atomic_write_unit checksum_errors warnings \
		app_bytes_written dev_bytes_written meta_bytes; do
		[ "$(jget "$OUT/f.json" "volumes.0.$key")" = null ] && nulls+=" $key"
	done
	check_eq "-f --json: no key is null (the daemon answers every attribute)" "" "$nulls"
	bad=
	for key in capacity_logical capacity_physical free_physical logical physical stored \
		atomic_write_unit checksum_errors app_bytes_written dev_bytes_written meta_bytes; do
		a=$(jget "$OUT/f.json" "volumes.0.$key")
		b=$(xv "$MNT" "user.csdfs.$key")
		[ "$a" = "$b" ] || bad+=" $key:json=$a,xattr=$b"
	done
	check_eq "-f --json values = root xattrs" "" "$bad"
	check_eq "-f --json mount" "$(realpath "$MNT")" "$(jget "$OUT/f.json" volumes.0.mount)"
	r=$(jget "$OUT/f.json" volumes.0.ratio)
	want=$(awk -v l="$(xv "$MNT" user.csdfs.logical)" -v p="$(xv "$MNT" user.csdfs.physical)" \
		'BEGIN { printf "%.4f", l / p }')
	check_eq "-f --json ratio = logical / physical" "$want" "$r"
	s=$(jget "$OUT/f.json" volumes.0.savings)
	want=$(awk -v l="$(xv "$MNT" user.csdfs.logical)" -v p="$(xv "$MNT" user.csdfs.physical)" \
		'BEGIN { printf "%.4f", 1 - p / l }')
	check_eq "-f --json savings = 1 - physical / logical" "$want" "$s"
fi

# ---------- requests and host syncs (issue 19.3) ----------
# 20 appends, each followed by its own fsync (dd conv=fsync): at least 20
# FSYNC requests reach the daemon, and each finds a change not yet durable,
# so each writes a journal segment made durable by one container sync: at
# least 20 container syncs and 20 segments more, while data.mdb is synced
# only by the group commits (on the commit thread's schedule), one each.
# user.csdfs.requests is the daemon's, user.csdfs.syncs libcsdfs's.
log "[$((SECONDS - T_START)) s] requests and host syncs"
# count_of LIST KEY: N of KEY=N in a user.csdfs.requests/.syncs list (0 if absent)
count_of() { tr ' ' '\n' <<<"$1" | awk -F= -v k="$2" '$1 == k { n = $2 } END { print n + 0 }'; }
req0=$(xv "$MNT" user.csdfs.requests) syn0=$(xv "$MNT" user.csdfs.syncs)
check_grep_i "user.csdfs.requests: total=N and opcode=N counts" '^total=[0-9]+ .*getxattr=[0-9]+' <(echo "$req0")
check_grep_i "user.csdfs.syncs: the three files, group commits and journal segments" \
	'^container=[0-9]+ data\.mdb=[0-9]+ record=[0-9]+ group_commits=[0-9]+ journal_segments=[0-9]+$' <(echo "$syn0")
rm -f "$T/fsynced"
for i in $(seq 20); do
	bounded 30 dd if=/dev/urandom of="$T/fsynced" bs=4K count=1 seek=$((i - 1)) \
		conv=notrunc,fsync status=none || fail "dd conv=fsync $i"
done
req1=$(xv "$MNT" user.csdfs.requests) syn1=$(xv "$MNT" user.csdfs.syncs)
d_fsync=$(($(count_of "$req1" fsync) - $(count_of "$req0" fsync)))
d_cont=$(($(count_of "$syn1" container) - $(count_of "$syn0" container)))
d_gc=$(($(count_of "$syn1" group_commits) - $(count_of "$syn0" group_commits)))
d_js=$(($(count_of "$syn1" journal_segments) - $(count_of "$syn0" journal_segments)))
d_data=$(($(count_of "$syn1" data.mdb) - $(count_of "$syn0" data.mdb)))
d_rec=$(($(count_of "$syn1" record) - $(count_of "$syn0" record)))
check "20 fsync calls: at least 20 FSYNC requests ($d_fsync)" test "$d_fsync" -ge 20
check "20 fsync calls: at least 20 container syncs ($d_cont)" test "$d_cont" -ge 20
check "20 fsync calls: at least 20 journal segments ($d_js)" test "$d_js" -ge 20
check "data.mdb and the record synced once per group commit only ($d_data, $d_rec, $d_gc)" \
	test "$d_data" -eq "$d_gc" -a "$d_rec" -eq "$d_gc"
getfattr -d -m - "$MNT" >"$OUT/root-listed" 2>&1
check "user.csdfs.requests and .syncs are not listed" bash -c "! grep -Eq 'requests|syncs' '$OUT/root-listed'"
bounded 60 "$STAT" -f "$MNT" >"$OUT/fr.txt" 2>&1
n=$(awk '/^  FSYNC requests / { print $3 }' "$OUT/fr.txt")
check "-f shows the FSYNC requests (${n:-none}, >= $(($(count_of "$req0" fsync) + 20)))" \
	test "${n:-0}" -ge $(($(count_of "$req0" fsync) + 20))
n=$(awk '/^  Container syncs / { print $3 }' "$OUT/fr.txt")
check "-f shows the container syncs (${n:-none}, >= $(($(count_of "$syn0" container) + 20)))" \
	test "${n:-0}" -ge $(($(count_of "$syn0" container) + 20))
check_grep_i "-f shows requests by opcode" '^  Requests by opcode +total=[0-9]+ .*fsync=[0-9]+' "$OUT/fr.txt"
n=$(awk '/^  Journal segments / { print $3 }' "$OUT/fr.txt")
check "-f shows the journal segments (${n:-none}, >= $(($(count_of "$syn0" journal_segments) + 20)))" \
	test "${n:-0}" -ge $(($(count_of "$syn0" journal_segments) + 20))
if need_json "-f --json request and sync counts"; then
	bounded 60 "$STAT" -f --json "$MNT" >"$OUT/fr.json" 2>&1
	n=$(jget "$OUT/fr.json" volumes.0.fsync_requests)
	check "-f --json fsync_requests ($n)" test "$n" -ge $(($(count_of "$req0" fsync) + 20))
	n=$(jget "$OUT/fr.json" volumes.0.requests_by_opcode.fsync)
	check "-f --json requests_by_opcode.fsync ($n)" test "$n" -ge $(($(count_of "$req0" fsync) + 20))
	n=$(jget "$OUT/fr.json" volumes.0.syncs_container)
	check "-f --json syncs_container ($n)" test "$n" -ge $(($(count_of "$syn0" container) + 20))
fi

# ---------- the decoded-chunk cache ----------
# 8 chunks of compressible data, written whole with O_DIRECT (one request
# per chunk: a whole-chunk write is not cached, wplan.c, where a writeback
# flush could end inside one), then a 4 KiB part of each read twice with
# O_DIRECT (past the kernel's page cache, so every read reaches the
# daemon): a part of a chunk is decoded whole and kept, so the first pass
# misses 8 times and the second hits 8 times. (A read of whole chunks is
# never kept: the kernel caches those.) Counted since mount in
# user.csdfs.cache, libcsdfs's.
log "[$((SECONDS - T_START)) s] chunk cache"
# cache_sample: "hits misses bytes" from user.csdfs.cache and, when JSON can
# be read, from csdfs-stat -f --json (the same three numbers, then the ratio)
cache_sample() {
	local v
	v=$(xv "$MNT" user.csdfs.cache)
	printf '%s\n' "$v" >>"$OUT/cache-attrs"
	printf '%s %s %s' "$(count_of "$v" hits)" "$(count_of "$v" misses)" "$(count_of "$v" bytes)"
}
cache_json() {
	bounded 60 "$STAT" -f --json "$MNT" >"$OUT/cache.json" 2>&1 || return 1
	printf '%s %s %s %s' "$(jget "$OUT/cache.json" volumes.0.cache_hits)" \
		"$(jget "$OUT/cache.json" volumes.0.cache_misses)" \
		"$(jget "$OUT/cache.json" volumes.0.cache_bytes)" \
		"$(jget "$OUT/cache.json" volumes.0.cache_hit_ratio)"
}
# read_parts: one 4 KiB direct read inside each of the 8 chunks
read_parts() {
	local i ok=0
	for ((i = 0; i < 8; i++)); do
		bounded 30 dd if="$T/cached" of=/dev/null bs=4K count=1 iflag=direct \
			skip=$((i * cs / 4096 + 1)) status=none || ok=1
	done
	return $ok
}
: >"$OUT/cache-attrs"
cache_sample >/dev/null
check_grep_i "user.csdfs.cache: hits=N misses=N bytes=N budget=N" \
	'^hits=[0-9]+ misses=[0-9]+ bytes=[0-9]+ budget=[0-9]+$' "$OUT/cache-attrs"
budget=$(count_of "$(head -n 1 "$OUT/cache-attrs")" budget)
# the default cache_size (64M) less LMDB's share, which is at most 3/4 of it
check "user.csdfs.cache budget within the default cache_size (${budget:-none})" \
	test "${budget:-0}" -ge $((16 << 20)) -a "${budget:-0}" -le $((64 << 20))
touch "$T/cached"
cs=$(xv "$T/cached" user.csdfs.chunk_size)
yes 'csdfs chunk cache: the same line over and over' |
	dd of="$T/cached" bs="$cs" count=8 iflag=fullblock oflag=direct conv=fsync status=none ||
	fail "dd: writing $T/cached"
# only that file's chunks are read from here on: nothing else moves the counters
j0=
if [ -n "$JSON" ]; then j0=$(cache_json); fi
c1=$(cache_sample)
check "8 direct reads of a part of a chunk" read_parts
c2=$(cache_sample)
j1=
if [ -n "$JSON" ]; then j1=$(cache_json); fi
check "8 direct reads of the same parts again" read_parts
c3=$(cache_sample)
j2=
if [ -n "$JSON" ]; then j2=$(cache_json); fi
{ read -r h1 m1 b1 <<<"$c1"; read -r h2 m2 b2 <<<"$c2"; read -r h3 m3 b3 <<<"$c3"; }
check_eq "first reads: 8 misses more, no hit ($c1 -> $c2)" "8 0" "$((m2 - m1)) $((h2 - h1))"
check_eq "second reads: 8 hits more, no miss ($c2 -> $c3)" "8 0" "$((h3 - h2)) $((m3 - m2))"
check "the cache holds the 8 chunks after the first reads ($b1 -> $b2 bytes)" \
	test "$b2" -ge $((b1 + 8 * cs))
# counter-check: a value that never changed fails here, whatever the deltas
check "user.csdfs.cache changed with each pass ($(tr '\n' '|' <"$OUT/cache-attrs"))" \
	test "$(sed -n 2p "$OUT/cache-attrs")" != "$(sed -n 3p "$OUT/cache-attrs")" -a \
	"$(sed -n 3p "$OUT/cache-attrs")" != "$(sed -n 4p "$OUT/cache-attrs")"
getfattr -d -m - "$MNT" >"$OUT/root-listed2" 2>&1
check "user.csdfs.cache is not listed" bash -c "! grep -q 'cache' '$OUT/root-listed2'"
bounded 60 "$STAT" -f "$MNT" >"$OUT/fc.txt" 2>&1
log "$(grep '^  Chunk cache' "$OUT/fc.txt")"
check_grep_i "-f shows the chunk cache line" \
	'^  Chunk cache +hits [0-9]+, misses [0-9]+, hit ratio ([0-9]+\.[0-9]%|-), [0-9.]+[KMGTPE]? held of [0-9.]+[KMGTPE]?$' \
	"$OUT/fc.txt"
read -r h4 m4 < <(awk '/^  Chunk cache / { gsub(",", ""); print $4, $6 }' "$OUT/fc.txt")
check "-f chunk cache hits and misses >= the last sample (${h4:-none} >= $h3, ${m4:-none} >= $m3)" \
	test "${h4:-0}" -ge "$h3" -a "${m4:-0}" -ge "$m3"
if need_json "-f --json cache keys"; then
	{ read -r jh0 jm0 _ _ <<<"$j0"; read -r jh1 jm1 jb1 _ <<<"$j1"; read -r jh2 jm2 _ jr2 <<<"$j2"; }
	check_eq "-f --json cache_misses: 8 more after the first reads ($j0 -> $j1)" 8 $((jm1 - jm0))
	check_eq "-f --json cache_hits: none more after the first reads" "$jh0" "$jh1"
	check_eq "-f --json cache_hits: 8 more after the second reads ($j1 -> $j2)" 8 $((jh2 - jh1))
	check_eq "-f --json cache_misses: none more after the second reads" "$jm1" "$jm2"
	check "-f --json cache_bytes holds the 8 chunks ($jb1)" test "$jb1" -ge $((8 * cs))
	jbud=$(jget "$OUT/cache.json" volumes.0.cache_budget)
	check "-f --json cache_budget >= cache_bytes, within 64M (${jbud:-none})" \
		test "${jbud:-0}" -ge "$b3" -a "${jbud:-0}" -le $((64 << 20))
	want=$(awk -v h="$jh2" -v m="$jm2" 'BEGIN { printf "%.4f", h / (h + m) }')
	check_eq "-f --json cache_hit_ratio = hits / (hits + misses)" "$want" "$jr2"
	check_eq "-f --json cache values = user.csdfs.cache" "$h3 $m3 $b3" "$jh2 $jm2 $(jget "$OUT/cache.json" volumes.0.cache_bytes)"
fi
bounded 60 "$STAT" -f --prometheus "$MNT" >"$OUT/fc.prom" 2>&1
check_grep_i "--prometheus: csdfs_cache_hits_total counter" \
	"^csdfs_cache_hits_total\{mount=\"[^\"]+\"\} [0-9]+$" "$OUT/fc.prom"
check_grep_i "--prometheus: csdfs_cache_misses_total counter" \
	'^# TYPE csdfs_cache_misses_total counter$' "$OUT/fc.prom"
check_grep_i "--prometheus: csdfs_cache_bytes gauge" '^# TYPE csdfs_cache_bytes gauge$' "$OUT/fc.prom"
check_grep_i "--prometheus: csdfs_cache_budget_bytes gauge" \
	"^csdfs_cache_budget_bytes\{mount=\"[^\"]+\"\} [1-9][0-9]*$" "$OUT/fc.prom"

# ---------- --watch ----------

log "[$((SECONDS - T_START)) s] --watch"
"$STAT" -f --json --watch 1 --count 3 "$MNT" >"$OUT/w.json" 2>"$OUT/w.err" &
wpid=$!
BG_PIDS+=("$wpid")
for ((i = 0; i < 100; i++)); do
	[ -s "$OUT/w.json" ] && break
	sleep 0.1
done
head -c 4194304 /dev/urandom >"$T/watched"
sync
wait "$wpid"
check_eq "-f --watch 1 --count 3 exits 0 ($(head -c 200 "$OUT/w.err"))" 0 $?
check_eq "--count 3 gives 3 samples" 3 "$(wc -l <"$OUT/w.json")"
check "--watch --json: one valid JSON document per line" json_lines_valid "$OUT/w.json"
case $JSON in
python3) sums=$(python3 -c 'import json, sys
s = [json.loads(l) for l in open(sys.argv[1])]
d = [x["volumes"][0]["delta"] for x in s]
print(sum(x["logical"] for x in d[1:]), sum(x["app_bytes_written"] for x in d[1:]),
      "yes" if d[0] is None and [x["sample"] for x in s] == [1, 2, 3] else "no")' "$OUT/w.json" 2>&1) ;;
jq) sums=$(jq -rs '[.[1:][] | .volumes[0].delta] as $d
	| "\([$d[].logical] | add) \([$d[].app_bytes_written] | add) \(if .[0].volumes[0].delta == null
	and ([.[].sample] == [1, 2, 3]) then "yes" else "no" end)"' "$OUT/w.json" 2>&1) ;;
*) sums= ;;
esac
if [ -n "$sums" ]; then
	# shellcheck disable=SC2086 # three words
	set -- $sums
	check_eq "--watch: logical deltas add up to the 4 MiB written" 4194304 "$1"
	if [ "${2:-0}" -ge 4194304 ] 2>/dev/null; then
		pass "--watch: app bytes written in the intervals >= 4 MiB ($2)"
	else
		fail "--watch: app bytes written deltas '$2' < 4 MiB ($sums)"
	fi
	check_eq "--watch: samples numbered 1 2 3, no delta in the first" yes "$3"
	sed -n 2p "$OUT/w.json" >"$OUT/w2.json"
	check "--watch: delta.cache_hits is a count ($(jget "$OUT/w2.json" volumes.0.delta.cache_hits))" \
		test "$(jget "$OUT/w2.json" volumes.0.delta.cache_hits)" -ge 0
else
	skip_check "--watch delta sums (neither python3 nor jq to read JSON)"
fi
bounded 60 "$STAT" --watch 0.2 --count 2 "$T/rand/r4m" >"$OUT/wp.txt" 2>&1
check_eq "PATH --watch 0.2 --count 2 exits 0" 0 $?
check_eq "PATH --watch: two tables with delta columns" 2 "$(grep -c '+LOGICAL' "$OUT/wp.txt")"
check_grep_i "PATH --watch: second sample shows +0 deltas" "r4m .* \+0 +\+0 +\+0 " "$OUT/wp.txt"
bounded 60 "$STAT" -f --watch 0.2 --count 2 "$MNT" >"$OUT/wf.txt" 2>&1
check_grep_i "-f --watch header" '^TIME +LOGICAL +\+LOGICAL +PHYSICAL +\+PHYSICAL +RATIO +FREE +APP-WRITTEN +DEV-WRITTEN +WA +REQ/S +FSYNC/S +SYNC/S +COMMIT/S +HIT%$' "$OUT/wf.txt"
check_eq "-f --watch: header + 2 sample lines" 3 "$(wc -l <"$OUT/wf.txt")"
"$STAT" -f --watch 30 "$MNT" >"$OUT/wi.txt" 2>&1 &
wpid=$!
BG_PIDS+=("$wpid")
sleep 0.5
kill -INT "$wpid"
for ((i = 0; i < 30; i++)); do
	pid_alive "$wpid" || break
	sleep 0.1
done
if pid_alive "$wpid"; then
	fail "--watch: still running 3 s after SIGINT"
	kill -9 "$wpid"
else
	wait "$wpid"
	check_eq "--watch stops on SIGINT with status 0" 0 $?
fi

# ---------- unprivileged ----------

log "[$((SECONDS - T_START)) s] unprivileged run"
if [ "$(id -u)" != 0 ]; then
	bounded 60 "$STAT" -r --json "$MNT" >"$OUT/u.json" 2>"$OUT/u.err"
	check_eq "unprivileged (already): -r --json exits 0" 0 $?
elif ! ensure_test_user; then
	skip_check "unprivileged run: cannot create user $TEST_USER"
else
	as_user_init
	bounded 60 "${AS_USER[@]}" "$STAT" -r --json "$T" >"$OUT/u.json" 2>"$OUT/u.err"
	check_eq "unprivileged -r --json exits 0 ($(head -c 200 "$OUT/u.err"))" 0 $?
	bounded 60 "$STAT" -r --json "$T" >"$OUT/root.json" 2>/dev/null
	if need_json "unprivileged TOTAL"; then
		check_eq "unprivileged TOTAL = root's TOTAL" "$(jrows "$OUT/root.json" total)" \
			"$(jrows "$OUT/u.json" total)"
	fi
	bounded 60 "${AS_USER[@]}" "$STAT" -f "$MNT" >"$OUT/uf.txt" 2>&1
	check_eq "unprivileged -f exits 0 ($(tail -n 1 "$OUT/uf.txt"))" 0 $?
	check_grep_i "unprivileged -f shows the checksum-error count" \
		'^  Checksum errors +[0-9]+$' "$OUT/uf.txt"
fi

# ---------- errors ----------

log "[$((SECONDS - T_START)) s] errors"
echo plain >"$REF/plain-file"
bounded 60 "$STAT" "$REF" >"$OUT/e.out" 2>"$OUT/e.err"
check_eq "non-csdfs path: exit 1" 1 $?
check_eq "non-csdfs path: message" "csdfs-stat: '$REF' is not on a csdfs filesystem" \
	"$(cat "$OUT/e.err")"
bounded 60 "$STAT" "$REF/plain-file" "$T/rand/r4m" >"$OUT/e.out" 2>"$OUT/e.err"
check_eq "non-csdfs path among good ones: exit 1" 1 $?
check_grep_i "non-csdfs path among good ones: the good row is still printed" \
	"^$T/rand/r4m +4\.0M" "$OUT/e.out"
check_eq "non-csdfs path among good ones: one error line" \
	"csdfs-stat: '$REF/plain-file' is not on a csdfs filesystem" "$(cat "$OUT/e.err")"
bounded 60 "$STAT" -f "$REF" >"$OUT/e.out" 2>"$OUT/e.err"
check_eq "-f on a non-csdfs path: exit 1" 1 $?
check_grep_i "-f on a non-csdfs path: message" "is not on a csdfs filesystem" "$OUT/e.err"
bounded 60 "$STAT" "$T/no-such-file" >"$OUT/e.out" 2>"$OUT/e.err"
check_eq "missing path: exit 1" 1 $?
check_grep_i "missing path: message names it" "'$T/no-such-file'" "$OUT/e.err"
if need_json "errors in JSON"; then
	bounded 60 "$STAT" --json "$REF" "$T/rand/r4m" >"$OUT/e.json" 2>/dev/null
	check "--json with an error is still valid JSON" json_valid "$OUT/e.json"
	check_eq "--json errors[0].path" "$REF" "$(jget "$OUT/e.json" errors.0.path)"
	check_eq "--json entries keep the good path" "$T/rand/r4m" "$(jget "$OUT/e.json" entries.0.name)"
fi
for args in "--bogus" "-x" "--sort=size" "--watch=0" "--count=2" "-f -r"; do
	# shellcheck disable=SC2086
	"$STAT" $args "$MNT" >"$OUT/u.out" 2>"$OUT/u.err"
	rc=$?
	if [ $rc = 2 ] && [ "$(wc -l <"$OUT/u.err")" = 1 ] && ! [ -s "$OUT/u.out" ]; then
		pass "bad option '$args': exit 2, one line: $(cat "$OUT/u.err")"
	else
		fail "bad option '$args': exit $rc, stderr '$(cat "$OUT/u.err")'"
	fi
done
"$STAT" --help >"$OUT/help.txt" 2>&1
check_eq "--help exits 0" 0 $?
check_grep_i "--help shows usage" '^usage: csdfs-stat' "$OUT/help.txt"

# ---------- a mount without a chunk cache ----------

# -o cache_size=0: nothing is kept, nothing counted, and -f names the state
# (the counter-check is the default mount's line above, which has numbers)
if remount -o cache_size=0; then
	check "direct part-chunk reads with cache_size=0" read_parts
	check_eq "user.csdfs.cache with cache_size=0" "hits=0 misses=0 bytes=0 budget=0" \
		"$(xv "$MNT" user.csdfs.cache)"
	bounded 60 "$STAT" -f "$MNT" >"$OUT/fc0.txt" 2>&1
	check_eq "-f says the chunk cache is off" "  Chunk cache            off (mounted with cache_size=0)" \
		"$(grep '^  Chunk cache' "$OUT/fc0.txt")"
fi
# A cache too small to keep a chunk once the metadata takes its share is
# named in one line at mount; the mounts above (default, 0) named nothing.
check "no cache_size warning from the default and cache_size=0 mounts" \
	bash -c "! grep -q 'cache_size .* is too small' '$WORK/daemon.log'"
if remount -o cache_size=100K; then
	check_grep_i "cache_size=100K: one line at mount names it" \
		"cache_size 102400 bytes is too small for $cs-byte chunks: .* use at least $((cs * 64)), or 0" \
		"$WORK/daemon.log"
fi

umount_vol
fsck_clean "after csdfs-stat tests"
finish
