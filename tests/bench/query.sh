#!/usr/bin/env bash
# tests/bench/query.sh [DOCFS] - docfs find() through query/ paths against mingo, jq and
# sqlite3, in one run, over 1,000,000 generated users (unindexed, full scans everywhere):
#   Q1        {"user.address.city": "Beijing", "user.age": {$gt: 60}}: all matching documents
#             (`cat query/<Q1> | wc -l`) and the count alone (`?count=1`);
#   Q2        {"user.gender": "female"}?sort={"user.age": -1, "user.name.last": 1}&limit=10.
# Every tool runs each query once untimed (warm-up: page cache, SQLite cache, V8 JIT), then
# the second run is timed. Loading the data (import, .import, JSON.parse) is not timed.
# All tools must agree on the Q1 count, docfs and sqlite3 on the set of Q1 _ids, and all on
# the Q2 top 10 (age, last name, _id); a disagreement or a docfs error exits 1, no timing does.
# Prints Markdown tables on stdout, progress on stderr. Needs node (with mingo installed in
# tests/query/diff/node_modules: `npm ci` there), jq, sqlite3 and /dev/fuse.
# Environment: BENCH_DIR (temporary directory's parent, default /tmp), BENCH_N_QUERY
# (1000000), BENCH_MOUNT_OPTS (extra comma-separated `docfs mount -o` options).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/bench/lib.sh"
DOCFS=${1:-$ROOT/build/docfs}
case $DOCFS in /*) ;; *) DOCFS=$PWD/$DOCFS ;; esac
N=${BENCH_N_QUERY:-1000000}
TEMPLATE=$ROOT/examples/users.template.json
MINGO_JS=$ROOT/tests/bench/query_mingo.js
export NODE_PATH=$ROOT/tests/query/diff/node_modules${NODE_PATH:+:$NODE_PATH}

missing=()
for tool in sqlite3 jq node fusermount3 pgrep mountpoint; do
	command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] ||
	die "missing tools: ${missing[*]} (e.g. apt-get install sqlite3 jq nodejs fuse3 procps util-linux)"
[ -x "$DOCFS" ] || die "no docfs binary at $DOCFS (build it: meson setup build --buildtype=release && ninja -C build)"
[ -e /dev/fuse ] || die "no /dev/fuse"
[ -f "$TEMPLATE" ] || die "no template at $TEMPLATE"
node -e 'require("mingo")' 2>/dev/null ||
	die "mingo not found under $ROOT/tests/query/diff/node_modules (cd tests/query/diff && npm ci)"

B=$(mktemp -d "${BENCH_DIR:-/tmp}/docfs-qbench.XXXXXX")
STORE=$B/store
MNT=$B/mnt
MOUNTED=0
FAILED=0

. "$ROOT/tests/bench/onemount.sh" # daemon_pid, unmount, the EXIT trap, problem, warm_timeit, ...


# q2_lines: JSON documents on stdin -> "age<TAB>last<TAB>_id" lines (the Q2 comparison form)
q2_lines() { jq -r '"\(.user.age)\t\(.user.name.last)\t\(._id["$oid"])"'; }

CPU=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
MACHINE="$(nproc) cores ($CPU), $(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) RAM, Linux $(uname -r), $(stat -f -c %T "$B") at $B"
DATE=$(date -u +%Y-%m-%d)
VERSION=$("$DOCFS" version 2>/dev/null || echo "docfs ?")
TOOLS="node $(node --version) with mingo $(node -p 'require("mingo/package.json").version' 2>/dev/null || echo '?'), $(jq --version), sqlite3 $(sqlite3 --version | cut -d' ' -f1)"
echo "docfs query benchmark: $VERSION ($DOCFS), $DATE" >&2
echo "machine: $MACHINE; $TOOLS" >&2
T_START=$(date +%s)

Q1='{"user.address.city": "Beijing", "user.age": {$gt: 60}}'
Q2='{"user.gender": "female"}?sort={"user.age": -1, "user.name.last": 1}&limit=10'
JQ1='select(.user.address.city == "Beijing" and .user.age > 60)'
JQ2='map(select(.user.gender == "female")) | sort_by(-.user.age, .user.name.last, ._id["$oid"]) | .[:10][]'
SQ1="json_extract(j,'\$.user.address.city')='Beijing' AND json_extract(j,'\$.user.age')>60"
SQ2="SELECT json_extract(j,'\$.user.age'), json_extract(j,'\$.user.name.last'), json_extract(j,'\$._id.\"\$oid\"')
 FROM t WHERE json_extract(j,'\$.user.gender')='female'
 ORDER BY json_extract(j,'\$.user.age') DESC, json_extract(j,'\$.user.name.last'), json_extract(j,'\$._id.\"\$oid\"')
 LIMIT 10"

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
# The alternatives read the collection as docfs holds it: the same documents with the
# ObjectIds docfs gave them, so that Q2's ties can be broken by _id as docfs does.
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
QD=$MNT/test/users/query
RSS_MOUNT=$(vmhwm)

########################################################################################
# docfs
echo "== docfs" >&2
warm_timeit 'cat "$QD/$Q1" 2> "$B/d1.err" | wc -l > "$B/d1.n"'
T_D1=$T
[ -s "$B/d1.err" ] && problem "cat query/$Q1: $(head -n 3 "$B/d1.err")"
N_D1=$(cat "$B/d1.n")
warm_timeit 'cat "$QD/$Q1?count=1" > "$B/d1c.n" 2> "$B/d1c.err"'
T_D1C=$T
[ "$RC" -eq 0 ] || problem "cat query/$Q1?count=1 exited $RC: $(head -n 3 "$B/d1c.err")"
N_D1C=$(tr -d '\n' < "$B/d1c.n")
warm_timeit 'cat "$QD/$Q2" > "$B/d2.json" 2> "$B/d2.err"'
T_D2=$T
[ "$RC" -eq 0 ] || problem "cat query/$Q2 exited $RC: $(head -n 3 "$B/d2.err")"
RSS_QUERY=$(vmhwm)
q2_lines < "$B/d2.json" > "$B/q2.docfs" 2>/dev/null || problem "query/$Q2 did not print JSON documents: $(head -c 300 "$B/d2.json")"
# untimed: the matching _ids, to compare with sqlite3's
cat "$QD/$Q1?format=ids" 2>/dev/null | sed 's/\.json$//' | sort > "$B/ids.docfs" ||
	problem "cat query/$Q1?format=ids failed"
echo "   Q1 ${T_D1}s ($N_D1 lines), Q1 count ${T_D1C}s ($N_D1C), Q2 ${T_D2}s" >&2

########################################################################################
# mingo
echo "== mingo" >&2
node --max-old-space-size=16384 "$MINGO_JS" "$B/users-ids.jsonl" "$B/q2.mingo" > "$B/mingo.out" 2> "$B/mingo.err" ||
	die "query_mingo.js failed: $(tail -n 5 "$B/mingo.err")"
grep -Eq '^Q2_S=[0-9.]+$' "$B/mingo.out" || die "query_mingo.js printed: $(head -c 300 "$B/mingo.out")"
M_LOAD=$(sed -n 's/^LOAD_S=//p' "$B/mingo.out")
T_M1=$(sed -n 's/^Q1_S=//p' "$B/mingo.out")
N_M1=$(sed -n 's/^Q1_N=//p' "$B/mingo.out")
T_M1C=$(sed -n 's/^Q1C_S=//p' "$B/mingo.out")
N_M1C=$(sed -n 's/^Q1C_N=//p' "$B/mingo.out")
T_M2=$(sed -n 's/^Q2_S=//p' "$B/mingo.out")
echo "   Q1 ${T_M1}s ($N_M1), Q1 count ${T_M1C}s ($N_M1C), Q2 ${T_M2}s; load ${M_LOAD}s not timed" >&2

########################################################################################
# jq
echo "== jq" >&2
warm_timeit 'jq -c "$JQ1" "$B/users-ids.jsonl" | wc -l > "$B/j1.n"'
T_J1=$T N_J1=$(cat "$B/j1.n")
warm_timeit 'jq -n "reduce (inputs | $JQ1) as \$d (0; . + 1)" "$B/users-ids.jsonl" > "$B/j1c.n"'
T_J1C=$T N_J1C=$(cat "$B/j1c.n")
warm_timeit 'jq -s -c "$JQ2" "$B/users-ids.jsonl" > "$B/j2.json"'
T_J2=$T
q2_lines < "$B/j2.json" > "$B/q2.jq"
echo "   Q1 ${T_J1}s ($N_J1), Q1 count ${T_J1C}s ($N_J1C), Q2 (jq -s) ${T_J2}s" >&2

########################################################################################
# sqlite3
echo "== sqlite3" >&2
warm_timeit 'sqlite3 "$B/users.db" "SELECT j FROM t WHERE $SQ1" | wc -l > "$B/s1.n"'
T_S1=$T N_S1=$(cat "$B/s1.n")
warm_timeit 'sqlite3 "$B/users.db" "SELECT count(*) FROM t WHERE $SQ1" > "$B/s1c.n"'
T_S1C=$T N_S1C=$(cat "$B/s1c.n")
warm_timeit 'sqlite3 -separator "	" "$B/users.db" "$SQ2" > "$B/q2.sqlite"'
T_S2=$T
sqlite3 "$B/users.db" "SELECT json_extract(j,'\$._id.\"\$oid\"') FROM t WHERE $SQ1" | sort > "$B/ids.sqlite"
echo "   Q1 ${T_S1}s ($N_S1), Q1 count ${T_S1C}s ($N_S1C), Q2 ${T_S2}s" >&2

unmount
MOUNTED=0

########################################################################################
# Agreement
for v in "docfs ?count=1:$N_D1C" "mingo:$N_M1" "mingo count:$N_M1C" "jq:$N_J1" "jq count:$N_J1C" \
	"sqlite3 rows:$N_S1" "sqlite3 count(*):$N_S1C"; do
	[ "${v##*:}" = "$N_D1" ] || problem "Q1 count: docfs cat | wc -l gave $N_D1, ${v%:*} gave ${v##*:}"
done
[ "$N_D1" -gt 0 ] || problem "Q1 matched nothing"
cmp -s "$B/ids.docfs" "$B/ids.sqlite" ||
	problem "Q1: docfs ?format=ids and sqlite3 list different _ids: $(diff "$B/ids.docfs" "$B/ids.sqlite" | head -n 4 | tr '\n' ' ')"
[ "$(wc -l < "$B/q2.docfs")" -eq 10 ] || problem "Q2: docfs printed $(wc -l < "$B/q2.docfs") documents, not 10"
for t in mingo jq sqlite; do
	cmp -s "$B/q2.docfs" "$B/q2.$t" ||
		problem "Q2: docfs and $t disagree on the top 10 (age, last, _id): $(diff "$B/q2.docfs" "$B/q2.$t" | head -n 4 | tr '\n' ' ')"
done
Q2_TOP=$(awk -F'\t' '{ k[$1 " " $2]++ } END { for (x in k) printf "%s%s x%d", (n++ ? ", " : ""), x, k[x] }' "$B/q2.docfs")
Q2_SAME=$([ "$FAILED" -eq 0 ] && echo yes || echo NO)
T_TOTAL=$(($(date +%s) - T_START))

########################################################################################
# Report
NFMT=$(printf "%'d" "$N" 2>/dev/null || echo "$N")
row() { # LABEL DOCFS MINGO JQ SQLITE
	printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$1" "$2" "$3" "$4" "$5" \
		"$(div "$2" "$3")" "$(div "$2" "$4")" "$(div "$2" "$5")"
}
goal() { # LABEL DOCFS MINGO JQ SQLITE
	printf '| %s | %s | %s | %s |\n' "$1" "$(lt "$2" "$3")" "$(lt "$2" "$4")" "$(lt "$2" "$5" 2)"
}
cat <<EOF
## Queries over $NFMT generated users (unindexed)

$VERSION, $DATE, \`tests/bench/query.sh\`${BENCH_MOUNT_OPTS:+ with mount options \`$BENCH_MOUNT_OPTS\`}; machine: $MACHINE; $TOOLS. Whole run: ${T_TOTAL} s.

- Q1 = \`$Q1\`
- Q2 = \`$Q2\` (the alternatives sort on \`_id\` last, which is docfs's tie order)

Seconds (each query run once untimed to warm the caches, the second run timed), and the
ratio docfs time / the alternative's time (below 1: docfs is faster).

| query | docfs | mingo | jq | sqlite3 | docfs / mingo | docfs / jq | docfs / sqlite3 |
|---|---:|---:|---:|---:|---:|---:|---:|
EOF
row "Q1, all matching documents" "$T_D1" "$T_M1" "$T_J1" "$T_S1"
row "Q1, count only" "$T_D1C" "$T_M1C" "$T_J1C" "$T_S1C"
row "Q2, sort + limit 10" "$T_D2" "$T_M2" "$T_J2" "$T_S2"
cat <<EOF

| goal | docfs faster than mingo | docfs faster than jq | docfs within 2x of sqlite3 |
|---|---|---|---|
EOF
goal "Q1, all matching documents" "$T_D1" "$T_M1" "$T_J1" "$T_S1"
goal "Q1, count only" "$T_D1C" "$T_M1C" "$T_J1C" "$T_S1C"
goal "Q2, sort + limit 10" "$T_D2" "$T_M2" "$T_J2" "$T_S2"
cat <<EOF

What each column runs (the alternatives read \`users-ids.jsonl\`, $EXPORT_SIZE: \`docfs export\`
of the collection, i.e. the generated $JSONL_SIZE with the ObjectIds docfs assigned):

| | Q1, all | Q1, count | Q2 |
|---|---|---|---|
| docfs | \`cat 'query/<Q1>' \| wc -l\` | \`cat 'query/<Q1>?count=1'\` | \`cat 'query/<Q2>'\` |
| mingo | \`new Query(Q1).find(docs).all()\` | \`….all().length\` (no cursor count in mingo 7) | \`….find(docs).sort({…, _id: 1}).limit(10).all()\` |
| jq | \`jq -c '$JQ1' \| wc -l\` | \`jq -n 'reduce (inputs \| select(…)) as \$d (0; . + 1)'\` | \`jq -s -c 'map(select(…)) \| sort_by(-.user.age, .user.name.last, ._id["\$oid"]) \| .[:10][]'\` |
| sqlite3 | \`sqlite3 DB "SELECT j FROM t WHERE json_extract(…)…" \| wc -l\` | \`SELECT count(*) FROM t WHERE …\` | \`… ORDER BY json_extract(j,'\$.user.age') DESC, json_extract(j,'\$.user.name.last'), json_extract(j,'\$._id."\$oid"') LIMIT 10\` |

Agreement: Q1 matched $N_D1 documents (docfs cat | wc -l $N_D1, ?count=1 $N_D1C; mingo $N_M1 / $N_M1C;
jq $N_J1 / $N_J1C; sqlite3 $N_S1 / $N_S1C), docfs's \`?format=ids\` and sqlite3 list the same _ids;
Q2's top 10 ($Q2_TOP) identical, _ids included, in all four: $Q2_SAME.

| figure | value |
|---|---|
| docfs daemon peak RSS (VmHWM) right after mounting | $(kib_to_mib "$RSS_MOUNT") |
| docfs daemon peak RSS (VmHWM) after the queries (warm-up and timed runs) | $(kib_to_mib "$RSS_QUERY") |
| mingo: loading and parsing the JSON Lines into memory (not timed above) | $M_LOAD s |
EOF

if [ "$FAILED" -ne 0 ]; then
	echo
	echo "**docfs misbehaved or the tools disagreed during this run** (see the PROBLEM lines on stderr); the figures above are not valid."
	echo "bench: disagreement or docfs error during the run (see PROBLEM lines above)" >&2
	exit 1
fi
