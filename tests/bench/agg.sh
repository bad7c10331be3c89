#!/usr/bin/env bash
# tests/bench/agg.sh [DOCFS] - docfs aggregation and updateMany through the mount against
# mingo's Aggregator (data preloaded in memory) and sqlite3 (GROUP BY / UPDATE over
# json_extract on a table of the same JSON lines), in one run, over 1,000,000 generated users:
#   A1   [{$group: {_id: "$user.address.city", avgAge: {$avg: "$user.age"}}}]
#   A2   [{$match: {"user.gender": "female"}},
#         {$group: {_id: "$user.address.city", n: {$sum: 1}, avgAge: {$avg: "$user.age"}}},
#         {$sort: {n: -1}}]
#   U    updateMany {"user.age": {$lt: 10}} (about 10%) {$inc: {"user.address.zip_code": 1}}
# Every tool runs each aggregation once untimed (warm-up), then the second run is timed; the
# update also runs twice (warm-up, then timed), so every tool adds 2 to the same zip codes.
# Loading the data (import, .import, JSON.parse) is not timed. The tools must agree on every
# group's _id, count and average (to 9 decimals), A2's order (count descending), the
# update's modified count and, afterwards, the sum of the updated zip codes; a disagreement or
# a docfs error exits 1, no timing does.
# Prints Markdown tables on stdout, progress on stderr. Needs node (with mingo installed in
# tests/query/diff/node_modules: `npm ci` there), jq, sqlite3 and /dev/fuse.
# Environment: BENCH_DIR (temporary directory's parent, default /tmp), BENCH_N (1000000),
# BENCH_MOUNT_OPTS (extra comma-separated `docfs mount -o` options).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/bench/lib.sh"
DOCFS=${1:-$ROOT/build/docfs}
case $DOCFS in /*) ;; *) DOCFS=$PWD/$DOCFS ;; esac
N=${BENCH_N:-1000000}
TEMPLATE=$ROOT/examples/users.template.json
MINGO_JS=$ROOT/tests/bench/agg_mingo.js
export NODE_PATH=$ROOT/tests/query/diff/node_modules${NODE_PATH:+:$NODE_PATH}

missing=()
for tool in sqlite3 jq node fusermount3 pgrep mountpoint; do
	command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] ||
	die "missing tools: ${missing[*]} (e.g. apt-get install sqlite3 jq nodejs fuse3 procps util-linux)"
[ -x "$DOCFS" ] || die "no docfs binary at $DOCFS (build it: meson setup build-rel --buildtype=release && ninja -C build-rel)"
[ -e /dev/fuse ] || die "no /dev/fuse"
[ -f "$TEMPLATE" ] || die "no template at $TEMPLATE"
node -e 'require("mingo")' 2>/dev/null ||
	die "mingo not found under $ROOT/tests/query/diff/node_modules (npm ci --prefix tests/query/diff)"

B=$(mktemp -d "${BENCH_DIR:-/tmp}/docfs-abench.XXXXXX")
STORE=$B/store
MNT=$B/mnt
MOUNTED=0
FAILED=0

. "$ROOT/tests/bench/onemount.sh" # daemon_pid, unmount, the EXIT trap, problem, warm_timeit, ...

# norm: "_id<TAB>count<TAB>avg" lines -> the same with avg rounded to 9 decimals
norm() { awk -F'\t' -v OFS='\t' '{ $3 = sprintf("%.9f", $3); print }'; }
# docfs_lines: aggregate results (JSON Lines) -> "_id<TAB>count<TAB>avg" lines
docfs_lines() { jq -r '"\(._id)\t\(.n // "-")\t\(.avgAge)"' | norm; }
# descending FILE: are the counts (column 2) in non-increasing order?
descending() { awk -F'\t' 'NR > 1 && $2 > prev { bad = 1 } { prev = $2 } END { exit bad }' "$1"; }

CPU=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
MACHINE="$(nproc) cores ($CPU), $(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) RAM, Linux $(uname -r), $(stat -f -c %T "$B") at $B"
DATE=$(date -u +%Y-%m-%d)
VERSION=$("$DOCFS" version 2>/dev/null || echo "docfs ?")
TOOLS="node $(node --version) with mingo $(node -p 'require("mingo/package.json").version' 2>/dev/null || echo '?'), sqlite3 $(sqlite3 --version | cut -d' ' -f1)"
echo "docfs aggregation benchmark: $VERSION ($DOCFS), $DATE" >&2
echo "machine: $MACHINE; $TOOLS" >&2
T_START=$(date +%s)

A1='[{$group: {_id: "$user.address.city", avgAge: {$avg: "$user.age"}}}]'
A2='[{$match: {"user.gender": "female"}}, {$group: {_id: "$user.address.city", n: {$sum: 1}, avgAge: {$avg: "$user.age"}}}, {$sort: {n: -1}}]'
A1_JSON='[{"$group": {"_id": "$user.address.city", "avgAge": {"$avg": "$user.age"}}}]'
A2_JSON='[{"$match": {"user.gender": "female"}}, {"$group": {"_id": "$user.address.city", "n": {"$sum": 1}, "avgAge": {"$avg": "$user.age"}}}, {"$sort": {"n": -1}}]'
UF='{"user.age": {$lt: 10}}'
UU='{$inc: {"user.address.zip_code": 1}}'
CITY="json_extract(j,'\$.user.address.city')"
AGE="json_extract(j,'\$.user.age')"
ZIP="json_extract(j,'\$.user.address.zip_code')"
SA1="SELECT $CITY, '-', avg($AGE) FROM t GROUP BY 1"
SA2="SELECT $CITY, count(*) AS n, avg($AGE) FROM t WHERE json_extract(j,'\$.user.gender')='female' GROUP BY 1 ORDER BY n DESC"
SU="UPDATE t SET j = json_set(j, '\$.user.address.zip_code', $ZIP + 1) WHERE $AGE < 10; SELECT changes();"
# after the updates: the sum of the zip codes the update changed (both runs)
ZSUM='[{$match: {"user.age": {$lt: 10}}}, {$group: {_id: null, s: {$sum: "$user.address.zip_code"}}}]'
SZSUM="SELECT sum($ZIP) FROM t WHERE $AGE < 10"

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
# The alternatives read the collection as docfs holds it (the same documents and ObjectIds).
"$DOCFS" export "$STORE" test.users > "$B/users-ids.jsonl" || die "docfs export failed"
[ "$(wc -l < "$B/users-ids.jsonl")" -eq "$N" ] || die "docfs export wrote $(wc -l < "$B/users-ids.jsonl") lines, not $N"
EXPORT_SIZE=$(bytes_h "$B/users-ids.jsonl")

# sqlite3: every line is one row of one TEXT column (as in run.sh: ASCII mode, no quoting).
sqlite3 "$B/users.db" > "$B/sqlite.out" 2>&1 <<EOF || die "sqlite3 import failed: $(tail -n 3 "$B/sqlite.out")"
CREATE TABLE t(j TEXT);
.mode ascii
.separator "\\037" "\\n"
BEGIN;
.import $B/users-ids.jsonl t
COMMIT;
EOF
[ "$(sqlite3 "$B/users.db" 'SELECT count(*) FROM t')" -eq "$N" ] || die "sqlite3 table does not have $N rows"

"$DOCFS" mount -o "log=$B/log${BENCH_MOUNT_OPTS:+,$BENCH_MOUNT_OPTS}" "$STORE" "$MNT" || die "docfs mount failed"
MOUNTED=1
mountpoint -q "$MNT" || die "$MNT is not mounted after docfs mount returned"
[ -n "$(daemon_pid)" ] || die "cannot find the docfs daemon (pgrep -f '${DOCFS##*/} mount .*$STORE $MNT')"
AD=$MNT/test/users/aggregate
RSS_MOUNT=$(vmhwm)

