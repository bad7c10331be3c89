#!/usr/bin/env bash
# tests/bench/index.sh [DOCFS] - docfs secondary indexes (issue 4) against sqlite3's expression
# indexes on the same documents, in one run, over 1,000,000 generated users:
#   1. building {user.age: 1} and {user.address.city: 1, user.age: 1}: `docfs index STORE
#      test.users create SPEC` (store not mounted) vs sqlite3 `CREATE INDEX … ON
#      t(json_extract(j,'$.user.age'))` (and the compound one) on a one-TEXT-column table;
#   2. a user.age range returning about 1% of the collection: `cat query/<QR> | wc -l` through
#      the mount, indexed vs `?hint={$natural: 1}` (the unindexed plan) vs sqlite3 with its
#      expression index;
#   3. point reads by _id of BENCH_N_POINT random documents: one `cat` of all the files vs one
#      sqlite3 reading a script of as many SELECTs (and, for reference, one process per id on
#      both sides);
#   4. {"user.address.city": "Beijing", "user.age": {$gte: 30, $lt: 35}}: indexed vs
#      unindexed vs sqlite3 with the compound expression index.
# 2 and 4 are also read by one process (python3: open and read the result file, median and
# best of 31 runs indexed, 7 unindexed), where starting `cat` does not weigh on the figure.
# Queries are warm: each runs once untimed, then the best of 5 timed runs counts (both
# sides). The docfs explain (executionStats) of each indexed and unindexed query is
# recorded, and sqlite3's EXPLAIN QUERY PLAN is printed (it must use the expression index,
# or the comparison is void).
# Checked: result counts agree (indexed, unindexed, sqlite3), the same _ids for queries 2 and
# 4, the same documents for 3, `docfs check` passes after the builds; a disagreement or a docfs
# error exits 1, no timing does. Markdown tables on stdout, progress on stderr.
# Needs sqlite3, jq, fusermount3 and /dev/fuse (GNU time, if present, gives the builds' peak
# RSS). Environment: BENCH_DIR (temporary directory's parent, default /tmp), BENCH_N_INDEX
# (1000000), BENCH_N_POINT (500), BENCH_MOUNT_OPTS (extra comma-separated `docfs mount -o`
# options).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/bench/lib.sh"
DOCFS=${1:-$ROOT/build/docfs}
case $DOCFS in /*) ;; *) DOCFS=$PWD/$DOCFS ;; esac
N=${BENCH_N_INDEX:-1000000}
NP=${BENCH_N_POINT:-500}
TEMPLATE=$ROOT/examples/users.template.json

missing=()
for tool in sqlite3 jq fusermount3 pgrep mountpoint python3; do
	command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] ||
	die "missing tools: ${missing[*]} (e.g. apt-get install sqlite3 jq fuse3 procps util-linux python3)"
[ -x "$DOCFS" ] || die "no docfs binary at $DOCFS (build it: meson setup build --buildtype=release && ninja -C build)"
"$DOCFS" --help 2>&1 | grep '^  index ' >/dev/null || die "$DOCFS has no 'index' command (docfs --help)"
[ -e /dev/fuse ] || die "no /dev/fuse"
[ -f "$TEMPLATE" ] || die "no template at $TEMPLATE"
[ "$N" -ge 1000 ] || die "BENCH_N_INDEX ($N) must be at least 1000"
[ "$NP" -ge 1 ] && [ "$NP" -le "$N" ] || die "BENCH_N_POINT ($NP) must be between 1 and BENCH_N_INDEX"

B=$(mktemp -d "${BENCH_DIR:-/tmp}/docfs-ixbench.XXXXXX")
STORE=$B/store
MNT=$B/mnt
DB=$B/users.db
MOUNTED=0
FAILED=0

. "$ROOT/tests/bench/onemount.sh" # daemon_pid, unmount, the EXIT trap, problem, warm_timeit, ...
WARM_REPEAT=${BENCH_REPEAT:-5} # warm queries: the best of 5 timed runs, on both sides

NOTES=() # unexpected but not wrong (a plan other than the expected one): reported, exit 0
note() {
	NOTES+=("$1")
	echo "bench: NOTE: $1" >&2
}

le() { # A B FACTOR : "met" when A <= B * FACTOR
	awk -v a="$1" -v b="$2" -v f="$3" 'BEGIN {
		if (a == "" || b == "" || a == "n/a" || b == "n/a") print "n/a"
		else print (a <= b * f) ? "met" : "**not met**" }'
}
sum() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "") print ""; else printf "%.3f", a + b }'; }

CPU=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
MACHINE="$(nproc) cores ($CPU), $(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) RAM, Linux $(uname -r), $(stat -f -c %T "$B") at $B"
DATE=$(date -u +%Y-%m-%d)
VERSION=$("$DOCFS" version 2>/dev/null || echo "docfs ?")
TOOLS="$(jq --version), sqlite3 $(sqlite3 --version | cut -d' ' -f1)"
echo "docfs index benchmark: $VERSION ($DOCFS), $DATE" >&2
echo "machine: $MACHINE; $TOOLS; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
T_START=$(date +%s)

# The indexes (docfs key patterns; the sqlite3 expressions in the same order)
SPEC_AGE='{"key": {"user.age": 1}}'
SPEC_CA='{"key": {"user.address.city": 1, "user.age": 1}}'
IX_AGE=user.age_1 # MongoDB's default names, which explain must show
IX_CA=user.address.city_1_user.age_1
XA="json_extract(j,'\$.user.age')"
XC="json_extract(j,'\$.user.address.city')"
XID="json_extract(j,'\$._id.\"\$oid\"')"
# 2. ages are uniform integers 0..100, so one year is about 1% of the users
QR='{"user.age": {$gte: 42, $lt: 43}}'
SQR="$XA>=42 AND $XA<43"
# 4. a quarter of the users live in Beijing, 5 years of 101: about 1.2%
QC='{"user.address.city": "Beijing", "user.age": {$gte: 30, $lt: 35}}'
SQC="$XC='Beijing' AND $XA>=30 AND $XA<35"
NATURAL='hint={$natural: 1}'

########################################################################################
# Data (not timed)
echo "== data: $N generated users" >&2
"$DOCFS" generate "$TEMPLATE" -n "$N" --seed 1 > "$B/users.jsonl" || die "docfs generate failed"
[ "$(wc -l < "$B/users.jsonl")" -eq "$N" ] || die "docfs generate wrote $(wc -l < "$B/users.jsonl") lines, not $N"
JSONL_SIZE=$(bytes_h "$B/users.jsonl")
mkdir "$STORE" "$MNT"
"$DOCFS" import "$STORE" test.users "$B/users.jsonl" > "$B/import.out" 2>&1 ||
	die "docfs import exited $?: $(tail -n 3 "$B/import.out")"
rm -f "$B/users.jsonl"
# sqlite3 reads the collection as docfs holds it: the same documents with docfs's ObjectIds
"$DOCFS" export "$STORE" test.users > "$B/users-ids.jsonl" || die "docfs export failed"
[ "$(wc -l < "$B/users-ids.jsonl")" -eq "$N" ] || die "docfs export wrote $(wc -l < "$B/users-ids.jsonl") lines, not $N"
EXPORT_SIZE=$(bytes_h "$B/users-ids.jsonl")
# sqlite3: every line is one row of one TEXT column (as in run.sh: ASCII mode, no quoting)
sqlite3 "$DB" > "$B/sqlite.out" 2>&1 <<EOF || die "sqlite3 import failed: $(tail -n 3 "$B/sqlite.out")"
CREATE TABLE t(j TEXT);
.mode ascii
.separator "\\037" "\\n"
BEGIN;
.import $B/users-ids.jsonl t
COMMIT;
EOF
[ "$(sqlite3 "$DB" 'SELECT count(*) FROM t')" -eq "$N" ] || die "sqlite3 table does not have $N rows"
# The point-query ids: NP of them in a fixed pseudo-random order
jq -r '._id["$oid"]' "$B/users-ids.jsonl" | awk 'BEGIN { srand(1) } { printf "%.9f\t%s\n", rand(), $0 }' |
	sort -n | awk -F'\t' -v n="$NP" 'NR <= n { print $2 }' > "$B/point.ids" # no head: no SIGPIPE
[ "$(wc -l < "$B/point.ids")" -eq "$NP" ] || die "could not pick $NP _ids"
rm -f "$B/users-ids.jsonl"
STORE_SIZE0=$(bytes_h "$STORE")
DB_SIZE0=$(bytes_h "$DB")

########################################################################################
# 1. Index builds (timed), docfs not mounted; each build is one transaction on both sides
echo "== index builds" >&2
# peak FILE COMMAND... : runs COMMAND, with GNU time (when there is one) writing its peak RSS
# in KiB to FILE
if /usr/bin/time -f %M -o /dev/null true 2>/dev/null; then
	peak() { local f=$1; shift; /usr/bin/time -f %M -o "$f" "$@"; }
else
	peak() { shift; "$@"; }
fi
rss_of() { [ -s "$1" ] && kib_to_mib "$(tail -n 1 "$1")" || echo n/a; }
TIMEIT_SYNC=1 timeit 'peak "$B/ixa.rss" "$DOCFS" index "$STORE" test.users create "$SPEC_AGE" > "$B/ixa.out" 2>&1'
T_DBA=$T
[ "$RC" -eq 0 ] || problem "docfs index create $SPEC_AGE exited $RC: $(tail -n 3 "$B/ixa.out")"
TIMEIT_SYNC=1 timeit 'peak "$B/ixc.rss" "$DOCFS" index "$STORE" test.users create "$SPEC_CA" > "$B/ixc.out" 2>&1'
T_DBC=$T
[ "$RC" -eq 0 ] || problem "docfs index create $SPEC_CA exited $RC: $(tail -n 3 "$B/ixc.out")"
"$DOCFS" index "$STORE" test.users list > "$B/ixlist.out" 2>&1 || problem "docfs index list failed: $(tail -n 3 "$B/ixlist.out")"
# docfs index list: one JSON line per index, with "stats": {"entries", "buildMillis", ...}
ixstat() { # NAME FIELD
	jq -r --arg n "$1" --arg f "$2" 'select(.name == $n) | .stats[$f]' "$B/ixlist.out" 2>/dev/null || true
}
for ix in "$IX_AGE" "$IX_CA"; do
	e=$(ixstat "$ix" entries)
	[ "$e" = "$N" ] || problem "docfs index list: $ix has '$e' entries, not $N: $(head -c 400 "$B/ixlist.out")"
done
MS_DBA=$(ixstat "$IX_AGE" buildMillis) MS_DBC=$(ixstat "$IX_CA" buildMillis)
echo "   docfs: {user.age: 1} ${T_DBA}s, {city: 1, age: 1} ${T_DBC}s" >&2
TIMEIT_SYNC=1 timeit 'peak "$B/sxa.rss" sqlite3 -bail "$DB" "CREATE INDEX t_age ON t($XA)" > "$B/sxa.out" 2>&1'
T_SBA=$T
[ "$RC" -eq 0 ] || die "sqlite3 CREATE INDEX t_age failed: $(cat "$B/sxa.out")"
TIMEIT_SYNC=1 timeit 'peak "$B/sxc.rss" sqlite3 -bail "$DB" "CREATE INDEX t_city_age ON t($XC, $XA)" > "$B/sxc.out" 2>&1'
T_SBC=$T
[ "$RC" -eq 0 ] || die "sqlite3 CREATE INDEX t_city_age failed: $(cat "$B/sxc.out")"
# docfs has its _id_ index from the import on; sqlite3 needs one for the point queries
TIMEIT_SYNC=1 timeit 'sqlite3 -bail "$DB" "CREATE INDEX t_id ON t($XID)" > "$B/sxi.out" 2>&1'
T_SBI=$T
[ "$RC" -eq 0 ] || die "sqlite3 CREATE INDEX t_id failed: $(cat "$B/sxi.out")"
echo "   sqlite3: age ${T_SBA}s, city+age ${T_SBC}s (_id ${T_SBI}s)" >&2
T_DB2=$(sum "$T_DBA" "$T_DBC")
T_SB2=$(sum "$T_SBA" "$T_SBC")
STORE_SIZE1=$(bytes_h "$STORE")
DB_SIZE1=$(bytes_h "$DB")
echo "== docfs check" >&2
timeit '"$DOCFS" check "$STORE" > "$B/check.out" 2>&1'
T_CHECK=$T CHECK_OK=passed
if [ "$RC" -ne 0 ]; then
	CHECK_OK="**failed**"
	problem "docfs check failed after the index builds: $(tail -n 5 "$B/check.out")"
fi

# sqlite3 must answer each query through the expression index meant for it
SQL_R="SELECT j FROM t WHERE $SQR"
SQL_C="SELECT j FROM t WHERE $SQC"
SQL_P1="SELECT j FROM t WHERE $XID='%s';"
eqp() { # NAME SQL EXPECTED_INDEX
	local out
	out=$(sqlite3 "$DB" "EXPLAIN QUERY PLAN $2" 2>&1) || true
	printf '%s:\n%s\n' "$1" "$out" >> "$B/eqp.txt"
	grep -q "USING INDEX $3 " <<< "$out" || problem "sqlite3 does not use $3 for $1 (the comparison is void): $out"
}
: > "$B/eqp.txt"
eqp "2. the 1% range" "$SQL_R" t_age
eqp "3. a point query" "$(printf "$SQL_P1" "$(head -n1 "$B/point.ids")")" t_id
eqp "4. the compound query" "$SQL_C" t_city_age

"$DOCFS" mount -o "log=$B/log${BENCH_MOUNT_OPTS:+,$BENCH_MOUNT_OPTS}" "$STORE" "$MNT" || die "docfs mount failed"
MOUNTED=1
mountpoint -q "$MNT" || die "$MNT is not mounted after docfs mount returned"
[ -n "$(daemon_pid)" ] || die "cannot find the docfs daemon (pgrep -f '${DOCFS##*/} mount .*$STORE $MNT')"
CD=$MNT/test/users
QD=$CD/query
ED=$CD/explain
sed "s|^|$CD/|; s|\$|.json|" "$B/point.ids" > "$B/point.paths"
RSS_MOUNT=$(vmhwm)

