#!/usr/bin/env bash
# tests/bench/router.sh DOCFS [N] - issue 19's seed scenario as a benchmark of `docfs router`:
# three shard mounts, a router over them and one plain mount, N (1,000,000) generated users.
#   1. test.users sharded on {"user.age": 1} with the issue's zones junior / middle / senior
#      on "MinKey-20, 21-40, 41-MaxKey" (A, B, C), the chunks split at the zone bounds and
#      moved to their zones' shards while empty (no balancer exists); the ranges leave
#      [20, 21) and [40, 41) outside every zone, and those chunks stay on the primary A;
#   2. the N users inserted through the router (`cat BATCH > .insert`, BENCH_BATCH lines at a
#      time, since the router keeps an .insert in memory until the close) and into the plain
#      mount the same way, timed; per-shard counts from each shard's own `query/{}?count=1`,
#      checked against the counts the generated file implies;
#   3. the shards explain/ lists for filters on user.age, checked against the chunk map;
#   4. targeted and broadcast queries, router against plain (median of BENCH_REPEAT timed
#      runs after an untimed one), their answers compared;
#   5. the chunk [40, 41) migrated to B (moveChunk, timed): the layout MinKey-21, 21-41,
#      41-MaxKey, where {"user.age": {$gt: 25}} targets two shards;
#   6. test.users_h sharded on {"user.created_at": "hashed"} (numInitialChunks default), the
#      same users inserted through the router, per-shard counts and their deviation from N/3.
# Prints Markdown tables on stdout, progress on stderr. Not part of the test suite: no figure
# fails anything; a docfs error, a wrong count or a router answer differing from the plain
# mount's exits 1. Needs python3, jq, split, fusermount3 and /dev/fuse; root is not needed.
# Environment: BENCH_DIR (the temporary directory's parent, default /tmp; about 2 GB with
# 1M users), BENCH_BATCH (100000 lines per .insert), BENCH_REPEAT (5 timed runs per query).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/bench/lib.sh"
DOCFS=${1:-$ROOT/build/docfs}
case $DOCFS in /*) ;; *) DOCFS=$PWD/$DOCFS ;; esac
N=${2:-1000000}
BATCH=${BENCH_BATCH:-100000}
REPEAT=${BENCH_REPEAT:-5}
TEMPLATE=$ROOT/examples/users.template.json

missing=()
for tool in python3 jq split fusermount3 pgrep mountpoint; do
	command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] ||
	die "missing tools: ${missing[*]} (e.g. apt-get install python3 jq coreutils fuse3 procps util-linux)"
[ -x "$DOCFS" ] || die "no docfs binary at $DOCFS (build it: meson setup build-rel --buildtype=release && ninja -C build-rel)"
[ -e /dev/fuse ] || die "no /dev/fuse"
[ -f "$TEMPLATE" ] || die "no template at $TEMPLATE"
[[ $N =~ ^[0-9]+$ ]] && [ "$N" -ge 3 ] || die "N must be a number of users, at least 3"

B=$(mktemp -d "${BENCH_DIR:-/tmp}/docfs-rbench.XXXXXX")
CFG=$B/config
R=$B/router
PLAIN=$B/plain
NAMES=(A B C)
FAILED=0

# The daemons: shards m0-m2 on stores s0-s2, the plain mount on store-plain, the router.
mount_pid() { # STORE MNT
	pgrep -f -- "${DOCFS##*/} mount .*$1 $2\$" | head -n1 || true
}
router_pid() {
	pgrep -f -- "${DOCFS##*/} router .*$CFG $R\$" | head -n1 || true
}

unmount() { # MNT PID: unmounts, and waits for the daemon to exit
	if mountpoint -q "$1"; then
		fusermount3 -u "$1" 2>/dev/null || { sleep 1; fusermount3 -u "$1" 2>/dev/null; } ||
			fusermount3 -uz "$1" 2>/dev/null || true
	fi
	if [ -n "$2" ]; then
		for _ in $(seq 1 600); do
			kill -0 "$2" 2>/dev/null || break
			sleep 0.1
		done
		kill -0 "$2" 2>/dev/null && echo "bench: WARNING: docfs daemon $2 still running 60 s after unmounting $1" >&2
	fi
	return 0
}