########################################################################################
# docfs
echo "== docfs" >&2
warm_timeit 'cat "$AD/$A1" > "$B/d1.json" 2> "$B/d1.err"'
T_D1=$T
[ "$RC" -eq 0 ] || problem "cat aggregate/$A1 exited $RC: $(head -n 3 "$B/d1.err")"
warm_timeit 'cat "$AD/$A2" > "$B/d2.json" 2> "$B/d2.err"'
T_D2=$T
[ "$RC" -eq 0 ] || problem "cat aggregate/$A2 exited $RC: $(head -n 3 "$B/d2.err")"
RSS_AGG=$(vmhwm)
docfs_lines < "$B/d1.json" | sort > "$B/a1.docfs" || problem "aggregate/$A1 did not print JSON: $(head -c 300 "$B/d1.json")"
docfs_lines < "$B/d2.json" > "$B/a2.docfs" || problem "aggregate/$A2 did not print JSON: $(head -c 300 "$B/d2.json")"
echo "   A1 ${T_D1}s, A2 ${T_D2}s" >&2

########################################################################################
# mingo
echo "== mingo" >&2
node --max-old-space-size=16384 "$MINGO_JS" "$B/users-ids.jsonl" "$B/mingo" "$A1_JSON" "$A2_JSON" \
	> "$B/mingo.out" 2> "$B/mingo.err" || die "agg_mingo.js failed: $(tail -n 5 "$B/mingo.err")"