########################################################################################
# Explain (not timed): the plan each query gets
sep() { # QUERY : the separator before one more option: ? or &
	case $1 in *'?'*) echo '&' ;; *) echo '?' ;; esac
}
# explain NAME QUERY : writes $B/NAME.explain and sets PLAN IXNAME NRET KEYS DOCS MS
explain() {
	PLAN="" IXNAME="" BOUNDS="" NRET="" KEYS="" DOCS="" MS=""
	if ! cat "$ED/$2$(sep "$2")verbosity=executionStats" > "$B/$1.explain" 2> "$B/$1.explain.err"; then
		problem "cat explain/$2$(sep "$2")verbosity=executionStats failed: $(head -n 3 "$B/$1.explain.err")"
		return 0
	fi
	if ! jq -e '.executionStats' "$B/$1.explain" > /dev/null 2>&1; then
		problem "explain/$2 has no executionStats: $(head -c 300 "$B/$1.explain")"
		return 0
	fi
	PLAN=$(jq -r '[.executionStats.executionStages | recurse(.inputStage? // empty, .inputStages[]? // empty) | .stage] | join(" > ")' "$B/$1.explain")
	IXNAME=$(jq -r '[.executionStats.executionStages | .. | objects | select(.stage? == "IXSCAN") | .indexName] | join(", ")' "$B/$1.explain")
	BOUNDS=$(jq -r '[.executionStats.executionStages | .. | objects | select(.stage? == "IXSCAN") | .indexBounds // {} | to_entries[] | "\(.key) \(.value | join(" "))"] | join("; ")' "$B/$1.explain")
	NRET=$(jq -r '.executionStats.nReturned' "$B/$1.explain")
	KEYS=$(jq -r '.executionStats.totalKeysExamined' "$B/$1.explain")
	DOCS=$(jq -r '.executionStats.totalDocsExamined' "$B/$1.explain")
	MS=$(jq -r '.executionStats.executionTimeMillis' "$B/$1.explain")
	echo "   explain $1: $PLAN [$IXNAME] nReturned $NRET keys $KEYS docs $DOCS ${MS}ms" >&2
}
echo "== docfs explain" >&2
explain r_ix "$QR"
E_R_IX=("$PLAN" "$IXNAME" "$NRET" "$KEYS" "$DOCS" "$MS" "$BOUNDS")
[ "$IXNAME" = "$IX_AGE" ] || note "the 1% range query's plan is '$PLAN' on index '$IXNAME', not an IXSCAN of $IX_AGE"
explain r_nat "$QR?$NATURAL"
E_R_NAT=("$PLAN" "$IXNAME" "$NRET" "$KEYS" "$DOCS" "$MS" "$BOUNDS")
[ "$PLAN" = COLLSCAN ] || note "the 1% range query with $NATURAL runs '$PLAN', not a COLLSCAN"
explain c_ix "$QC"
E_C_IX=("$PLAN" "$IXNAME" "$NRET" "$KEYS" "$DOCS" "$MS" "$BOUNDS")
[ "$IXNAME" = "$IX_CA" ] || note "the compound query's plan is '$PLAN' on index '$IXNAME', not an IXSCAN of $IX_CA"
explain c_nat "$QC?$NATURAL"
E_C_NAT=("$PLAN" "$IXNAME" "$NRET" "$KEYS" "$DOCS" "$MS" "$BOUNDS")
[ "$PLAN" = COLLSCAN ] || note "the compound query with $NATURAL runs '$PLAN', not a COLLSCAN"

