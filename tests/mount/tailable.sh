#!/usr/bin/env bash
# tailable.sh - tailable reads of capped collections (`query/<q>?tailable=1`): a reader that
# prints the matching documents and then waits for new ones while a writer inserts, skip,
# limit (which ends the read), projection and pretty output, an empty collection that does
# not end the read, a reader stopped by timeout(1), CappedPositionLost (ESTALE) when the
# collection overwrote the reader's position, QueryPlanKilled when it is dropped, and the
# refusals (not capped, a sort, count, a format that is not a stream, explain/).
. "$(dirname "$0")/lib.sh"
"$DOCFS" capped "$STORE" logs.events 65536 5 > /dev/null || fail "docfs capped failed"
mount_docfs
C=$MNT/logs/events
lines() { [ -f "$1" ] && wc -l < "$1" || echo 0; }
# wait_lines FILE N: until FILE has N lines (10 s at most)
wait_lines() {
	for _ in $(seq 100); do
		[ "$(lines "$1")" -ge "$2" ] && return 0
		sleep 0.1
	done
	fail "$1 has $(lines "$1") lines, not $2: $(cat "$1")"
}

step "a reader prints the matches, then waits for new ones"
printf '{"_id": %d, "lvl": "%s"}\n' 1 info 2 error 3 info > "$C/.insert"
timeout -k 5 20 cat "$C/query/{lvl: 'error'}?tailable=1" > "$T/tail" &
reader=$!
wait_lines "$T/tail" 1
printf '{"_id": %d, "lvl": "%s"}\n' 4 error 5 info > "$C/.insert"
echo '{"_id": 6, "lvl": "error"}' > "$C/.insert"
wait_lines "$T/tail" 3
kill -0 "$reader" 2>/dev/null || fail "the tailable read ended by itself"
kill "$reader"
wait "$reader" 2>/dev/null || true
expect_eq "$(jq -c ._id "$T/tail" | tr '\n' ' ')" "2 4 6 " "the matching documents, in insertion order"
ls "$C/query/" > /dev/null || fail "the mount works after the stopped reader"

step "skip, limit (which ends the read), projection, pretty"
# the collection (max 5) holds 2..6 now
expect_eq "$(timeout 10 cat "$C/query/{}?tailable=1&limit=2" | jq -c ._id | tr '\n' ' ')" "2 3 " "limit=2 ends after two"
expect_eq "$(timeout 10 cat "$C/query/{}?tailable=1&skip=3&limit=2&projection={lvl: 1, _id: 0}" | jq -c . | tr '\n' ' ')" \
	'{"lvl":"info"} {"lvl":"error"} ' "skip and a projection"
timeout 10 cat "$C/query/{_id: 4}?tailable=1&limit=1&format=pretty" > "$T/pretty"
expect_eq "$(cat "$T/pretty")" "$(printf '{\n  "_id": 4,\n  "lvl": "error"\n}')" "format=pretty"
timeout 10 cat "$C/query/{}?tailable=1&limit=5&sort={\$natural: 1}&hint={\$natural: 1}" > "$T/nat" ||
	fail "sort and hint {\$natural: 1} are a tailable read's own order"
expect_eq "$(lines "$T/nat")" "5" "the whole collection in \$natural order"

step "an empty collection does not end the read; a filter that matches nothing neither"
mkdir "$MNT/logs/empty" && echo '{capped: true, size: 4096}' > "$MNT/logs/empty/.options"
timeout -k 5 20 cat "$MNT/logs/empty/query/{}?tailable=1" > "$T/empty" &
r1=$!
timeout -k 5 20 cat "$C/query/{lvl: 'debug'}?tailable=1&limit=1" > "$T/debug" &
r2=$!
sleep 0.5
kill -0 "$r1" 2>/dev/null || fail "a tailable read of an empty collection ended"
echo '{"_id": "first"}' > "$MNT/logs/empty/.insert"
wait_lines "$T/empty" 1
expect_eq "$(jq -c ._id "$T/empty")" '"first"' "the first document of a collection that was empty"
kill "$r1"
printf '{"_id": %d, "lvl": "info"}\n' 7 8 9 > "$C/.insert"
kill -0 "$r2" 2>/dev/null || fail "a read waiting for a debug line ended"
echo '{"_id": 10, "lvl": "debug"}' > "$C/.insert"
wait "$r2" || fail "the read with limit=1 did not end after its match"
expect_eq "$(jq -c ._id "$T/debug")" "10" "the match that came later"