grep -Eq '^A2_S=[0-9.]+$' "$B/mingo.out" || die "agg_mingo.js printed: $(head -c 300 "$B/mingo.out")"
M_LOAD=$(sed -n 's/^LOAD_S=//p' "$B/mingo.out")
T_M1=$(sed -n 's/^A1_S=//p' "$B/mingo.out")
T_M2=$(sed -n 's/^A2_S=//p' "$B/mingo.out")
norm < "$B/mingo.a1" | sort > "$B/a1.mingo"
norm < "$B/mingo.a2" > "$B/a2.mingo"
echo "   A1 ${T_M1}s, A2 ${T_M2}s; load ${M_LOAD}s not timed" >&2

########################################################################################
# sqlite3 aggregations
echo "== sqlite3" >&2
warm_timeit 'sqlite3 -separator "	" "$B/users.db" "$SA1" > "$B/s1.out"'
T_S1=$T
norm < "$B/s1.out" | sort > "$B/a1.sqlite"
warm_timeit 'sqlite3 -separator "	" "$B/users.db" "$SA2" > "$B/s2.out"'
T_S2=$T
norm < "$B/s2.out" > "$B/a2.sqlite"
echo "   A1 ${T_S1}s, A2 ${T_S2}s" >&2

########################################################################################
# updateMany (changes the data: after the aggregations)
echo "== updateMany" >&2
# upd: one updateMany through the mount, its result read back on the same descriptor
upd() {
	exec 3<>"$MNT/test/users/update/$UF?multi=true"
	printf '%s' "$UU" >&3
	cat <&3 > "$B/u.json"
	exec 3>&-
}
warm_timeit 'upd 2> "$B/u.err"'
T_DU=$T
[ "$RC" -eq 0 ] || problem "update/$UF?multi=true exited $RC: $(head -n 3 "$B/u.err")"
# (the counts are int64: type-exact Extended JSON writes {"$numberLong": "…"})
N_DU=$(jq -r '.modifiedCount | .["$numberLong"]? // .' "$B/u.json" 2>/dev/null || echo "?")
N_DUM=$(jq -r '.matchedCount | .["$numberLong"]? // .' "$B/u.json" 2>/dev/null || echo "?")
warm_timeit 'sqlite3 "$B/users.db" "$SU" > "$B/su.out"'
T_SU=$T
N_SU=$(tail -n 1 "$B/su.out")
echo "   docfs ${T_DU}s ($N_DU modified of $N_DUM matched), sqlite3 ${T_SU}s ($N_SU changes)" >&2
Z_D=$(cat "$AD/$ZSUM" | jq -r '.s | .["$numberLong"]? // .')
Z_S=$(sqlite3 "$B/users.db" "$SZSUM")
RSS_ALL=$(vmhwm)

unmount
MOUNTED=0

########################################################################################
# Agreement
[ -s "$B/a1.docfs" ] || problem "A1: docfs returned no groups"
[ -s "$B/a2.docfs" ] || problem "A2: docfs returned no groups"
for t in mingo sqlite; do
	cmp -s "$B/a1.docfs" "$B/a1.$t" ||
		problem "A1: docfs and $t disagree: $(diff "$B/a1.docfs" "$B/a1.$t" | head -n 6 | tr '\n' ' ')"
	cmp -s <(sort "$B/a2.docfs") <(sort "$B/a2.$t") ||
		problem "A2: docfs and $t disagree: $(diff <(sort "$B/a2.docfs") <(sort "$B/a2.$t") | head -n 6 | tr '\n' ' ')"
	descending "$B/a2.$t" || problem "A2: $t's counts are not in descending order"