########################################################################################
# 2 and 4. The queries, docfs then sqlite3 (timed, warm)
# dquery NAME QUERY : times `cat query/QUERY | wc -l` (T_, N_ NAME), lists its _ids (untimed)
dquery() {
	QNAME=$1 QUERY=$2 # globals: warm_timeit's eval sees them
	warm_timeit 'cat "$QD/$QUERY" 2> "$B/$QNAME.err" | wc -l > "$B/$QNAME.n"'
	printf -v "T_$1" %s "$T"
	printf -v "N_$1" %s "$(cat "$B/$1.n")"
	[ -s "$B/$1.err" ] && problem "cat query/$2: $(head -n 3 "$B/$1.err")"
	cat "$QD/$2$(sep "$2")format=ids" 2> "$B/$1.ids.err" | sed 's/\.json$//' | sort > "$B/$1.ids"
	[ -s "$B/$1.ids.err" ] && problem "cat query/$2$(sep "$2")format=ids: $(head -n 3 "$B/$1.ids.err")"
	echo "   $1: $T s, $(cat "$B/$1.n") documents" >&2
}
# squery NAME SQL_WHERE : times sqlite3 `SELECT j … | wc -l` (T_, N_ NAME), lists its _ids
squery() {
	QNAME=$1 QUERY=$2
	warm_timeit 'sqlite3 "$DB" "SELECT j FROM t WHERE $QUERY" 2> "$B/$QNAME.err" | wc -l > "$B/$QNAME.n"'
	printf -v "T_$1" %s "$T"
	printf -v "N_$1" %s "$(cat "$B/$1.n")"
	[ -s "$B/$1.err" ] && die "sqlite3 failed: $(head -n 3 "$B/$1.err")"
	sqlite3 "$DB" "SELECT $XID FROM t WHERE $2" | sort > "$B/$1.ids"
	echo "   $1: $T s, $(cat "$B/$1.n") rows" >&2
}
echo "== 2. the 1% range query" >&2
dquery r_ix "$QR"
dquery r_nat "$QR?$NATURAL"
squery r_sq "$SQR"
echo "== 4. the compound query" >&2
dquery c_ix "$QC"
dquery c_nat "$QC?$NATURAL"
squery c_sq "$SQC"

