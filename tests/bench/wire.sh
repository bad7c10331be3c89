#!/usr/bin/env bash
# tests/bench/wire.sh [DOCFS] - the wire protocol (issue 27's benchmark): each operation done
# three ways in one run, on one mount that also serves the wire (`docfs mount -o
# listen=SOCKET`), over BENCH_N (1,000,000) generated users:
#   1. bulk insert: PyMongo insert_many, batches of 1,000 (test.wire) vs `cat users.jsonl >
#      test/users/.insert` (test.users, first) vs the sqlite3 CLI `.import` of the same lines
#      into one TEXT column in one transaction (as run.sh);
#   2. a find of about 1% through an index {user.age: 1} ({"user.age": 42}): PyMongo
#      `list(find())` vs reading `query/{"user.age": 42}` vs sqlite3 `SELECT j ... WHERE
#      json_extract(j,'$.user.age') = 42` with an expression index;
#   3. [{$group: {_id: "$user.address.city", n: {$sum: 1}}}] over all: PyMongo aggregate vs
#      reading `aggregate/<pipeline>` vs sqlite3 GROUP BY json_extract(...);
#   4. BENCH_CLIENTS (50) concurrent clients (processes), BENCH_READS (2,000) point reads each
#      of random existing _ids: PyMongo find_one({_id}) vs open+read of `<id>.json` vs a
#      sqlite3 SELECT through an expression index on _id; every document read is parsed.
# 2-4 run on test.users (the documents the .insert wrote) and a sqlite3 table loaded from
# `docfs export` of it (the same documents with the same ObjectIds); 2 and 3 are warm (one run
# untimed, then the best of BENCH_REPEAT (3) timed runs, on every side). The reads are timed
# inside one Python process per side (tests/bench/wire_client.py, time.perf_counter), so
# starting Python, connecting and parsing the input are not in any figure; the .insert and the
# sqlite3 import are timed around their command (lib.sh's timeit).
# Checked: the counts after each insert, the same _ids from the find (wire, `?format=ids`,
# sqlite3), the same groups and counts from the aggregation, the same number of documents found
# and the same sum of their ages from the point reads, the index used by both finds (explain,
# EXPLAIN QUERY PLAN). A disagreement or a docfs error exits 1, no timing does.
# Prints Markdown tables on stdout, progress on stderr. Needs /usr/bin/python3 with Debian's
# python3-pymongo, sqlite3, jq, fusermount3 and /dev/fuse; root is not needed. Environment:
# BENCH_DIR (default /tmp; about 1.5 GB at 1M), BENCH_N, BENCH_CLIENTS, BENCH_READS,
# BENCH_REPEAT, BENCH_BATCH (1000), BENCH_MOUNT_OPTS (extra `docfs mount -o` options).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/bench/lib.sh"
DOCFS=${1:-$ROOT/build/docfs}
case $DOCFS in /*) ;; *) DOCFS=$PWD/$DOCFS ;; esac
N=${BENCH_N:-1000000}
CLIENTS=${BENCH_CLIENTS:-50}
READS=${BENCH_READS:-2000}
REPEAT=${BENCH_REPEAT:-3}
BATCH=${BENCH_BATCH:-1000}
TEMPLATE=$ROOT/examples/users.template.json
PY=/usr/bin/python3
CLI="$PY $ROOT/tests/bench/wire_client.py"

missing=()
for tool in sqlite3 jq fusermount3 pgrep mountpoint "$PY"; do
	command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] ||
	die "missing tools: ${missing[*]} (e.g. apt-get install sqlite3 jq fuse3 procps util-linux python3-pymongo)"
"$PY" -c 'import pymongo' 2>/dev/null || die "$PY has no pymongo (apt-get install python3-pymongo)"
[ -x "$DOCFS" ] || die "no docfs binary at $DOCFS (build it: meson setup build-rel --buildtype=release && ninja -C build-rel)"
[ -e /dev/fuse ] || die "no /dev/fuse"
[ "$N" -ge 1000 ] || die "BENCH_N ($N) must be at least 1000"
[ $((CLIENTS * READS)) -le "$N" ] || die "BENCH_CLIENTS x BENCH_READS must be at most BENCH_N"

B=$(mktemp -d "${BENCH_DIR:-/tmp}/docfs-wirebench.XXXXXX")
STORE=$B/store
MNT=$B/mnt
SOCK=$B/wire.sock
URI="mongodb://$(jq -rn --arg s "$SOCK" '$s | @uri')"
DB_INS=$B/insert.db
DB=$B/users.db
MOUNTED=0
FAILED=0
. "$ROOT/tests/bench/onemount.sh" # daemon_pid, unmount, the EXIT trap, problem, ...

CPU=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
MACHINE="$(nproc) cores ($CPU), $(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) RAM, Linux $(uname -r)"
DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
PYMONGO=$("$PY" -c 'import pymongo; print(pymongo.version)')
echo "docfs wire benchmark: $DOCFS, $DATE, N=$N" >&2
echo "machine: $MACHINE; load average $LOAD0" >&2
T_START=$(date +%s)

# field FILE KEY : a value of the JSON line wire_client.py printed
field() { jq -r --arg k "$2" '.[$k] // empty | if type == "number" then . else tostring end' "$1" 2>/dev/null || true; }
rate() { awk -v n="$1" -v t="$2" 'BEGIN { if (t == "" || t == 0) print "n/a"; else printf "%.0f", n / t }'; }
sec() { awk -v t="$1" 'BEGIN { if (t == "") print "n/a"; else printf "%.3f", t }'; }
TCK=$(getconf CLK_TCK)
dcpu() { # the docfs daemon's CPU seconds so far (user + system, all threads)
	local pid
	pid=$(daemon_pid)
	[ -n "$pid" ] && awk -v t="$TCK" '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / t }' "/proc/$pid/stat" 2>/dev/null || true
}
dsub() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "") print "n/a"; else printf "%.2f", b - a }'; }
rss_now() { # the daemon's resident set now: "RSS MiB (anonymous A, file F)"; SQLite maps the
	# database (mmap_size), and each connection's mapping counts its pages in RssFile again
	local pid
	pid=$(daemon_pid)
	[ -n "$pid" ] && awk '/^VmRSS:/ { r = $2 } /^RssAnon:/ { a = $2 } /^RssFile:/ { f = $2 }
		END { printf "%.0f MiB (anonymous %.0f, file %.0f)", r / 1024, a / 1024, f / 1024 }' \
		"/proc/$pid/status" 2>/dev/null || true
}
RSS_STEPS=""
rss_step() {
	local r
	r=$(rss_now)
	RSS_STEPS="$RSS_STEPS${RSS_STEPS:+; }$1 $r"
	echo "   daemon RSS after $1: $r" >&2
}
count_docfs() { cat "$MNT/test/$1/query/{}?count=1" 2>/dev/null | tr -dc 0-9; }
# client NAME ARGS... : runs wire_client.py ARGS > $B/NAME.json; a failure is a problem
client() {
	local name=$1
	shift
	if ! $CLI "$@" > "$B/$name.json" 2> "$B/$name.err"; then
		problem "wire_client.py $1 $2 ($name) failed: $(tail -n 3 "$B/$name.err")"
		: > "$B/$name.json"
	fi
}

########################################################################################
echo "== data: $N generated users (not timed)" >&2
"$DOCFS" generate "$TEMPLATE" -n "$N" --seed 42 > "$B/users.jsonl" || die "docfs generate failed"
[ "$(wc -l < "$B/users.jsonl")" -eq "$N" ] || die "docfs generate wrote the wrong number of lines"
JSONL_SIZE=$(bytes_h "$B/users.jsonl")
mkdir "$STORE" "$MNT"
"$DOCFS" mount -o "log=$B/log,listen=$SOCK${BENCH_MOUNT_OPTS:+,$BENCH_MOUNT_OPTS}" "$STORE" "$MNT" ||
	die "docfs mount failed"
MOUNTED=1
mkdir -p "$MNT/test/users" "$MNT/test/wire"
for _ in $(seq 1 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || die "no wire socket at $SOCK after the mount"

########################################################################################
echo "== 1. bulk insert" >&2
C0=$(dcpu)
TIMEIT_SYNC=1 timeit 'cat "$B/users.jsonl" > "$MNT/test/users/.insert" 2> "$B/ins_fuse.err"'
T_IF=$T D_IF=$(dsub "$C0" "$(dcpu)")
[ "$RC" -eq 0 ] || problem "cat > .insert exited $RC: $(head -n 3 "$B/ins_fuse.err")"
N_IF=$(count_docfs users)
echo "   .insert: $T_IF s, $N_IF documents" >&2
rss_step ".insert"
sync
C0=$(dcpu)
client ins_wire insert "$URI" test wire "$B/users.jsonl" "$BATCH"
D_IW=$(dsub "$C0" "$(dcpu)")
T_IW=$(field "$B/ins_wire.json" seconds) N_IW=$(field "$B/ins_wire.json" count)
C_IW=$(field "$B/ins_wire.json" client_cpu)
N_IW_ACK=$(field "$B/ins_wire.json" n)
N_IW_FS=$(count_docfs wire)
rss_step "insert_many"
echo "   insert_many: $(sec "$T_IW") s, $N_IW_ACK acknowledged, count $N_IW (query/: $N_IW_FS)" >&2
TIMEIT_SYNC=1 timeit 'sqlite3 "$DB_INS" > "$B/ins_sql.out" 2>&1 <<EOF
CREATE TABLE t(j TEXT);
.mode ascii
.separator "\\037" "\\n"
BEGIN;
.import $B/users.jsonl t
COMMIT;
EOF'
T_IS=$T
[ "$RC" -eq 0 ] || die "sqlite3 import failed: $(tail -n 3 "$B/ins_sql.out")"
N_IS=$(sqlite3 "$DB_INS" 'SELECT count(*) FROM t')
echo "   sqlite3 .import: $T_IS s, $N_IS rows" >&2
for v in "$N_IF" "$N_IW" "$N_IW_ACK" "$N_IW_FS" "$N_IS"; do
	[ "$v" = "$N" ] || problem "bulk insert: counts .insert $N_IF, insert_many $N_IW_ACK acknowledged / $N_IW counted / $N_IW_FS in query/, sqlite3 $N_IS; expected $N"
done
rm -f "$DB_INS"
# the wire's copy is not read again: drop it (not timed) so that 2-4 see one collection
"$PY" -c "import pymongo,sys; pymongo.MongoClient(sys.argv[1]).test.wire.drop()" "$URI" ||
	problem "dropping test.wire failed"

########################################################################################
echo "== setup of 2-4 (not timed): export, sqlite3 table, indexes, ids" >&2
"$DOCFS" export "$STORE" test.users > "$B/users-ids.jsonl" || die "docfs export failed"
[ "$(wc -l < "$B/users-ids.jsonl")" -eq "$N" ] || die "docfs export wrote the wrong number of lines"
XA="json_extract(j,'\$.user.age')"
XC="json_extract(j,'\$.user.address.city')"
XID="json_extract(j,'\$._id.\"\$oid\"')"
sqlite3 "$DB" > "$B/sqlite.out" 2>&1 <<EOF || die "sqlite3 load failed: $(tail -n 3 "$B/sqlite.out")"
CREATE TABLE t(j TEXT);
.mode ascii
.separator "\\037" "\\n"
BEGIN;
.import $B/users-ids.jsonl t
COMMIT;
CREATE INDEX t_age ON t($XA);
CREATE INDEX t_id ON t($XID);
EOF
[ "$(sqlite3 "$DB" 'SELECT count(*) FROM t')" -eq "$N" ] || die "the sqlite3 table does not have $N rows"
"$PY" -c "import pymongo,sys; print(pymongo.MongoClient(sys.argv[1]).test.users.create_index('user.age'))" \
	"$URI" > "$B/ix.out" 2>&1 || problem "createIndexes {user.age: 1} failed: $(tail -n 3 "$B/ix.out")"
NP=$((CLIENTS * READS))
jq -r '._id["$oid"]' "$B/users-ids.jsonl" | awk 'BEGIN { srand(42) } { printf "%.9f\t%s\n", rand(), $0 }' |
	sort -n | awk -F'\t' -v n="$NP" 'NR <= n { print $2 }' > "$B/point.ids"
[ "$(wc -l < "$B/point.ids")" -eq "$NP" ] || die "could not pick $NP _ids"
rm -f "$B/users-ids.jsonl" "$B/users.jsonl"
# sqlite3 must use its expression indexes, or the comparison is void
SQL_F="SELECT j FROM t WHERE $XA = 42"
SQL_P="SELECT j FROM t WHERE $XID = ?"
SQL_A="SELECT $XC, count(*) FROM t GROUP BY 1"
QX="'x'"
for q in "$SQL_F:t_age" "${SQL_P/\?/$QX}:t_id"; do
	plan=$(sqlite3 "$DB" "EXPLAIN QUERY PLAN ${q%:*}" 2>&1) || true
	grep -q "USING INDEX ${q##*:} " <<< "$plan" || problem "sqlite3 does not use ${q##*:} for ${q%:*}: $plan"
done

########################################################################################
echo "== 2. find of 1% through {user.age: 1}" >&2
QF='{"user.age": 42}'
client f_wire find wire "$URI" test users "$QF" "$REPEAT" "$B/f_wire.ids"
client f_fuse find fuse "$MNT/test/users/query/$QF" "$REPEAT"
client f_sql find sqlite "$DB" "$SQL_F" "$REPEAT" "$B/f_sql.ids"
cat "$MNT/test/users/query/$QF?format=ids" 2> "$B/f_fuse.ids.err" | sed 's/\.json$//' | sort > "$B/f_fuse.ids"
T_FW=$(field "$B/f_wire.json" seconds) T_FF=$(field "$B/f_fuse.json" seconds) T_FS=$(field "$B/f_sql.json" seconds)
N_FW=$(field "$B/f_wire.json" n) N_FF=$(field "$B/f_fuse.json" n) N_FS=$(field "$B/f_sql.json" n)
PLAN_W=$(field "$B/f_wire.json" plan)
T_FR=$(field "$B/f_wire.json" raw_seconds)
[ "$(field "$B/f_wire.json" raw_n)" = "$N_FW" ] || problem "find $QF: the wire's raw BSON find returned $(field "$B/f_wire.json" raw_n) documents, not $N_FW"
echo "   wire $(sec "$T_FW") s ($N_FW), files $(sec "$T_FF") s ($N_FF), sqlite3 $(sec "$T_FS") s ($N_FS)" >&2
grep -q '"IXSCAN"' <<< "$PLAN_W" || problem "the wire find's winning plan is not an IXSCAN: $PLAN_W"
sort -o "$B/f_wire.ids" "$B/f_wire.ids"
sort -o "$B/f_sql.ids" "$B/f_sql.ids"
[ -n "$N_FW" ] && [ "$N_FW" -gt 0 ] && [ "$N_FW" = "$N_FF" ] && [ "$N_FW" = "$N_FS" ] ||
	problem "find $QF: wire $N_FW, files $N_FF, sqlite3 $N_FS documents"
cmp -s "$B/f_wire.ids" "$B/f_fuse.ids" && cmp -s "$B/f_wire.ids" "$B/f_sql.ids" ||
	problem "find $QF: the three do not list the same _ids"

########################################################################################
rss_step "the finds"
echo "== 3. \$group over all" >&2
PIPE='[{"$group": {"_id": "$user.address.city", "n": {"$sum": 1}}}]'
client a_wire agg wire "$URI" test users "$PIPE" "$REPEAT"
client a_fuse agg fuse "$MNT/test/users/aggregate/$PIPE" "$REPEAT"
client a_sql agg sqlite "$DB" "$SQL_A" "$REPEAT"
T_AW=$(field "$B/a_wire.json" seconds) T_AF=$(field "$B/a_fuse.json" seconds) T_AS=$(field "$B/a_sql.json" seconds)
N_AW=$(field "$B/a_wire.json" n) N_AF=$(field "$B/a_fuse.json" n) N_AS=$(field "$B/a_sql.json" n)
G=()
for s in wire fuse sql; do G+=("$(jq -cS .groups "$B/a_$s.json" 2>/dev/null || true)"); done
NG=$(jq '.groups | length' "$B/a_wire.json" 2>/dev/null || echo 0)
echo "   wire $(sec "$T_AW") s, files $(sec "$T_AF") s, sqlite3 $(sec "$T_AS") s ($NG groups)" >&2
[ "$N_AW" = "$N" ] && [ "$N_AF" = "$N" ] && [ "$N_AS" = "$N" ] ||
	problem "\$group: the counts add up to wire $N_AW, files $N_AF, sqlite3 $N_AS, not $N"
[ -n "${G[0]}" ] && [ "${G[0]}" = "${G[1]}" ] && [ "${G[0]}" = "${G[2]}" ] ||
	problem "\$group: the groups differ: wire ${G[0]:0:200} files ${G[1]:0:200} sqlite3 ${G[2]:0:200}"

########################################################################################
rss_step "the aggregations"
echo "== 4. $CLIENTS clients x $READS point reads by _id" >&2
C0=$(dcpu)
client p_wire points wire "$URI" test users "$CLIENTS" "$B/point.ids"
D_PW=$(dsub "$C0" "$(dcpu)")
rss_step "the wire's point reads"
C0=$(dcpu)
client p_wireraw points wireraw "$URI" test users "$CLIENTS" "$B/point.ids"
D_PR=$(dsub "$C0" "$(dcpu)")
C0=$(dcpu)
client p_fuse points fuse "$MNT/test/users" "$CLIENTS" "$B/point.ids"
D_PF=$(dsub "$C0" "$(dcpu)")
rss_step "the files' point reads"
client p_sql points sqlite "$DB" "$SQL_P" "$CLIENTS" "$B/point.ids"
T_PR=$(field "$B/p_wireraw.json" seconds)
T_PW=$(field "$B/p_wire.json" seconds) T_PF=$(field "$B/p_fuse.json" seconds) T_PS=$(field "$B/p_sql.json" seconds)
R=()
for s in wire fuse sql wireraw; do
	R+=("$(field "$B/p_$s.json" n)/$(field "$B/p_$s.json" agesum)/$(field "$B/p_$s.json" failed_clients)")
done
echo "   wire $(sec "$T_PW") s, files $(sec "$T_PF") s, sqlite3 $(sec "$T_PS") s (found/agesum/failed: ${R[*]})" >&2
[ "${R[0]%%/*}" = "$NP" ] && [ "${R[0]}" = "${R[1]}" ] && [ "${R[0]}" = "${R[2]}" ] && [ "${R[0]}" = "${R[3]}" ] && [ "${R[0]##*/}" = 0 ] ||
	problem "point reads (found/sum of ages/failed clients): wire ${R[0]}, files ${R[1]}, sqlite3 ${R[2]}, wire raw ${R[3]}; expected $NP found"

