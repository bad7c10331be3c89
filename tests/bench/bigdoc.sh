#!/usr/bin/env bash
# tests/bench/bigdoc.sh [DOCFS] - issue 30's large documents and large directories, each
# against an alternative in the same run:
#   1. {$set: {"m.k5": i}} through update/{_id: 1} on a document whose m has 1,440 fields,
#      against the same update of a top-level field of the same document (what an update
#      of one field should cost), and sqlite3 json_set of the same path on the same JSON in
#      a table (one UPDATE per statement, autocommit, as each docfs write is a transaction).
#   2. README's pre-aggregated report (examples/nginx-logs): $inc upserts of a request log
#      through .bulk?atomic=true, at N/10, N/3 and N operations (per-op time: linear?),
#      against sqlite3 doing the same upserts (INSERT ... ON CONFLICT DO UPDATE with
#      json_set) in one transaction. Both must count N requests.
#   3. ls -l of a collection of M documents, cold (unmounted, caches dropped, mounted) and
#      warm, against a native directory holding the same files; the daemon's peak
#      anonymous memory (its heap and stacks, polled) and VmHWM.
# Prints a Markdown table on stdout, progress on stderr; exits 1 when docfs misbehaves
# (a write fails, counts differ, ls -l prints the wrong number of lines).
# The upserts also print the daemon's CPU seconds (/proc/PID/stat), what to read on a loaded machine.
# Environment: BENCH_DIR (default /tmp), BENCH_N_SET (500 updates), BENCH_N_UPS (20000
# upserts), BENCH_N_LS (100000 documents; 0 skips part 3), BENCH_MOUNT_OPTS.
# Cold runs need root (drop_caches); without it they are warm runs after a remount.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/bench/lib.sh"
DOCFS=${1:-$ROOT/build/docfs}
case $DOCFS in /*) ;; *) DOCFS=$PWD/$DOCFS ;; esac
NSET=${BENCH_N_SET:-500}
NUPS=${BENCH_N_UPS:-20000}
NLS=${BENCH_N_LS:-100000}
EX=$ROOT/examples/nginx-logs

for tool in sqlite3 jq python3 fusermount3 pgrep mountpoint; do
	command -v "$tool" >/dev/null 2>&1 || die "missing tool: $tool"
done
[ -x "$DOCFS" ] || die "no docfs binary at $DOCFS"
[ -e /dev/fuse ] || die "no /dev/fuse"

B=$(mktemp -d "${BENCH_DIR:-/tmp}/docfs-bigdoc.XXXXXX")
STORE=$B/store
MNT=$B/mnt
MOUNTED=0
FAILED=0
. "$ROOT/tests/bench/onemount.sh"
mkdir -p "$STORE" "$MNT"

mount_it() {
	"$DOCFS" mount -o "log=$B/log${BENCH_MOUNT_OPTS:+,$BENCH_MOUNT_OPTS}" "$STORE" "$MNT"
	MOUNTED=1
}
drop_caches() {
	sync
	[ "$(id -u)" = 0 ] && echo 3 > /proc/sys/vm/drop_caches || true
}
echo "docfs bigdoc benchmark: $("$DOCFS" version 2>/dev/null || echo '?'), $(date -u '+%Y-%m-%d %H:%M') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
mount_it
mkdir "$MNT/b" "$MNT/b/big"

# ---- 1. one field of a 1,440-field embedded document ----------------------------------
echo "== 1. \$set of one field: m.k5 vs a top-level field, $NSET updates each" >&2
python3 -c 'import json; print(json.dumps({"_id": 1, "top": 0, "m": {"k%d" % i: i for i in range(1440)}}))' > "$B/big.json"
cp "$B/big.json" "$MNT/b/big/1.json"
set_loop() { # PATH-IN-UPDATE : NSET updates through update/{_id: 1}
	local i
	for ((i = 0; i < NSET; i++)); do
		echo "{\$set: {\"$1\": $i}}" > "$MNT/b/big/update/{_id: 1}" || return 1
	done
}
NSET_ALL=$NSET
NSET=10
set_loop m.k5 && set_loop top # untimed warm-up of both
NSET=$NSET_ALL
timeit 'set_loop m.k5'
T_EMB=$T
[ "$RC" = 0 ] || problem "\$set m.k5 failed"
timeit 'set_loop top'
T_TOP=$T
[ "$RC" = 0 ] || problem "\$set top failed"
[ "$(jq -c '[.top, .m.k5, (.m | length)]' "$MNT/b/big/1.json")" = "[$((NSET - 1)),$((NSET - 1)),1440]" ] ||
	problem "the document after the updates: $(jq -c '[.top, .m.k5, (.m | length)]' "$MNT/b/big/1.json")"
sqlite3 "$B/big.db" "CREATE TABLE t(id INTEGER PRIMARY KEY, j TEXT); INSERT INTO t VALUES(1, readfile('$B/big.json'));"
for ((i = 0; i < NSET; i++)); do echo "UPDATE t SET j = json_set(j, '\$.m.k5', $i) WHERE id = 1;"; done > "$B/set.sql"
timeit 'sqlite3 "$B/big.db" < "$B/set.sql"'
T_SQL=$T

# ---- 2. the pre-aggregated report: $inc upserts through .bulk?atomic=true -------------
echo "== 2. README's pre-aggregated report, .bulk?atomic=true, up to $NUPS upserts" >&2
python3 "$EX/gen-access-log.py" "$NUPS" 1 > "$B/access.log"
awk -f "$EX/log2upserts.awk" "$B/access.log" > "$B/ops.jsonl"
[ "$(wc -l < "$B/ops.jsonl")" = "$NUPS" ] || problem "log2upserts made $(wc -l < "$B/ops.jsonl") operations"
declare -A T_UPS C_UPS
# the daemon's CPU seconds (user + system) so far: on a loaded machine the wall clock is
# mostly waiting for a core
daemon_cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$(daemon_pid)/stat"; }
for n in $((NUPS / 10)) $((NUPS / 3)) "$NUPS"; do
	c=daily$n
	mkdir "$MNT/b/$c"
	head -n "$n" "$B/ops.jsonl" > "$B/ops$n.jsonl"
	cpu0=$(daemon_cpu)
	timeit 'exec 3<>"$MNT/b/$c/.bulk?atomic=true"; cat "$B/ops$n.jsonl" >&3; jq -c "{matchedCount, upsertedCount}" <&3 > "$B/ups$n"; exec 3>&-'
	T_UPS[$n]=$T
	C_UPS[$n]=$(awk -v a="$cpu0" -v b="$(daemon_cpu)" 'BEGIN { printf "%.2f", b - a }')
	got=$(cat "$MNT/b/$c/aggregate/[{\$group: {_id: null, n: {\$sum: \"\$daily\"}}}]" | jq .n)
	[ "$got" = "$n" ] || problem ".bulk of $n upserts counted $got requests ($(cat "$B/ups$n"))"
done
# sqlite3: the same upserts, one transaction
# an operation's line split at '"': $8 the resource, $14 the day, $22 "minute.<m>"
cat > "$B/ups.awk" <<'AWK'
BEGIN { FS = "\""; q = "'" }
{
	m = substr($22, 8)
	printf "INSERT INTO daily VALUES(%s%s%s, %s%s%s, json_object('daily', 1, 'minute', json_object(%s%s%s, 1))) ON CONFLICT(resource, day) DO UPDATE SET doc = json_set(doc, '$.daily', json_extract(doc, '$.daily') + 1, '$.minute.\"%s\"', coalesce(json_extract(doc, '$.minute.\"%s\"'), 0) + 1);\n", q, $8, q, q, $14, q, q, m, q, m, m
}
AWK
awk -f "$B/ups.awk" "$B/ops.jsonl" > "$B/ups.body"
{
	echo "CREATE TABLE daily(resource TEXT, day TEXT, doc TEXT, UNIQUE(resource, day)); BEGIN;"
	cat "$B/ups.body"
	echo "COMMIT;"
} > "$B/ups.sql"
timeit 'sqlite3 "$B/ups.db" < "$B/ups.sql"'
T_UPS_SQL=$T
got=$(sqlite3 "$B/ups.db" "SELECT sum(json_extract(doc, '\$.daily')) FROM daily")
[ "$got" = "$NUPS" ] || problem "sqlite3 counted $got requests (its script is wrong)"

# ---- 3. ls -l of a large collection ----------------------------------------------------
if [ "$NLS" -gt 0 ]; then
	echo "== 3. ls -l over $NLS documents" >&2
	"$DOCFS" generate "$ROOT/examples/users.template.json" -n "$NLS" --seed 1 > "$B/users.jsonl"
	unmount
	MOUNTED=0
	"$DOCFS" import "$STORE" b.users "$B/users.jsonl" >/dev/null
	# native: each exported document in <its ObjectId>.json
	mkdir "$B/native"
	"$DOCFS" export "$STORE" b.users | awk -v dir="$B/native" '{
		n = $0
		if (match(n, /"\$oid": *"[0-9a-f]+"/)) {
			n = substr(n, RSTART, RLENGTH)
			gsub(/^"\$oid": *"|"$/, "", n)
		}
		f = dir "/" n ".json"; print > f; close(f) }'
	mount_it
	unmount
	MOUNTED=0
	drop_caches
	mount_it
	PID=$(daemon_pid)
	(while kill -0 "$PID" 2>/dev/null; do awk '/^Anonymous:/ { print $2 }' "/proc/$PID/smaps_rollup" 2>/dev/null; sleep 0.2; done) > "$B/anon" &
	POLL=$!
	timeit 'ls -l "$MNT/b/users" | wc -l > "$B/ls-cold"'
	T_LS_COLD=$T
	timeit 'ls -l "$MNT/b/users" | wc -l > "$B/ls-warm"'
	T_LS_WARM=$T
	sleep 0.5
	HWM=$(vmhwm)
	kill "$POLL" 2>/dev/null || true
	wait "$POLL" 2>/dev/null || true
	ANON=$(sort -n "$B/anon" | tail -n 1)
	for f in ls-cold ls-warm; do
		# the documents plus total, ., .., query, explain, aggregate, update, delete and the
		# dot files ls -l does not show
		[ "$(cat "$B/$f")" -ge $((NLS + 1)) ] || problem "$f: ls -l printed $(cat "$B/$f") lines for $NLS documents"
	done
	drop_caches
	timeit 'ls -l "$B/native" | wc -l > "$B/ls-ncold"'
	T_NLS_COLD=$T
	timeit 'ls -l "$B/native" | wc -l > "$B/ls-nwarm"'
	T_NLS_WARM=$T
	[ "$(cat "$B/ls-ncold")" = $((NLS + 1)) ] || problem "native ls -l printed $(cat "$B/ls-ncold") lines (the export is wrong)"
fi

echo
echo "## issue 30: large documents and large directories ($(date -u '+%Y-%m-%d %H:%M') UTC, load $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "| | docfs | alternative | ratio |"
echo "|---|---:|---:|---:|"
echo "| $NSET x \`{\$set: {\"m.k5\": i}}\`, m of 1,440 fields, per update | $(div "$T_EMB" "$NSET" '%.4f') s | the same on a top-level field: $(div "$T_TOP" "$NSET" '%.4f') s | $(div "$T_EMB" "$T_TOP") |"
echo "| the same m.k5 updates | $T_EMB s | sqlite3 json_set, autocommit: $T_SQL s | $(div "$T_EMB" "$T_SQL") |"
for n in $((NUPS / 10)) $((NUPS / 3)) "$NUPS"; do
	echo "| \`.bulk?atomic=true\`, $n \$inc upserts | ${T_UPS[$n]} s ($(div "${T_UPS[$n]}" "$n" '%.6f') s/op; daemon CPU ${C_UPS[$n]} s) | | |"
done
echo "| the $NUPS upserts | ${T_UPS[$NUPS]} s | sqlite3 ON CONFLICT json_set, one transaction: $T_UPS_SQL s | $(div "${T_UPS[$NUPS]}" "$T_UPS_SQL") |"
if [ "$NLS" -gt 0 ]; then
	echo "| \`ls -l \| wc -l\`, $NLS documents, cold | $T_LS_COLD s | native: $T_NLS_COLD s | $(div "$T_LS_COLD" "$T_NLS_COLD") |"
	echo "| the same, warm | $T_LS_WARM s | native: $T_NLS_WARM s | $(div "$T_LS_WARM" "$T_NLS_WARM") |"
	echo "| daemon peak anonymous memory (heap) / VmHWM after both | $(kib_to_mib "$ANON") / $(kib_to_mib "$HWM") | | |"
fi
[ "$FAILED" = 0 ] || { echo; echo "docfs misbehaved (see above)"; exit 1; }