# 2 and 4 read by one process: a process start costs a few ms on this kind of machine, as
# much as the indexed query itself; so python3 opens and reads each query file RUNS times
# (after one untimed run) and the median and best count.
# inproc NAME QUERY RUNS : sets M_NAME (median) and B_NAME (best), in seconds
inproc() {
	local med best
	python3 - "$QD/$2" "$3" > "$B/$1.inproc" 2>&1 <<'PY' || problem "reading query/$2 in one process: $(tail -n 2 "$B/$1.inproc")"
import statistics, sys, time
path, runs = sys.argv[1], int(sys.argv[2])
buf = bytearray(1 << 20)
ts = []
for i in range(runs + 1):
    t = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass
    if i:
        ts.append(time.perf_counter() - t)
print("%.6f %.6f" % (statistics.median(ts), min(ts)))
PY
	read -r med best < "$B/$1.inproc" || true
	printf -v "M_$1" %s "$med"
	printf -v "B_$1" %s "$best"
	echo "   $1 in one process: median ${med}s, best ${best}s" >&2
}
echo "== 2 and 4 read by one process" >&2
inproc r_ix "$QR" 31
inproc r_nat "$QR?$NATURAL" 7
inproc c_ix "$QC" 31
inproc c_nat "$QC?$NATURAL" 7