done
descending "$B/a2.docfs" || problem "A2: docfs's counts are not in descending order"
[ "$N_DU" = "$N_SU" ] || problem "update: docfs modified $N_DU documents, sqlite3 changed $N_SU rows"
[ "$N_DU" = "$N_DUM" ] || problem "update: docfs matched $N_DUM documents but modified $N_DU"
[ "$Z_D" = "$Z_S" ] || problem "after the updates: docfs's sum of the zip codes is $Z_D, sqlite3's $Z_S"
A1_GROUPS=$(awk -F'\t' '{ printf "%s%s %.2f", (NR > 1 ? ", " : ""), $1, $3 }' "$B/a1.docfs")
A2_GROUPS=$(awk -F'\t' '{ printf "%s%s %d", (NR > 1 ? ", " : ""), $1, $2 }' "$B/a2.docfs")
SAME=$([ "$FAILED" -eq 0 ] && echo yes || echo NO)
T_TOTAL=$(($(date +%s) - T_START))

########################################################################################
# Report
NFMT=$(printf "%'d" "$N" 2>/dev/null || echo "$N")
cat <<EOF
## Aggregation and updateMany over $NFMT generated users (unindexed)

$VERSION, $DATE, \`tests/bench/agg.sh\`${BENCH_MOUNT_OPTS:+ with mount options \`$BENCH_MOUNT_OPTS\`}; machine: $MACHINE; $TOOLS. Whole run: ${T_TOTAL} s.

- A1 = \`$A1\`
- A2 = \`$A2\`
- U = updateMany \`$UF\` \`$UU\` ($N_DU documents)

Seconds (each run once untimed to warm the caches, the second run timed), and the ratio
docfs time / the alternative's time (below 1: docfs is faster).

| | docfs | mingo (in memory) | sqlite3 | docfs / mingo | docfs / sqlite3 | faster than mingo | within 2x of sqlite3 |
|---|---:|---:|---:|---:|---:|---|---|
| A1, \$group by city, \$avg age | $T_D1 | $T_M1 | $T_S1 | $(div "$T_D1" "$T_M1") | $(div "$T_D1" "$T_S1") | $(lt "$T_D1" "$T_M1") | $(lt "$T_D1" "$T_S1" 2) |
| A2, \$match + \$group + \$sort | $T_D2 | $T_M2 | $T_S2 | $(div "$T_D2" "$T_M2") | $(div "$T_D2" "$T_S2") | $(lt "$T_D2" "$T_M2") | $(lt "$T_D2" "$T_S2" 2) |
| U, updateMany \$inc over 10% | $T_DU | | $T_SU | | $(div "$T_DU" "$T_SU") | | $(lt "$T_DU" "$T_SU" 2) |

What each column runs (the alternatives read \`users-ids.jsonl\`, $EXPORT_SIZE: \`docfs export\`
of the collection, i.e. the generated $JSONL_SIZE with the ObjectIds docfs assigned):

| | A1, A2 | U |
|---|---|---|
| docfs | \`cat 'aggregate/<A>' > file\` | \`exec 3<>'update/<filter>?multi=true'; printf '<update>' >&3; cat <&3\` |
| mingo | \`new Aggregator(A).run(docs)\` | |
| sqlite3 | \`SELECT json_extract(j,'\$.user.address.city'), count(*), avg(json_extract(j,'\$.user.age')) FROM t [WHERE …] GROUP BY 1 [ORDER BY n DESC]\` | \`UPDATE t SET j = json_set(j, '\$.user.address.zip_code', json_extract(…) + 1) WHERE json_extract(j,'\$.user.age') < 10\` (default journal, synchronous=FULL; docfs uses WAL, synchronous=NORMAL) |

Agreement ($SAME): every group's _id, count and average (9 decimals) equal in docfs, mingo and
sqlite3, A2 in descending count in all three; A1: $A1_GROUPS; A2: $A2_GROUPS. updateMany
modified $N_DU documents in docfs (matched $N_DUM) and $N_SU rows in sqlite3; after both runs
the updated zip codes sum to $Z_D in docfs and $Z_S in sqlite3.

| figure | value |
|---|---|
| docfs daemon peak RSS (VmHWM) right after mounting | $(kib_to_mib "$RSS_MOUNT") |
| docfs daemon peak RSS (VmHWM) after the aggregations | $(kib_to_mib "$RSS_AGG") |
| docfs daemon peak RSS (VmHWM) after the updates | $(kib_to_mib "$RSS_ALL") |
| mingo: loading and parsing the JSON Lines into memory (not timed above) | $M_LOAD s |
EOF

if [ "$FAILED" -ne 0 ]; then
	echo
	echo "**docfs misbehaved or the tools disagreed during this run** (see the PROBLEM lines on stderr); the figures above are not valid."
	echo "bench: disagreement or docfs error during the run (see PROBLEM lines above)" >&2
	exit 1
fi