RSS=$(kib_to_mib "$(vmhwm)")
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
unmount
MOUNTED=0
T_ALL=$(($(date +%s) - T_START))

########################################################################################
# The tables
row() { # NAME DOCS T_WIRE T_FUSE T_SQL
	printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$1" \
		"$(sec "$3") ($(rate "$2" "$3"))" "$(sec "$4") ($(rate "$2" "$4"))" "$(sec "$5") ($(rate "$2" "$5"))" \
		"$(div "$3" "$4")" "$(div "$3" "$5")" "$(div "$4" "$5")" "$2" "$6"
}
G1=$(lt "$T_IW" "$T_IF" 1.5) G2=$(lt "$T_FW" "$T_FF" 1.5) G3=$(lt "$T_AW" "$T_AF" 1.5) G4=$(lt "$T_PW" "$T_PF")
cat <<EOF
## The wire protocol: PyMongo $PYMONGO vs the mount's files vs sqlite3

$DATE, N = $N generated users ($JSONL_SIZE of JSON Lines), $MACHINE; load average $LOAD0
at the start, $LOAD1 at the end; whole run $T_ALL s. \`tests/bench/wire.sh $DOCFS\`.
Seconds (documents/s in brackets); ratios are time / time (below 1: the first is faster).

| operation | wire (PyMongo) | files (mount) | sqlite3 | wire / files | wire / sqlite3 | files / sqlite3 | documents | goal |
|---|---:|---:|---:|---:|---:|---:|---:|---|
$(row "1. insert, \`insert_many\` x $BATCH / \`cat > .insert\` / \`.import\`" "$N" "$T_IW" "$T_IF" "$T_IS" "wire within 1.5x of files: $G1")
$(row "2. find \`$QF\` (index {user.age: 1}), best of $REPEAT warm" "$N_FW" "$T_FW" "$T_FF" "$T_FS" "wire within 1.5x of files: $G2")
$(row "3. \`\$group\` by city, \`\$sum: 1\`, over all, best of $REPEAT warm" "$N" "$T_AW" "$T_AF" "$T_AS" "wire within 1.5x of files: $G3")
$(row "4. $CLIENTS clients x $READS point reads by _id" "$NP" "$T_PW" "$T_PF" "$T_PS" "wire faster than files: $G4")

- Checked: insert counts $N_IW ($N_IW_ACK acknowledged) / $N_IF / $N_IS; the find's $N_FW
  _ids equal on all three (wire plan: $(jq -r '[.. | objects | .stage? // empty] | join(" > ")' <<< "$PLAN_W" 2>/dev/null)); $NG groups
  equal; point reads found $NP/$NP documents with the same sum of ages on all three.
- With PyMongo's \`RawBSONDocument\` (the documents left as BSON; the point reads then decode
  \`user.age\`, which makes PyMongo inflate the whole document): the find (2) took
  $(sec "$T_FR") s (wire / files $(div "$T_FR" "$T_FF")), the point reads (4) $(sec "$T_PR") s
  (wire / files $(div "$T_PR" "$T_PF")).
- Documents/s of 2 counts the documents returned; of 3 the documents grouped.
- The daemon's peak RSS (VmHWM): $RSS; its RSS after each step: $RSS_STEPS.

Where the CPU went (seconds of CPU, user + system; the daemon's is read from \`/proc/PID/stat\`
around each step, so it also holds the few connections' setup; on 2 cores a client's CPU is
taken from the daemon's):

| step | wall | client CPU | docfs daemon CPU |
|---|---:|---:|---:|
| 1. \`insert_many\` (PyMongo: BSON encoding, the socket) | $(sec "$T_IW") | $(sec "$C_IW") | $D_IW |
| 1. \`cat > .insert\` | $(sec "$T_IF") | (cat) | $D_IF |
| 4. point reads, wire (PyMongo \`find_one\`, BSON decoding) | $(sec "$T_PW") | $(sec "$(field "$B/p_wire.json" client_cpu)") | $D_PW |
| 4. point reads, wire, \`RawBSONDocument\` (only \`user.age\` decoded) | $(sec "$T_PR") | $(sec "$(field "$B/p_wireraw.json" client_cpu)") | $D_PR |
| 4. point reads, files (open, read, \`json.loads\`) | $(sec "$T_PF") | $(sec "$(field "$B/p_fuse.json" client_cpu)") | $D_PF |
| 4. point reads, sqlite3 (SELECT, \`json.loads\`) | $(sec "$T_PS") | $(sec "$(field "$B/p_sql.json" client_cpu)") | |

### Summary (for README.md)

\`\`\`
Wire benchmark ($DATE, N=$N, load $LOAD0, tests/bench/wire.sh): wire / files / sqlite3, seconds
  insert_many x $BATCH        $(sec "$T_IW") / $(sec "$T_IF") / $(sec "$T_IS")  (wire/files $(div "$T_IW" "$T_IF"), goal <= 1.5: $G1)
  find 1% by index           $(sec "$T_FW") / $(sec "$T_FF") / $(sec "$T_FS")  (wire/files $(div "$T_FW" "$T_FF"): $G2)
  \$group over all            $(sec "$T_AW") / $(sec "$T_AF") / $(sec "$T_AS")  (wire/files $(div "$T_AW" "$T_AF"): $G3)
  $CLIENTS x $READS point reads  $(sec "$T_PW") / $(sec "$T_PF") / $(sec "$T_PS")  (wire/files $(div "$T_PW" "$T_PF"), goal < 1: $G4)
\`\`\`
EOF
if [ "$FAILED" -ne 0 ]; then
	echo
	echo "**docfs misbehaved or the three disagreed during this run (see stderr).**"
	exit 1
fi