cleanup() {
	local rc=$? i
	# the router first: it works through the shards' directories
	unmount "$R" "$(router_pid)"
	for i in 0 1 2; do
		unmount "$B/m$i" "$(mount_pid "$B/s$i" "$B/m$i")"
	done
	unmount "$PLAIN" "$(mount_pid "$B/store-plain" "$PLAIN")"
	rm -rf "$B"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# problem MESSAGE: a docfs misbehaviour or a disagreement (the run goes on, exits 1 at the end)
problem() {
	FAILED=1
	echo "bench: PROBLEM: $1" >&2
	if [ -s "$B/rlog" ]; then
		echo "--- router log (last lines)" >&2
		tail -n 10 "$B/rlog" >&2
	fi
}
# the last lines of the router's /.docfs/errors, for a message
rerr() { tail -n "${1:-2}" "$R/.docfs/errors" 2>/dev/null | tr '\n' ' ' || true; }

# cmd COMMAND: runs an admin command through /.cluster/command, the reply read back on the
# same descriptor from offset 0 (mount.c note 3); prints the reply, fails when it is not
# ok: 1. CMD_T = the seconds from the open to the close, measured by python3 itself (its
# start-up alone takes 0.5-1 s on the shared VM). Not `echo CMD >&3; cat <&3`: bash's
# redirection of a builtin closes a duplicate of fd 3, the router runs the command at that
# FLUSH, and the read at the write's offset then misses the reply's first bytes.
cmd() {
	local out
	out=$(python3 - "$R/.cluster/command" "$1" "$B/cmd.t" <<'EOF'
import sys, time
t0 = time.monotonic()
with open(sys.argv[1], "r+") as f:
    f.write(sys.argv[2])
    f.flush()
    f.seek(0)
    reply = f.read()
open(sys.argv[3], "w").write("%.3f" % (time.monotonic() - t0))
sys.stdout.write(reply)
EOF
	) || { problem "$1: $out $(rerr)"; return 1; }
	CMD_T=$(cat "$B/cmd.t")
	grep -q '"ok": 1.0' <<<"$out" || { problem "$1: not ok: $(tr -d '\n' <<<"$out")"; return 1; }
	printf '%s\n' "$out"
}

# median_timeit 'COMMAND' : runs COMMAND once untimed, then REPEAT times; T = the median, TS =
# the timed runs, sorted (RC of the last run)
median_timeit() {
	local i all=()
	set +e
	eval "$1"
	set -e
	for ((i = 0; i < REPEAT; i++)); do
		timeit "$1"
		all+=("$T")
	done
	TS=$(printf '%s\n' "${all[@]}" | sort -g | tr '\n' ' ')
	T=$(printf '%s\n' "${all[@]}" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) printf "%.3f", v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
}

count_of() { # DIR FILTER: prints the count of FILTER in the collection directory DIR
	cat "$1/query/$2?count=1" 2>/dev/null | tr -d '\n' || true
}
pct() { # A B : A / B in percent
	awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "n/a"; else printf "%.2f%%", 100 * a / b }'
}
dev() { # COUNT EXPECTED : the deviation in percent, signed
	awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "n/a"; else printf "%+.2f%%", 100 * (a - b) / b }'
}
rate() { # COUNT SECONDS : documents per second, rounded
	awk -v n="$1" -v s="$2" 'BEGIN { if (s == 0) print "n/a"; else printf "%d", n / s + 0.5 }'
}
num() { # 1234567 -> 1,234,567
	awk -v n="$1" 'BEGIN { s = sprintf("%d", n); o = ""; while (length(s) > 3) { o = "," substr(s, length(s) - 2) o; s = substr(s, 1, length(s) - 3) } print s o }'
}
vmhwm() { # PID: peak RSS in MiB
	[ -n "$1" ] && awk '/^VmHWM:/ { printf "%.1f MiB", $2 / 1024 }' "/proc/$1/status" 2>/dev/null || echo "n/a"
}

