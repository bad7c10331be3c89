#!/usr/bin/env bash
# tests/bench/feed.sh [DOCFS] - what the change feed costs on writes (issue 30): one run that
# prints, against sqlite3 doing the same work,
#   1. the bulk insert of N generated users through `.insert` (change streams on, as by
#      default) against the sqlite3 CLI importing the same JSON lines into one TEXT column
#      in one transaction, and the two stores' sizes on disk afterwards;
#   2. updateMany {"user.age": {$lt: 10}} (about 10%) {$inc: {"user.address.zip_code": 1}}
#      through the mount against sqlite3's UPDATE ... json_set over the same rows: the first
#      run (the one that keeps, for the change feed, the inserted versions it changes) and
#      the second, as tests/bench/agg.sh times it.
# Each side runs BENCH_REPEAT rounds (default 3; a fresh store or database each, docfs and
# sqlite3 alternating) and the best time of each step is reported.
# docfs must report N documents, the same modified count as sqlite3's changes(), the same
# sum of the updated zip codes afterwards, `.changes` must end with an update event and
# `docfs check` must find the store clean; otherwise it exits 1. No timing fails anything.
# Prints a Markdown table on stdout, progress on stderr. Needs sqlite3 (with dbstat), jq and
# /dev/fuse. Environment: BENCH_DIR (temporary directory's parent, default /tmp), BENCH_N
# (1000000; develop with 100000-200000), BENCH_REPEAT (3), BENCH_MOUNT_OPTS (extra `docfs mount -o` options).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/bench/lib.sh"
DOCFS=${1:-$ROOT/build/docfs}
case $DOCFS in /*) ;; *) DOCFS=$PWD/$DOCFS ;; esac
N=${BENCH_N:-1000000}
REPEAT=${BENCH_REPEAT:-3}
TEMPLATE=$ROOT/examples/users.template.json

missing=()
for tool in sqlite3 jq fusermount3 pgrep mountpoint; do
	command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] ||
	die "missing tools: ${missing[*]} (e.g. apt-get install sqlite3 jq fuse3 procps util-linux)"
[ -x "$DOCFS" ] || die "no docfs binary at $DOCFS (build it: meson setup build-rel --buildtype=release && ninja -C build-rel)"
[ -e /dev/fuse ] || die "no /dev/fuse"

B=$(mktemp -d "${BENCH_DIR:-/tmp}/docfs-fbench.XXXXXX")
STORE=$B/store
MNT=$B/mnt
MOUNTED=0
FAILED=0

. "$ROOT/tests/bench/onemount.sh" # daemon_pid, unmount, the EXIT trap, problem, ...

mount_store() {
	"$DOCFS" mount -o "log=$B/log${BENCH_MOUNT_OPTS:+,$BENCH_MOUNT_OPTS}" "$STORE" "$MNT" ||
		die "docfs mount failed"
	MOUNTED=1
}
bytes() { du -sb "$1" | cut -f1; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
# the pages of the change feed's tables and indexes in a database file, in bytes
feed_bytes() {
	sqlite3 "$1" "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name IN ('events',
		'events_db', 'events_coll', 'evdocs', 'evends')" 2>/dev/null || echo 0
}

DATE=$(date -u +"%Y-%m-%d %H:%M")
VERSION=$("$DOCFS" version 2>/dev/null || echo "docfs ?")
echo "docfs change feed benchmark: $VERSION ($DOCFS), $DATE UTC, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2

UF='{"user.age": {$lt: 10}}'
UU='{$inc: {"user.address.zip_code": 1}}'
ZIP="json_extract(j,'\$.user.address.zip_code')"
SU="UPDATE t SET j = json_set(j, '\$.user.address.zip_code', $ZIP + 1) WHERE json_extract(j,'\$.user.age') < 10; SELECT changes();"
SZSUM="SELECT sum($ZIP) FROM t WHERE json_extract(j,'\$.user.age') < 10"
ZSUM='[{$match: {"user.age": {$lt: 10}}}, {$group: {_id: null, s: {$sum: "$user.address.zip_code"}}}]'

echo "== data: $N generated users" >&2
"$DOCFS" generate "$TEMPLATE" -n "$N" --seed 1 > "$B/users.jsonl" || die "docfs generate failed"
[ "$(wc -l < "$B/users.jsonl")" -eq "$N" ] || die "docfs generate wrote the wrong number of lines"

upd() { # one updateMany through the mount, its result read back on the same descriptor
	exec 3<>"$MNT/test/users/update/$UF?multi=true"
	printf '%s' "$UU" >&3
	cat <&3 > "$B/u$1.json"
	exec 3>&-
}
# best VAR T: keeps the smaller of $VAR and T in VAR
best() { if [ -z "${!1}" ] || awk -v a="$2" -v b="${!1}" 'BEGIN { exit !(a < b) }'; then printf -v "$1" '%s' "$2"; fi; }

# docfs_round: a fresh store, the bulk insert, then updateMany twice (remounted)
docfs_round() {
	rm -rf "$STORE"
	mkdir -p "$STORE" "$MNT"
	mount_store
	mkdir "$MNT/test" "$MNT/test/users"
	timeit 'cat "$B/users.jsonl" > "$MNT/test/users/.insert"'
	best T_INS "$T"
	local t_ins=$T
	[ "$RC" -eq 0 ] || problem "cat users.jsonl > .insert exited $RC"
	C_INS=$(ls -f "$MNT/test/users" | grep -c '\.json$' || true)
	[ "$C_INS" -eq "$N" ] || problem "test/users lists $C_INS documents after inserting $N"
	timeit unmount
	T_UNM=$T
	MOUNTED=0
	S_DOCFS=$(bytes "$STORE")
	S_FEED=$(feed_bytes "$STORE/test.db")
	echo "   docfs .insert ${t_ins}s, unmount ${T_UNM}s, store $(mib "$S_DOCFS") MiB (feed $(mib "$S_FEED") MiB)" >&2
	mount_store
	timeit 'upd 1 2> "$B/u.err"'
	best T_U1 "$T"
	[ "$RC" -eq 0 ] || problem "update/$UF?multi=true exited $RC: $(head -n 3 "$B/u.err")"
	timeit 'upd 2 2> "$B/u.err"'
	best T_U2 "$T"
	[ "$RC" -eq 0 ] || problem "update/$UF?multi=true (second) exited $RC: $(head -n 3 "$B/u.err")"
	N_DU=$(jq -r '.modifiedCount | .["$numberLong"]? // .' "$B/u1.json" 2>/dev/null || echo "?")
	Z_D=$(jq -r '.s | .["$numberLong"]? // .' "$MNT/test/users/aggregate/$ZSUM" 2>/dev/null || echo "?")
	LAST=$(tail -n 1 "$MNT/test/users/.changes" | jq -r .operationType 2>/dev/null || echo "?")
	[ "$LAST" = update ] || problem "the last line of test/users/.changes is not an update event ($LAST)"
	unmount
	MOUNTED=0
	S_DOCFS2=$(bytes "$STORE")
	S_FEED2=$(feed_bytes "$STORE/test.db")
	if [ "$r" -eq "$REPEAT" ]; then
		"$DOCFS" check "$STORE" > "$B/check.out" 2>&1 || problem "docfs check: $(tail -n 3 "$B/check.out")"
	fi
	echo "   docfs updateMany, best so far: $T_U1 s, then $T_U2 s ($N_DU modified)" >&2
}

# sqlite_round: a fresh database, the same lines imported, then the UPDATE twice
sqlite_round() {
	rm -rf "$B/sq"
	mkdir "$B/sq"
	timeit 'sqlite3 "$B/sq/users.db" > "$B/sqlite.out" 2>&1 <<EOF
CREATE TABLE t(j TEXT);
.mode ascii
.separator "\\037" "\\n"
BEGIN;
.import $B/users.jsonl t
COMMIT;
EOF'
	best T_SQ "$T"
	[ "$RC" -eq 0 ] || die "sqlite3 import exited $RC: $(tail -n 3 "$B/sqlite.out")"
	[ "$(sqlite3 "$B/sq/users.db" 'SELECT count(*) FROM t')" -eq "$N" ] || die "sqlite3 table does not have $N rows"
	S_SQ=$(bytes "$B/sq")
	timeit 'sqlite3 "$B/sq/users.db" "$SU" > "$B/su1.out"'
	best T_S1 "$T"
	timeit 'sqlite3 "$B/sq/users.db" "$SU" > "$B/su2.out"'
	best T_S2 "$T"
	N_SU=$(tail -n 1 "$B/su1.out")
	Z_S=$(sqlite3 "$B/sq/users.db" "$SZSUM")
	S_SQ2=$(bytes "$B/sq")
	echo "   sqlite3 (best so far) .import ${T_SQ}s, $(mib "$S_SQ") MiB, UPDATE $T_S1 / $T_S2" >&2
}

T_INS= T_U1= T_U2= T_SQ= T_S1= T_S2=
for ((r = 1; r <= REPEAT; r++)); do
	echo "== round $r of $REPEAT" >&2
	docfs_round
	sqlite_round
done
[ "$N_DU" = "$N_SU" ] || problem "update: docfs modified $N_DU documents, sqlite3 changed $N_SU rows"
[ "$Z_D" = "$Z_S" ] || problem "after the updates the zip codes sum to $Z_D in docfs, $Z_S in sqlite3"

cat <<EOF
## The change feed's cost on writes, $N generated users ($DATE UTC, $VERSION)

| | docfs | sqlite3 | docfs / sqlite3 |
|---|---|---|---|
| bulk insert (\`cat > .insert\` / \`.import\`), s | $T_INS | $T_SQ | $(div "$T_INS" "$T_SQ") |
| store on disk after it, MiB | $(mib "$S_DOCFS") (change feed $(mib "$S_FEED")) | $(mib "$S_SQ") | $(div "$S_DOCFS" "$S_SQ") |
| updateMany \$inc over 10%, first run, s | $T_U1 | $T_S1 | $(div "$T_U1" "$T_S1") |
| updateMany \$inc over 10%, second run, s | $T_U2 | $T_S2 | $(div "$T_U2" "$T_S2") |
| store on disk after the updates, MiB | $(mib "$S_DOCFS2") (change feed $(mib "$S_FEED2")) | $(mib "$S_SQ2") | $(div "$S_DOCFS2" "$S_SQ2") |

Seconds: the best of $REPEAT rounds, each a fresh store and database on both sides,
alternating (this machine's load moves single runs by 2-3x). Unmounting after the insert
(final checkpoint) took $T_UNM s in the last round, not counted. \`docfs check\` ran on the
last round's store after the updates. updateMany
modified $N_DU documents in docfs and $N_SU rows in sqlite3; the updated zip codes sum to $Z_D
and $Z_S. docfs: WAL, synchronous=NORMAL, change streams on (256 MiB of history kept);
sqlite3: its defaults. The docfs store includes its 8 MiB \`.reserve\` file.
EOF
[ "$FAILED" -eq 0 ] || { echo "bench: docfs misbehaved (see PROBLEM lines above)" >&2; exit 1; }
