#!/usr/bin/env bash
# capped.sh - capped collections through the mount and the CLI: `docfs capped` (MongoDB's
# convertToCapped), eviction of the oldest documents by count and by size on every insert
# (.insert, a new document file), $natural order, and the refusals that change nothing (a
# document over the whole size, a TTL index, moving a document out). Not yet built: the
# .options file and tailable reads (README.md says so).
. "$(dirname "$0")/lib.sh"
"$DOCFS" capped "$STORE" logs.events 4096 3 > "$T/out" || fail "docfs capped failed"
expect_eq "$(jq -c . "$T/out")" '{"capped":true,"size":4096,"max":3,"count":0}' "docfs capped prints the options"
mount_docfs
C=$MNT/logs/events
ids() { ls "$C" | grep '\.json$' | sed 's/\.json$//' | sort -n | tr '\n' ' '; }

step "at most max documents: the oldest go first"
printf '{"_id": %d, "msg": "m%d"}\n' 1 1 2 2 3 3 4 4 5 5 > "$C/.insert"
expect_eq "$(ids)" "3 4 5 " "after inserting 5 into max 3"
echo '{"msg": "six"}' > "$C/6.json"
expect_eq "$(ids)" "4 5 6 " "a new document file evicts the oldest"
expect_eq "$(cat "$C/query/{}?hint={\$natural: -1}&projection={_id: 1}" | jq -c ._id | tr '\n' ' ')" "6 5 4 " "\$natural -1 is newest first"
sed -i 's/"m4"/"four, longer now"/' "$C/4.json"
expect_eq "$(ids)" "4 5 6 " "an update keeps the document's place"
expect_eq "$(jq -r .msg "$C/4.json")" "four, longer now" "the update"

step "at most size bytes"
"$DOCFS" capped "$STORE" logs.big 8192 > /dev/null
pad=$(head -c 3000 /dev/zero | tr '\0' x)
for i in 1 2 3 4; do
	echo "{\"pad\": \"$pad\"}" > "$MNT/logs/big/$i.json"
done
expect_eq "$(ls "$MNT/logs/big" | grep -c '\.json$')" "2" "two 3 KB documents fit in 8 KiB"
[ -e "$MNT/logs/big/4.json" ] && [ -e "$MNT/logs/big/3.json" ] || fail "the newest two are kept"

step "refusals change nothing"
big=$(head -c 9000 /dev/zero | tr '\0' x)
if /usr/bin/printf '{"pad": "%s"}\n' "$big" > "$MNT/logs/big/9.json" 2>/dev/null; then
	fail "a document over the whole size was accepted"
fi
tail -n1 "$MNT/.docfs/errors" | grep -q "does not fit" || fail "no clear error: $(tail -n1 "$MNT/.docfs/errors")"
expect_eq "$(ls "$MNT/logs/big" | grep -c '\.json$')" "2" "the refused document evicted nothing"
if /usr/bin/printf '{key: {at: 1}, expireAfterSeconds: 60}' > "$C/.indexes/ttl" 2>/dev/null; then
	fail "a TTL index on a capped collection was created"
fi
tail -n1 "$MNT/.docfs/errors" | grep -q "capped" || fail "no clear TTL error: $(tail -n1 "$MNT/.docfs/errors")"
mkdir "$MNT/logs/plain"
expect_fail "mv of a document out of a capped collection" mv "$C/5.json" "$MNT/logs/plain/5.json"
[ -e "$C/5.json" ] || fail "the refused mv moved the document"
unmount_docfs
"$DOCFS" check "$STORE" > /dev/null || fail "docfs check after capped writes"
echo ok