CPU=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
MACHINE="$(nproc) cores ($CPU), $(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) RAM, Linux $(uname -r), $(stat -f -c %T "$B") at $B"
DATE=$(date -u '+%Y-%m-%d %H:%M')
VERSION=$("$DOCFS" version 2>/dev/null || echo "docfs ?")
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "?")
echo "docfs router benchmark: $VERSION ($DOCFS), $DATE UTC, N=$N" >&2
echo "machine: $MACHINE" >&2
T_START=$(date +%s)
LOAD_START=$(cut -d" " -f1 /proc/loadavg)

########################################################################################
# Mounts and data (not timed)
echo "== mounts: three shards, a router, a plain mount" >&2
for i in 0 1 2; do
	mkdir -p "$B/s$i" "$B/m$i"
	"$DOCFS" mount -o "log=$B/log$i" "$B/s$i" "$B/m$i" || die "docfs mount of shard $i failed"
	mountpoint -q "$B/m$i" || die "$B/m$i is not mounted after docfs mount returned"
	"$DOCFS" cluster "$CFG" "{addShard: '$B/m$i', name: '${NAMES[$i]}'}" > "$B/add.out" 2>&1 ||
		die "addShard ${NAMES[$i]}: $(cat "$B/add.out")"
done
mkdir -p "$B/store-plain" "$PLAIN" "$R"
"$DOCFS" mount -o "log=$B/logp" "$B/store-plain" "$PLAIN" || die "docfs mount of the plain store failed"
mountpoint -q "$PLAIN" || die "$PLAIN is not mounted after docfs mount returned"
"$DOCFS" router -o "log=$B/rlog" "$CFG" "$R" || die "docfs router did not start"
mountpoint -q "$R" || die "the router is not mounted after docfs router returned"
RPID=$(router_pid)
[ -n "$RPID" ] || die "cannot find the router daemon (pgrep -f '${DOCFS##*/} router .*$CFG $R')"

echo "== data: $N users, docfs generate --seed 42" >&2
"$DOCFS" generate "$TEMPLATE" -n "$N" --seed 42 > "$B/users.jsonl" || die "docfs generate failed"
[ "$(wc -l < "$B/users.jsonl")" -eq "$N" ] || die "docfs generate wrote $(wc -l < "$B/users.jsonl") lines, not $N"
JSONL_SIZE=$(du -sh "$B/users.jsonl" | cut -f1)
split -l "$BATCH" -d -a 4 "$B/users.jsonl" "$B/batch."
NBATCH=$(ls "$B"/batch.* | wc -l)
# What the file implies, counted by python3: the ages of the zones and the gaps, the minimum
# and maximum age, and the Beijing users (a broadcast query's answer)
python3 - "$B/users.jsonl" > "$B/expect" <<'EOF'
import json, sys
c = dict(lt20=0, eq20=0, mid=0, eq40=0, ge41=0, age30=0, beijing=0, gt25=0, gt18=0)
lo, hi = None, None
for line in open(sys.argv[1]):
    u = json.loads(line)["user"]
    a = u["age"]
    lo = a if lo is None else min(lo, a)
    hi = a if hi is None else max(hi, a)
    if a < 20: c["lt20"] += 1
    elif a < 21: c["eq20"] += 1
    elif a < 40: c["mid"] += 1
    elif a < 41: c["eq40"] += 1
    else: c["ge41"] += 1
    c["age30"] += a == 30
    c["gt25"] += a > 25
    c["gt18"] += a > 18
    c["beijing"] += u["address"]["city"] == "Beijing"
c["minage"], c["maxage"] = lo, hi
for k, v in c.items():
    print("E_%s=%s" % (k.upper(), v))
EOF
. "$B/expect"