########################################################################################
# 3. Point queries by _id (timed, warm): a batch in one process on each side, then (for
# reference) one process per id on each side
echo "== 3. point queries ($NP _ids)" >&2
while read -r id; do printf "$SQL_P1\n" "$id"; done < "$B/point.ids" > "$B/point.sql"
warm_timeit 'xargs -a "$B/point.paths" -x cat > "$B/p_d.out" 2> "$B/p_d.err"'
T_P_D=$T
[ "$RC" -eq 0 ] || problem "cat of the $NP documents exited $RC: $(head -n 3 "$B/p_d.err")"
warm_timeit 'sqlite3 "$DB" < "$B/point.sql" > "$B/p_s.out" 2> "$B/p_s.err"'
T_P_S=$T
[ "$RC" -eq 0 ] || die "sqlite3 point queries exited $RC: $(head -n 3 "$B/p_s.err")"
warm_timeit 'while read -r p; do cat "$p" || exit 1; done < "$B/point.paths" > "$B/p_d1.out" 2> "$B/p_d1.err"'
T_P_D1=$T
[ "$RC" -eq 0 ] || problem "one cat per document exited $RC: $(head -n 3 "$B/p_d1.err")"
warm_timeit 'while read -r id; do sqlite3 "$DB" "$(printf "$SQL_P1" "$id")" || exit 1; done < "$B/point.ids" > "$B/p_s1.out" 2> "$B/p_s1.err"'
T_P_S1=$T
[ "$RC" -eq 0 ] || die "one sqlite3 per id exited $RC: $(head -n 3 "$B/p_s1.err")"
# the floor of a file read: the same files copied to a native directory (page cache warm)
mkdir "$B/native"
xargs -a "$B/point.paths" -x cp -t "$B/native" || problem "cp of the $NP documents out of the mount failed"
sed "s|^.*/|$B/native/|" "$B/point.paths" > "$B/native.paths"
warm_timeit 'xargs -a "$B/native.paths" -x cat > "$B/p_n.out"'
T_P_N=$T
cmp -s "$B/p_n.out" "$B/p_d.out" || problem "the $NP documents copied out of the mount differ from those read by cat"
echo "   docfs one cat ${T_P_D}s (native copies ${T_P_N}s), sqlite3 one script ${T_P_S}s; one process per id: docfs ${T_P_D1}s, sqlite3 ${T_P_S1}s" >&2
RSS_QUERY=$(vmhwm)

