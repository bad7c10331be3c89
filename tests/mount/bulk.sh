#!/usr/bin/env bash
# bulk.sh - 100,000 generated users (40,000 in the sanitizer build): inserted through <coll>/.insert (every document listed
# and stored exactly as generated), through `docfs import` while mounted, and through
# `docfs import --jsonArray`; and a listing that runs while 20,000 more documents are
# inserted neither loops nor skips (every original name exactly once, no name twice).
. "$(dirname "$0")/lib.sh"
# A command that fails outside a check stops the test with its line and the daemon log.
trap 'fail "line $LINENO: \"$BASH_COMMAND\" exited $?"' ERR
mount_docfs

ROOT=$(dirname "$0")/../..
N=100000 # the documents of the listing during an insert
# the generated users of .insert, export and import: fewer in the sanitizer build (time)
if [ -n "${DOCFS_SANITIZED:-}" ]; then U=40000; else U=$N; fi

# count_docs DIR : the number of documents listed in DIR
count_docs() {
	ls "$1" | grep -c '\.json$' || true
}

# wait_count DIR N : polls up to 1 s until DIR lists N documents; prints the last count
wait_count() {
	local c
	for _ in $(seq 1 10); do
		c=$(count_docs "$1")
		[ "$c" = "$2" ] && break
		sleep 0.1
	done
	echo "$c"
}

step "generate $U users"
"$DOCFS" generate "$ROOT/examples/users.template.json" -n $U --seed 1 > "$T/users.jsonl" ||
	fail "docfs generate"
expect_eq "$(wc -l < "$T/users.jsonl")" "$U" "generated lines"

step "insert $U users through .insert"
mkdir "$MNT/test" "$MNT/test/users"
SECONDS=0
cat "$T/users.jsonl" > "$MNT/test/users/.insert" || fail "cat > .insert"
echo "   inserted in ${SECONDS}s"
expect_eq "$(count_docs "$MNT/test/users")" "$U" "documents listed in test/users"
expect_eq "$(ls "$MNT/test/users" | grep -cvE '^[0-9a-f]{24}\.json$|^\.insert$|^query$|^explain$|^aggregate$|^update$|^delete$')" "0" \
	"entries in test/users that are not ObjectId documents"

step "every user is stored exactly as generated"
"$DOCFS" export "$STORE" test.users > "$T/export" || fail "docfs export test.users"
sed 's/^{"_id": {"$oid": "[0-9a-f]\{24\}"}, /{/' "$T/export" | sort > "$T/export.sorted"
sort "$T/users.jsonl" > "$T/users.sorted"
cmp -s "$T/export.sorted" "$T/users.sorted" ||
	fail "exported users differ from the generated ones: $(diff "$T/users.sorted" "$T/export.sorted" | sed -n 1,4p)"
first=$(ls "$MNT/test/users" | grep '\.json$' | sort | sed -n 1,1p)
expect_eq "$(jq -c 'del(._id)' "$MNT/test/users/$first")" "$(head -n 1 "$T/users.jsonl" | jq -c .)" \
	"the first user read through the mount ($first)"
expect_eq "$(stat -c %s "$MNT/test/users/$first")" "$(wc -c < "$MNT/test/users/$first")" "st_size of $first"

step "a listing during a concurrent insert neither loops nor skips"
mkdir "$MNT/test/big"
# 100,000 documents with even ids, then 20,000 with odd ids spread between them.
seq 1 $N | awk '{ printf "{\"_id\": \"u%07d\", \"n\": %d}\n", 2 * $1, 2 * $1 }' > "$T/even.jsonl"
seq 0 19999 | awk '{ printf "{\"_id\": \"u%07d\", \"n\": %d}\n", 10 * $1 + 1, 10 * $1 + 1 }' > "$T/odd.jsonl"
cat "$T/even.jsonl" > "$MNT/test/big/.insert" || fail "insert of the even ids"
sed 's/.*"_id": "\([^"]*\)".*/\1.json/' "$T/even.jsonl" | sort > "$T/orig"
sed 's/.*"_id": "\([^"]*\)".*/\1.json/' "$T/odd.jsonl" | sort > "$T/new"
ls -f "$MNT/test/big" | grep '\.json$' | sort > "$T/ls.before"
cmp -s "$T/orig" "$T/ls.before" || fail "ls -f before the concurrent insert: $(diff "$T/orig" "$T/ls.before" | sed -n 1,4p)"
# The inserter writes 200 documents per write, 100 writes, a little apart, so that many
# listings run while it inserts. After its first write it leaves $T/half and waits for
# $T/listed: the listing loop makes that only after a whole listing that began once $T/half
# was there, so at least one listing surely ran in the middle of the insert, however the
# machine schedules the two.
python3 - "$T/odd.jsonl" "$MNT/test/big/.insert" "$T/half" "$T/listed" > "$T/inserter.out" 2>&1 <<'EOF' &
import os, sys, time
lines = open(sys.argv[1], "rb").read().splitlines(keepends=True)
fd = os.open(sys.argv[2], os.O_WRONLY)
for i in range(0, len(lines), 200):
    data = b"".join(lines[i:i + 200])
    off = 0
    while off < len(data):
        off += os.write(fd, data[off:])
    if i == 0:
        open(sys.argv[3], "w").close()
        for _ in range(6000):
            if os.path.exists(sys.argv[4]):
                break
            time.sleep(0.01)
        else:
            sys.exit("no listing came after the first write in 60 s")
    time.sleep(0.02)