########################################################################################
# 1. The issue's zones (through /.cluster/command)
echo "== test.users on {\"user.age\": 1}: zones junior/middle/senior, splits, moves" >&2
mkdir "$R/test" "$R/test/users" || die "mkdir through the router: $(rerr)"
mkdir "$PLAIN/test" "$PLAIN/test/users"
SETUP=(
	'{enableSharding: "test", primaryShard: "A"}'
	'{addShardToZone: "A", zone: "junior"}'
	'{addShardToZone: "B", zone: "middle"}'
	'{addShardToZone: "C", zone: "senior"}'
	'{shardCollection: "test.users", key: {"user.age": 1}}'
	'{updateZoneKeyRange: "test.users", min: {"user.age": MinKey}, max: {"user.age": 20}, zone: "junior"}'
	'{updateZoneKeyRange: "test.users", min: {"user.age": 21}, max: {"user.age": 40}, zone: "middle"}'
	'{updateZoneKeyRange: "test.users", min: {"user.age": 41}, max: {"user.age": MaxKey}, zone: "senior"}'
	'{split: "test.users", middle: {"user.age": 20}}'
	'{split: "test.users", middle: {"user.age": 21}}'
	'{split: "test.users", middle: {"user.age": 40}}'
	'{split: "test.users", middle: {"user.age": 41}}'
	'{moveChunk: "test.users", find: {user: {age: 30}}, to: "B"}'
	'{moveChunk: "test.users", find: {user: {age: 50}}, to: "C"}'
)
for c in "${SETUP[@]}"; do
	cmd "$c" > /dev/null || die "the setup failed at $c"
done

# chunks_md NS: the chunk map of NS from /.cluster/chunks as Markdown rows
chunks_md() {
	jq -r --arg ns "$1" 'select(.ns == $ns) | def b: if type == "object" then (to_entries[0].value |
		if type == "object" and has("$minKey") then "MinKey" elif type == "object" and has("$maxKey") then "MaxKey"
		elif type == "object" and has("$numberLong") then ."$numberLong" else tostring end) else tostring end;
		"| [\(.min | b), \(.max | b)) | \(.shard) |"' "$R/.cluster/chunks"
}
chunks_md test.users > "$B/chunks.md"
[ "$(wc -l < "$B/chunks.md")" -eq 5 ] || problem "test.users has $(wc -l < "$B/chunks.md") chunks, not 5: $(cat "$R/.cluster/chunks")"
jq -r '"| \(.tag) | [\(.min | to_entries[0].value | if type == "object" then (keys[0] | ltrimstr("$") | if . == "minKey" then "MinKey" else "MaxKey" end) else tostring end), \(.max | to_entries[0].value | if type == "object" then (keys[0] | ltrimstr("$") | if . == "minKey" then "MinKey" else "MaxKey" end) else tostring end)) |"' \
	"$R/.cluster/zones" > "$B/zones.md" || problem "cannot read /.cluster/zones: $(cat "$R/.cluster/zones")"

########################################################################################
# 2. Inserts
# insert_batches DIR: cat each batch into DIR/.insert (exit status of the first that fails)
insert_batches() {
	local f
	for f in "$B"/batch.*; do
		cat "$f" > "$1/.insert" || return 1
	done
}
echo "== insert $N users in $NBATCH batches: router" >&2
timeit 'insert_batches "$R/test/users" 2> "$B/ins-r.err"'
T_INS_R=$T
[ "$RC" -eq 0 ] || problem "insert through the router exited $RC: $(head -c 300 "$B/ins-r.err") $(rerr)"
RSS_INS_R=$(vmhwm "$RPID")
echo "   ${T_INS_R}s; router peak RSS $RSS_INS_R" >&2
echo "== insert $N users in $NBATCH batches: plain mount" >&2
timeit 'insert_batches "$PLAIN/test/users" 2> "$B/ins-p.err"'
T_INS_P=$T
[ "$RC" -eq 0 ] || problem "insert into the plain mount exited $RC: $(head -c 300 "$B/ins-p.err")"
echo "   ${T_INS_P}s" >&2