unmount
MOUNTED=0

########################################################################################
# Agreement
for q in r c; do
	n_ix=$(eval echo "\$N_${q}_ix") n_nat=$(eval echo "\$N_${q}_nat") n_sq=$(eval echo "\$N_${q}_sq")
	name=$([ $q = r ] && echo "the 1% range" || echo "the compound query")
	[ "$n_ix" -gt 0 ] || problem "$name matched nothing"
	[ "$n_ix" = "$n_nat" ] || problem "$name: indexed $n_ix documents, unindexed $n_nat"
	[ "$n_ix" = "$n_sq" ] || problem "$name: docfs $n_ix documents, sqlite3 $n_sq"
	for v in ix nat; do
		cmp -s "$B/${q}_$v.ids" "$B/${q}_sq.ids" ||
			problem "$name: docfs ($v) and sqlite3 list different _ids: $(diff "$B/${q}_$v.ids" "$B/${q}_sq.ids" | head -n 4 | tr '\n' ' ')"
	done
done
for e in "the 1% range, indexed:${E_R_IX[2]}:$N_r_ix" "the 1% range, \$natural:${E_R_NAT[2]}:$N_r_ix" \
	"the compound query, indexed:${E_C_IX[2]}:$N_c_ix" "the compound query, \$natural:${E_C_NAT[2]}:$N_c_ix"; do
	IFS=: read -r what got want <<< "$e"
	[ "$got" = "$want" ] || problem "explain of $what: nReturned $got, the query returned $want"
done
[ "${E_R_NAT[4]}" = "$N" ] || note "explain of the 1% range with \$natural examined ${E_R_NAT[4]} documents, not $N"
# the point queries: the same documents, in the same order (compact, keys sorted)
jq -cS . "$B/p_d.out" > "$B/p_d.norm" 2>/dev/null || problem "the $NP documents read through the mount are not JSON"
jq -cS . "$B/p_s.out" > "$B/p_s.norm"
jq -cS . "$B/p_d1.out" > "$B/p_d1.norm" 2>/dev/null || problem "the documents read one cat each are not JSON"
jq -cS . "$B/p_s1.out" > "$B/p_s1.norm"
[ "$(wc -l < "$B/p_d.norm")" -eq "$NP" ] || problem "docfs returned $(wc -l < "$B/p_d.norm") of the $NP documents"
cmp -s "$B/p_d.norm" "$B/p_s.norm" ||
	problem "point queries: docfs and sqlite3 return different documents: $(diff "$B/p_d.norm" "$B/p_s.norm" | head -n 2 | cut -c1-200 | tr '\n' ' ')"
cmp -s "$B/p_d.norm" "$B/p_d1.norm" || problem "point queries: one cat and one cat per file differ"
cmp -s "$B/p_s.norm" "$B/p_s1.norm" || problem "point queries: one sqlite3 script and one sqlite3 per id differ"
jq -r '._id["$oid"]' "$B/p_d.norm" | cmp -s - "$B/point.ids" || problem "point queries: docfs returned other _ids than asked"
T_TOTAL=$(($(date +%s) - T_START))

########################################################################################
# Report
NFMT=$(printf "%'d" "$N" 2>/dev/null || echo "$N")
pct() { awk -v a="$1" -v n="$N" 'BEGIN { printf "%.2f%%", 100 * a / n }'; }
cat <<EOF
## Indexes over $NFMT generated users