os.close(fd)
EOF
inserter=$!
runs=0
while kill -0 "$inserter" 2>/dev/null || [ "$runs" -eq 0 ]; do
	half=0
	[ ! -e "$T/half" ] || half=1
	ls -f "$MNT/test/big" > "$T/ls.$runs" || fail "ls -f during the insert"
	[ "$half" -eq 0 ] || touch "$T/listed"
	runs=$((runs + 1))
	[ "$runs" -lt 20000 ] || fail "the inserter did not finish"
done
wait "$inserter" || fail "the concurrent inserter failed: $(cat "$T/inserter.out")"
overlapped=0
sort -m "$T/orig" "$T/new" > "$T/all"
for i in $(seq 0 $((runs - 1))); do
	grep '\.json$' "$T/ls.$i" | sort > "$T/seen"
	dups=$(sort "$T/ls.$i" | uniq -d | sed -n 1,3p)
	[ -z "$dups" ] || fail "listing $i during the insert shows names twice: $dups"
	missing=$(comm -23 "$T/orig" "$T/seen" | sed -n 1,3p)
	[ -z "$missing" ] || fail "listing $i during the insert skips existing documents: $missing ($(comm -23 "$T/orig" "$T/seen" | wc -l) in all)"
	junk=$(comm -13 "$T/all" "$T/seen" | sed -n 1,3p)
	[ -z "$junk" ] || fail "listing $i during the insert shows unknown names: $junk"
	nnew=$(comm -12 "$T/new" "$T/seen" | wc -l)
	if [ "$nnew" -gt 0 ] && [ "$nnew" -lt 20000 ]; then
		overlapped=$((overlapped + 1))
	fi
done
echo "   $runs listings, $overlapped of them saw the insert in progress"
[ "$overlapped" -gt 0 ] || fail "no listing ran while the insert was in progress (the test did not test)"
expect_eq "$(wait_count "$MNT/test/big" 120000)" "120000" "documents in test/big after the concurrent insert"

step "docfs import of $U users while mounted shows in the mount"
ls "$MNT/test" > /dev/null
SECONDS=0
"$DOCFS" import "$STORE" test.users2 "$T/users.jsonl" 2> "$T/err" || fail "docfs import: $(cat "$T/err")"
echo "   imported in ${SECONDS}s"
grep -q "^$U documents imported into test.users2" "$T/err" || fail "import summary: $(cat "$T/err")"
for _ in $(seq 1 300); do
	[ -d "$MNT/test/users2" ] && break
	sleep 0.1
done
[ -d "$MNT/test/users2" ] || fail "test/users2 not in the mount 30 s after docfs import"
expect_eq "$(wait_count "$MNT/test/users2" $U)" "$U" "documents listed in test/users2"

step "docfs import --jsonArray"
head -n 5 "$T/users.jsonl" | jq -s . > "$T/array.json"
"$DOCFS" import "$STORE" test.arr "$T/array.json" --jsonArray 2> "$T/err" ||
	fail "docfs import --jsonArray: $(cat "$T/err")"
for _ in $(seq 1 10); do
	[ -d "$MNT/test/arr" ] && break
	sleep 0.1
done
expect_eq "$(wait_count "$MNT/test/arr" 5)" "5" "documents from a JSON array"
expect_eq "$(cat "$MNT"/test/arr/*.json | jq -c 'del(._id)' | sort)" \
	"$(head -n 5 "$T/users.jsonl" | jq -c . | sort)" "documents from a JSON array"


step "docfs check"
"$DOCFS" check "$STORE" > /dev/null || fail "docfs check"
echo "ok"