SH=()
for i in 0 1 2; do SH+=("$(count_of "$B/m$i/test/users" '{}')"); done
A_LT20=$(count_of "$B/m0/test/users" '{"user.age": {$lt: 20}}')
A_EQ20=$(count_of "$B/m0/test/users" '{"user.age": 20}')
A_EQ40=$(count_of "$B/m0/test/users" '{"user.age": 40}')
C_R=$(count_of "$R/test/users" '{}')
C_P=$(count_of "$PLAIN/test/users" '{}')
WANT_A=$((E_LT20 + E_EQ20 + E_EQ40))
[ "${SH[0]}" = "$WANT_A" ] || problem "shard A holds ${SH[0]} users, the file has $WANT_A aged < 21 or 40"
[ "${SH[1]}" = "$E_MID" ] || problem "shard B holds ${SH[1]} users, the file has $E_MID aged 21-39"
[ "${SH[2]}" = "$E_GE41" ] || problem "shard C holds ${SH[2]} users, the file has $E_GE41 aged 41 or more"
[ "$C_R" = "$N" ] || problem "the router counts $C_R users, not $N"
[ "$C_P" = "$N" ] || problem "the plain mount counts $C_P users, not $N"
echo "   shards A/B/C: ${SH[*]} (A: $A_LT20 < 20, $A_EQ20 at 20, $A_EQ40 at 40)" >&2

########################################################################################
# 3. Explain: the shards each filter targets, against the chunk map
# want_shards OP VALUE: the shards owning a chunk [min, max) that can hold a user.age
# matching {$OP: VALUE} (numbers only: MinKey below and MaxKey above all of them)
want_shards() {
	jq -rs --arg op "$1" --argjson v "$2" '
		def n(x): x | to_entries[0].value | if type == "object" then (if has("$minKey") then -1e308 else 1e308 end) else . end;
		[ .[] | select(.ns == "test.users") | {lo: n(.min), hi: n(.max), shard} |
		  select(if $op == "eq" then .lo <= $v and $v < .hi elif $op == "gt" then .hi > $v
		         elif $op == "gte" then .hi > $v elif $op == "lt" then .lo < $v else true end) | .shard ]
		| unique | tojson' "$R/.cluster/chunks"
}
# explain_row FILTER OP VALUE: a Markdown row of what explain/ lists
explain_row() {
	local got want
	got=$(jq -c '[.queryPlanner.winningPlan.stage, [.queryPlanner.winningPlan.shards[].shardName]]' \
		"$R/test/users/explain/$1" 2>&1) || { problem "explain/$1: $got $(rerr)"; got="failed"; }
	want=$(want_shards "$2" "$3")
	[ "$(jq -c '.[1] | sort' <<<"$got" 2>/dev/null)" = "$want" ] ||
		problem "explain/$1 lists $got, the chunk map gives $want"
	echo "| \`$1\` | $(jq -r '.[0]' <<<"$got" 2>/dev/null) | $(jq -r '.[1] | join(", ")' <<<"$got" 2>/dev/null) |"
}
echo "== explain" >&2
{
	explain_row '{"user.age": {$gt: 25}}' gt 25
	explain_row '{"user.age": {$gt: 18}}' gt 18
	explain_row '{"user.age": 30}' eq 30
	explain_row '{"user.age": {$gte: 41}}' gte 41
} > "$B/explain1.md"
cat "$B/explain1.md" >&2