step "timeout(1) stops a waiting reader"
rc=0
timeout -k 5 1 cat "$C/query/{lvl: 'never'}?tailable=1" > /dev/null || rc=$?
expect_eq "$rc" "124" "timeout ended the read with SIGTERM"

step "CappedPositionLost when the reader's position was overwritten"
python3 - "$C" > "$T/lost" 2>&1 <<'EOF' || fail "position lost: $(cat "$T/lost")"
import errno, os, sys
c = sys.argv[1]
fd = os.open(c + "/query/{}?tailable=1", os.O_RDONLY)
first = os.read(fd, 65536).decode()
assert first.count("\n") == 5, first
with open(c + "/.insert", "w") as f:
    for i in range(100, 110):
        f.write('{"_id": %d}\n' % i)
try:
    os.read(fd, 65536)
    sys.exit("a read past an overwritten position succeeded")
except OSError as e:
    if e.errno != errno.ESTALE:
        raise
os.close(fd)
EOF
grep -q "CappedPositionLost (136)" "$MNT/.docfs/errors" || fail "no CappedPositionLost message: $(tail -n1 "$MNT/.docfs/errors")"

step "QueryPlanKilled when the collection is dropped under the read"
mkdir "$MNT/logs/gone" && echo '{capped: true, size: 4096}' > "$MNT/logs/gone/.options"
echo '{"_id": 1}' > "$MNT/logs/gone/.insert"
python3 - "$MNT/logs/gone" "$DOCFS" "$STORE" > "$T/gone" 2>&1 <<'EOF' || fail "drop: $(cat "$T/gone")"
import errno, os, subprocess, sys
c = sys.argv[1]
fd = os.open(c + "/query/{}?tailable=1", os.O_RDONLY)
assert os.read(fd, 65536).count(b"\n") == 1
subprocess.run(["rm", "-rf", c], check=True)  # drops the collection (README: rm -r)
assert not os.path.exists(c), "the collection is still there after rm -rf"
try:
    os.read(fd, 65536)
    sys.exit("a read of a dropped collection succeeded")
except OSError as e:
    if e.errno != errno.ENOENT:
        raise
os.close(fd)
EOF
grep -q "QueryPlanKilled (175)" "$MNT/.docfs/errors" || fail "no message for the dropped collection: $(tail -n1 "$MNT/.docfs/errors")"

step "refusals say why"
mkdir "$MNT/logs/plain" && echo '{"_id": 1}' > "$MNT/logs/plain/.insert"
refused() { # path message
	if timeout 10 cat "$1" > /dev/null 2>&1; then
		fail "reading $1 succeeded"
	fi
	tail -n1 "$MNT/.docfs/errors" | grep -qF "$2" || fail "no error saying '$2': $(tail -n1 "$MNT/.docfs/errors")"
}
refused "$MNT/logs/plain/query/{}?tailable=1" "tailable cursor requested on non capped collection 'plain'"
refused "$C/query/{}?tailable=1&sort={_id: 1}" "cannot use tailable option with a sort other than {\$natural: 1}"
refused "$C/query/{}?tailable=1&count=1" "tailable=1 cannot be used with count"
refused "$C/query/{}?tailable=1&format=json" "format must be jsonl or pretty, not json"
refused "$C/query/{}?tailable=1&maxTimeMS=100" "maxTimeMS cannot be used with tailable=1"
refused "$C/query/{}?tailable=1&hint={_id: 1}" "the only hint it takes is {\$natural: 1}"
refused "$C/query/{}?tailable=yes" "tailable"
refused "$C/explain/{}?tailable=1" "tailable is an option of query/ paths"

unmount_docfs
"$DOCFS" check "$STORE" > /dev/null || fail "docfs check after tailable reads"
echo ok