$VERSION, $DATE, \`tests/bench/index.sh\`${BENCH_MOUNT_OPTS:+ with mount options \`$BENCH_MOUNT_OPTS\`}; machine: $MACHINE; $TOOLS. Whole run: ${T_TOTAL} s.
The data: \`docfs generate examples/users.template.json -n $N --seed 1\` ($JSONL_SIZE), \`docfs import\`ed;
sqlite3 holds \`docfs export\` of it ($EXPORT_SIZE, the same documents with docfs's ObjectIds), one
document per row of \`CREATE TABLE t(j TEXT)\`.

### 1. Building the indexes

docfs: \`docfs index STORE test.users create SPEC\` with the store not mounted; sqlite3:
\`sqlite3 DB "CREATE INDEX … ON t(json_extract(…))"\`. One process and one transaction per
index on both sides, page cache warm (both just wrote the data), \`sync\` before each.

| index | docfs (s) | of which the build (\`buildMillis\`) | sqlite3 (s) | docfs / sqlite3 | peak RSS, docfs / sqlite3 |
|---|---:|---:|---:|---:|---:|
| \`{"user.age": 1}\` / \`t($XA)\` | $T_DBA | $MS_DBA ms | $T_SBA | $(div "$T_DBA" "$T_SBA") | $(rss_of "$B/ixa.rss") / $(rss_of "$B/sxa.rss") |
| \`{"user.address.city": 1, "user.age": 1}\` / \`t($XC, $XA)\` | $T_DBC | $MS_DBC ms | $T_SBC | $(div "$T_DBC" "$T_SBC") | $(rss_of "$B/ixc.rss") / $(rss_of "$B/sxc.rss") |
| both | $T_DB2 | | $T_SB2 | $(div "$T_DB2" "$T_SB2") | |

\`buildMillis\` is what \`docfs index STORE test.users list\` reports for the index (the scan and
the inserts, inside the transaction); the process time around it adds opening the store and
the commit.

Sizes before / after the two builds: docfs store $STORE_SIZE0 / $STORE_SIZE1, sqlite3 database
$DB_SIZE0 / $DB_SIZE1 (the latter also with \`t_id\` on \`$XID\`, built in
$T_SBI s for the point queries; docfs's \`_id_\` index exists from the import on).
\`docfs check STORE\` after the builds (every index entry matches its document): $CHECK_OK, in $T_CHECK s.

### 2-4. Queries through the mount (warm: run once untimed, then the best of 5 timed runs)

| query | documents | docfs, indexed (s) | docfs, \`?$NATURAL\` (s) | sqlite3, expression index (s) | indexed / sqlite3 | unindexed / indexed |
|---|---:|---:|---:|---:|---:|---:|
| 2. \`$QR\` (\`cat 'query/<q>' \| wc -l\`) | $N_r_ix ($(pct "$N_r_ix")) | $T_r_ix | $T_r_nat | $T_r_sq | $(div "$T_r_ix" "$T_r_sq") | $(div "$T_r_nat" "$T_r_ix" %.1f) |
| 4. \`$QC\` | $N_c_ix ($(pct "$N_c_ix")) | $T_c_ix | $T_c_nat | $T_c_sq | $(div "$T_c_ix" "$T_c_sq") | $(div "$T_c_nat" "$T_c_ix" %.1f) |
| 3. $NP random \`_id\`s, one process: \`xargs cat <id>.json…\` vs one sqlite3 running $NP SELECTs | $NP | $T_P_D | | $T_P_S | $(div "$T_P_D" "$T_P_S") | |
| 3. the same, one process per \`_id\` (\`cat\` / \`sqlite3\`) | $NP | $T_P_D1 | | $T_P_S1 | $(div "$T_P_D1" "$T_P_S1") | |

The same queries read by one process (python3 opens and reads the result file; one untimed run,
then 31 timed runs indexed, 7 unindexed): no process start in the figure.

| query | indexed, median / best (s) | \`?$NATURAL\`, median / best (s) | unindexed / indexed, medians | the same, bests |
|---|---:|---:|---:|---:|
| 2. \`$QR\` | $M_r_ix / $B_r_ix | $M_r_nat / $B_r_nat | $(div "$M_r_nat" "$M_r_ix" %.1f) | $(div "$B_r_nat" "$B_r_ix" %.1f) |
| 4. \`$QC\` | $M_c_ix / $B_c_ix | $M_c_nat / $B_c_nat | $(div "$M_c_nat" "$M_c_ix" %.1f) | $(div "$B_c_nat" "$B_c_ix" %.1f) |

For scale: the same $NP files copied out of the mount into a native directory, \`xargs cat\` of
them (page cache warm) takes $T_P_N s, the floor of reading files without FUSE.

| goal | result |
|---|---|
| 1. both indexes built within 2x of sqlite3 ($(div "$T_DB2" "$T_SB2") x) | $(le "$T_DB2" "$T_SB2" 2) |
| 2. the 1% range, indexed, within 2x of sqlite3 ($(div "$T_r_ix" "$T_r_sq") x) | $(le "$T_r_ix" "$T_r_sq" 2) |
| 2. the 1% range, indexed, at least 50x faster than unindexed, read by one process (medians: $(div "$M_r_nat" "$M_r_ix" %.1f) x) | $(le "$M_r_ix" "$(div "$M_r_nat" 50 %.6f)" 1) |
| 2. the same through \`cat \| wc -l\`, process start included ($(div "$T_r_nat" "$T_r_ix" %.1f) x) | $(le "$T_r_ix" "$(div "$T_r_nat" 50 %.6f)" 1) |
| 4. the compound query, indexed, within 2x of sqlite3 ($(div "$T_c_ix" "$T_c_sq") x; the goal of 2, for reference) | $(le "$T_c_ix" "$T_c_sq" 2) |
| 4. the compound query, at least 50x faster than unindexed ($(div "$T_c_nat" "$T_c_ix" %.1f) x; for reference) | $(le "$T_c_ix" "$(div "$T_c_nat" 50 %.6f)" 1) |
| 3. $NP point reads in one process within 2x of sqlite3 ($(div "$T_P_D" "$T_P_S") x; for reference) | $(le "$T_P_D" "$T_P_S" 2) |

The plans, from \`cat 'explain/<q>?verbosity=executionStats'\` (docfs) and \`EXPLAIN QUERY PLAN\` (sqlite3):

| query | docfs plan (executionStages) | index | indexBounds | nReturned | keysExamined | docsExamined | executionTimeMillis |
|---|---|---|---|---:|---:|---:|---:|
| 2, indexed | ${E_R_IX[0]} | ${E_R_IX[1]} | ${E_R_IX[6]} | ${E_R_IX[2]} | ${E_R_IX[3]} | ${E_R_IX[4]} | ${E_R_IX[5]} |
| 2, \`?$NATURAL\` | ${E_R_NAT[0]} | ${E_R_NAT[1]} | ${E_R_NAT[6]} | ${E_R_NAT[2]} | ${E_R_NAT[3]} | ${E_R_NAT[4]} | ${E_R_NAT[5]} |
| 4, indexed | ${E_C_IX[0]} | ${E_C_IX[1]} | ${E_C_IX[6]} | ${E_C_IX[2]} | ${E_C_IX[3]} | ${E_C_IX[4]} | ${E_C_IX[5]} |
| 4, \`?$NATURAL\` | ${E_C_NAT[0]} | ${E_C_NAT[1]} | ${E_C_NAT[6]} | ${E_C_NAT[2]} | ${E_C_NAT[3]} | ${E_C_NAT[4]} | ${E_C_NAT[5]} |

\`\`\`
$(cat "$B/eqp.txt")
\`\`\`

Agreement: 2 matched $N_r_ix documents indexed, $N_r_nat unindexed, $N_r_sq in sqlite3; 4 matched $N_c_ix / $N_c_nat / $N_c_sq;
for both, the indexed and unindexed \`?format=ids\` list the same _ids as sqlite3. The $NP point reads
returned the same documents (\`jq -cS\`) on both sides and in both ways: $([ "$FAILED" -eq 0 ] && echo yes || echo NO).

| figure | value |
|---|---|
| docfs daemon peak RSS (VmHWM) right after mounting | $(kib_to_mib "$RSS_MOUNT") |
| docfs daemon peak RSS (VmHWM) after the queries | $(kib_to_mib "$RSS_QUERY") |
EOF
if [ ${#NOTES[@]} -gt 0 ]; then
	echo
	echo "Unexpected plans (results were still checked):"
	for n in "${NOTES[@]}"; do echo "- $n"; done
fi

if [ "$FAILED" -ne 0 ]; then
	echo
	echo "**docfs misbehaved or the results disagreed during this run** (see the PROBLEM lines on stderr); the figures above are not valid."
	echo "bench: disagreement or docfs error during the run (see PROBLEM lines above)" >&2
	exit 1
fi