########################################################################################
# 4. Queries, router against plain
QT1='{"user.age": 30}?count=1'
QT2='{"user.age": 30}?limit=100'
QB1='{"user.address.city": "Beijing"}?count=1'
QB2='{"user.address.city": "Beijing"}?sort={"user.created_at": -1, "user.name.last": 1, "user.address.zip_code": 1}&limit=10'
# timed_pair NAME QUERY: times QUERY through the router and on the plain mount, compares the
# answers (without _id: each side gave its own ObjectIds), and prints a Markdown row
timed_pair() {
	local name=$1 q=$2 tr tp trs tps stage shards ans
	echo "== $name: $q" >&2
	median_timeit 'cat "$R/test/users/query/$q" > "$B/out-r" 2> "$B/out-r.err"'
	tr=$T trs=$TS
	[ "$RC" -eq 0 ] || problem "router: query/$q exited $RC: $(head -c 200 "$B/out-r.err") $(rerr)"
	median_timeit 'cat "$PLAIN/test/users/query/$q" > "$B/out-p" 2> "$B/out-p.err"'
	tp=$T tps=$TS
	[ "$RC" -eq 0 ] || problem "plain: query/$q exited $RC: $(head -c 200 "$B/out-p.err")"
	case $q in
	*count=1*)
		ans=$(tr -d '\n' < "$B/out-r")
		[ "$ans" = "$(tr -d '\n' < "$B/out-p")" ] || problem "query/$q: router $ans, plain $(cat "$B/out-p")"
		;;
	*sort=*)
		ans="$(jq -c '.' "$B/out-r" | wc -l) documents"
		[ "$(jq -c 'del(._id)' "$B/out-r")" = "$(jq -c 'del(._id)' "$B/out-p")" ] ||
			problem "query/$q: the router's documents differ from the plain mount's: $(diff <(jq -c 'del(._id)' "$B/out-r") <(jq -c 'del(._id)' "$B/out-p") | head -n 6)"
		;;
	*)
		# no sort: any 100 matching documents will do on either side
		ans="$(jq -c '.' "$B/out-r" | wc -l) documents"
		[ "$(jq -c '.' "$B/out-r" | wc -l)" = "$(jq -c '.' "$B/out-p" | wc -l)" ] &&
			[ -z "$(jq -c 'select(.user.age != 30)' "$B/out-r")" ] ||
			problem "query/$q: the router returned $(jq -c '.' "$B/out-r" | wc -l) documents (not all aged 30?), plain $(jq -c '.' "$B/out-p" | wc -l)"
		;;
	esac
	stage=$(jq -c '[.queryPlanner.winningPlan.stage, ([.queryPlanner.winningPlan.shards[].shardName] | join(", "))]' "$R/test/users/explain/${q%\?count=1}" 2>/dev/null || echo '["?","?"]')
	echo "   router ${tr}s (${trs}), plain ${tp}s (${tps}): $ans" >&2
	echo "| $name | \`$q\` | $(jq -r '.[0]' <<<"$stage") | $(jq -r '.[1]' <<<"$stage") | $ans | $tr | $tp | $(div "$tr" "$tp") |"
}
{
	timed_pair "targeted count" "$QT1"
	timed_pair "targeted find, limit" "$QT2"
	timed_pair "broadcast count" "$QB1"
	timed_pair "broadcast sorted find, limit 10" "$QB2"
} > "$B/queries.md"
Q_T1=$(count_of "$R/test/users" '{"user.age": 30}')
Q_B1=$(count_of "$R/test/users" '{"user.address.city": "Beijing"}')
[ "$Q_T1" = "$E_AGE30" ] || problem "the router counts $Q_T1 users aged 30, the file has $E_AGE30"
[ "$Q_B1" = "$E_BEIJING" ] || problem "the router counts $Q_B1 users in Beijing, the file has $E_BEIJING"
RSS_Q_R=$(vmhwm "$RPID")

########################################################################################
# 5. The chunk [40, 41) migrated to B: the layout MinKey-21, 21-41, 41-MaxKey
echo "== moveChunk [40, 41) to B" >&2
cmd '{moveChunk: "test.users", find: {user: {age: 40}}, to: "B"}' > "$B/move.out" || true
T_MOVE=$CMD_T
MOVE_REPLY=$(jq -c '{millis, migration}' "$B/move.out" 2>/dev/null || echo "failed: $(tr -d '\n' < "$B/move.out")")
echo "   ${T_MOVE}s: $MOVE_REPLY" >&2
SH2=()
for i in 0 1 2; do SH2+=("$(count_of "$B/m$i/test/users" '{}')"); done
[ "${SH2[0]}" = "$((E_LT20 + E_EQ20))" ] || problem "after the move shard A holds ${SH2[0]}, the file has $((E_LT20 + E_EQ20)) aged < 21"
[ "${SH2[1]}" = "$((E_MID + E_EQ40))" ] || problem "after the move shard B holds ${SH2[1]}, the file has $((E_MID + E_EQ40)) aged 21-40"
[ "${SH2[2]}" = "$E_GE41" ] || problem "after the move shard C holds ${SH2[2]}, the file has $E_GE41 aged 41 or more"
C_R2=$(count_of "$R/test/users" '{}')
[ "$C_R2" = "$N" ] || problem "after the move the router counts $C_R2 users, not $N"
chunks_md test.users > "$B/chunks2.md"
{
	explain_row '{"user.age": {$gt: 25}}' gt 25
	explain_row '{"user.age": {$gt: 18}}' gt 18
} > "$B/explain2.md"
cat "$B/explain2.md" >&2

########################################################################################
# 6. A hashed shard key
echo "== test.users_h on {\"user.created_at\": \"hashed\"}: insert through the router" >&2
mkdir "$R/test/users_h" || problem "mkdir test/users_h through the router: $(rerr)"
cmd '{shardCollection: "test.users_h", key: {"user.created_at": "hashed"}}' > /dev/null || die "shardCollection test.users_h failed"
timeit 'insert_batches "$R/test/users_h" 2> "$B/ins-h.err"'
T_INS_H=$T
[ "$RC" -eq 0 ] || problem "insert into test.users_h through the router exited $RC: $(head -c 300 "$B/ins-h.err") $(rerr)"
echo "   ${T_INS_H}s" >&2
SHH=()
for i in 0 1 2; do SHH+=("$(count_of "$B/m$i/test/users_h" '{}')"); done
C_H=$(count_of "$R/test/users_h" '{}')
[ "$C_H" = "$N" ] || problem "the router counts $C_H users in test.users_h, not $N"
[ "$((SHH[0] + SHH[1] + SHH[2]))" = "$N" ] || problem "the shards of test.users_h hold ${SHH[*]}, not $N in all"
NCH=()
for i in 0 1 2; do
	NCH+=("$(jq -s --arg s "${NAMES[$i]}" '[.[] | select(.ns == "test.users_h" and .shard == $s)] | length' "$R/.cluster/chunks")")
done
RSS_END_R=$(vmhwm "$RPID")
ERRLINES=$(wc -l < "$R/.docfs/errors" 2>/dev/null || echo 0)
T_END=$(date +%s)
LOAD_END=$(cut -d" " -f1 /proc/loadavg)

########################################################################################
# The report
ISSUE=(198554 187975 593673)
THIRD=$(awk -v n="$N" 'BEGIN { printf "%.1f", n / 3 }')
cat <<EOF
## docfs router over three shards, $(num "$N") generated users

$VERSION at $COMMIT, $DATE UTC, \`tests/bench/router.sh ${DOCFS#"$ROOT"/} $N\`; machine: $MACHINE.
Whole run: $((T_END - T_START)) s, load average $LOAD_START at the start, $LOAD_END at the end. The data: \`docfs generate examples/users.template.json -n $N
--seed 42\` ($JSONL_SIZE; ages $E_MINAGE-$E_MAXAGE), inserted in $NBATCH batches of $BATCH lines
(\`cat BATCH > test/users/.insert\`). Queries: median of $REPEAT timed runs after an untimed one.

### test.users, shard key {"user.age": 1}, the issue's zones

| zone | range (min inclusive, max exclusive) |
|---|---|
$(cat "$B/zones.md")

| chunk | shard |
|---|---|
$(cat "$B/chunks.md")

| shard | zone | users (\`query/{}?count=1\` on the shard) | share | the issue expects (1M users) |
|---|---|---:|---:|---:|
| A | junior, plus the zoneless chunks [20, 21) and [40, 41) | $(num "${SH[0]}") | $(pct "${SH[0]}" "$N") | close to 198,554 |
| B | middle | $(num "${SH[1]}") | $(pct "${SH[1]}" "$N") | close to 187,975 |
| C | senior | $(num "${SH[2]}") | $(pct "${SH[2]}" "$N") | close to 593,673 |

Shard A's users: $(num "$A_LT20") aged below 20 (the junior zone), $(num "$A_EQ20") aged 20 and $(num "$A_EQ40")
aged 40 (the two chunks outside every zone, left on the primary shard: no balancer moves them).
The issue's three figures add up to $(num $((ISSUE[0] + ISSUE[1] + ISSUE[2]))), not 1,000,000: they count the
zones alone, min-inclusive and max-exclusive as MongoDB's ranges are, so ages 0-19 (20 of the
101 ages 0-100), 21-39 (19) and 41-100 (60); the $(pct $((E_EQ20 + E_EQ40)) "$N") aged 20 or 40 fall in no zone. This
run: junior $(num "$A_LT20") ($(pct "$A_LT20" "$N")), middle $(num "${SH[1]}") ($(pct "${SH[1]}" "$N")), senior $(num "${SH[2]}") ($(pct "${SH[2]}" "$N")); the issue: 19.86%, 18.80%, 59.37%.
Counts through the router: $(num "$C_R"); on the plain mount: $(num "$C_P").

| insert of $(num "$N") users | seconds | documents/s | router / plain |
|---|---:|---:|---:|
| through the router (test.users, ranged key) | $T_INS_R | $(rate "$N" "$T_INS_R") | $(div "$T_INS_R" "$T_INS_P") |
| plain mount | $T_INS_P | $(rate "$N" "$T_INS_P") | |
| through the router (test.users_h, hashed key) | $T_INS_H | $(rate "$N" "$T_INS_H") | $(div "$T_INS_H" "$T_INS_P") |

Router daemon peak RSS: $RSS_INS_R after the first insert, $RSS_Q_R after the queries, $RSS_END_R at the end.

#### explain/: the shards a filter targets (checked against the chunk map)

With the issue's zones ([40, 41) on A):

| filter | stage | shards |
|---|---|---|
$(cat "$B/explain1.md")

After \`{moveChunk: "test.users", find: {user: {age: 40}}, to: "B"}\` (${T_MOVE} s through
/.cluster/command; reply \`$MOVE_REPLY\`), the layout MinKey-21 / 21-41 / 41-MaxKey,
shards A / B / C holding $(num "${SH2[0]}") / $(num "${SH2[1]}") / $(num "${SH2[2]}"):

| filter | stage | shards |
|---|---|---|
$(cat "$B/explain2.md")

#### Queries (no indexes on either side; seconds, median of $REPEAT)

| query | path under test/users/query/ | router stage | shards | answer | router | plain | router / plain |
|---|---|---|---|---|---:|---:|---:|
$(cat "$B/queries.md")

The answers were compared: counts equal, the sorted find's documents equal without \`_id\`
(each side gave its own ObjectIds), the unsorted find's $(num 100) documents all aged 30.

### test.users_h, shard key {"user.created_at": "hashed"} (numInitialChunks default)

| shard | chunks | users | deviation from N/3 ($THIRD) |
|---|---:|---:|---:|
| A | ${NCH[0]} | $(num "${SHH[0]}") | $(dev "${SHH[0]}" "$THIRD") |
| B | ${NCH[1]} | $(num "${SHH[1]}") | $(dev "${SHH[1]}" "$THIRD") |
| C | ${NCH[2]} | $(num "${SHH[2]}") | $(dev "${SHH[2]}" "$THIRD") |

Counted through the router: $(num "$C_H").
EOF
if [ "$ERRLINES" -gt 0 ]; then
	echo
	echo "The router's /.docfs/errors holds $ERRLINES lines; the last:"
	echo '```'
	tail -n 5 "$R/.docfs/errors"
	echo '```'
fi
if [ "$FAILED" -ne 0 ]; then
	echo
	echo "**docfs misbehaved or the answers disagreed in this run (see the PROBLEM lines on stderr).**"
	exit 1
fi
