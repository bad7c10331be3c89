#!/usr/bin/env bash
# capped.sh - capped collections through the mount and the CLI: `docfs capped` (MongoDB's
# convertToCapped), eviction of the oldest documents by count and by size on every insert
# (.insert, a new document file), $natural order, and the refusals that change nothing (a
# document over the whole size, a TTL index, moving a document out), and the .options
# file: read back, written at creation, refused with a reason otherwise. Tailable reads are
# tailable.sh's.
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
step ".options: read back, written at creation, refused otherwise"
expect_eq "$(cat "$C/.options")" '{"capped": true, "size": 4096, "max": 3}' "options of a capped collection"
expect_eq "$(stat -c %s "$C/.options")" "$(cat "$C/.options" | wc -c)" "st_size of .options"
[ ! -e "$MNT/logs/plain/.options" ] || fail "a plain collection has a .options file (it has no options)"
ls -A "$MNT/logs/plain" | grep -qx .options && fail "a plain collection lists .options"
ls -a "$C" | grep -qx .options || fail "no .options in the listing"
mkdir "$MNT/logs/ring"
echo '{capped: true, size: 5000, max: 2}' > "$MNT/logs/ring/.options"
expect_eq "$(jq -c . "$MNT/logs/ring/.options")" '{"capped":true,"size":5120,"max":2}' "capped at creation (size rounded up)"
printf '{"_id": %d}\n' 1 2 3 > "$MNT/logs/ring/.insert"
expect_eq "$(ls "$MNT/logs/ring" | grep -c '\.json$')" "2" "max 2 holds"
cp "$MNT/logs/ring/.options" "$T/opts" && cp "$T/opts" "$MNT/logs/ring/.options" || fail "writing the same options back"
bad() {
	if /usr/bin/printf '%s' "$2" > "$1" 2>/dev/null; then
		fail "writing '$2' to $1 succeeded"
	fi
	tail -n1 "$MNT/.docfs/errors" | grep -q "$3" || fail "no error naming '$3': $(tail -n1 "$MNT/.docfs/errors")"
}
bad "$MNT/logs/plain/.options" '{capped: true}' "'size' field is required"
bad "$MNT/logs/plain/.options" '{capped: true, size: 4096, colour: 1}' "unknown collection option 'colour'"
bad "$MNT/logs/ring/.options" '{}' "cannot be uncapped"
bad "$MNT/logs/ring/.options" '{capped: true, size: 99999}' "cannot change"
printf '{"_id": 1}\n' > "$MNT/logs/plain/.insert"
bad "$MNT/logs/plain/.options" '{capped: true, size: 4096}' "docfs capped"
[ ! -e "$MNT/logs/plain/.options" ] || fail "refused writes made a .options file"
# rm .options of a capped collection (what tar x does before it writes the file again)
# hides the file and keeps the cap; writing the options back shows it again
opts=$(cat "$C/.options")
rm "$C/.options" || fail "rm .options of a capped collection"
[ ! -e "$C/.options" ] || fail ".options still there after rm"
ls -A "$C" | grep -qx '\.options' && fail ".options still listed after rm"
n0=$(ls "$C" | grep -c '\.json$')
for i in $(seq 1 $((n0 + 3))); do echo "{\"_id\": \"rm$i\"}" > "$C/rm$i.json"; done
expect_eq "$(ls "$C" | grep -c '\.json$')" "$n0" "the collection stays capped after rm .options"
printf '%s' "$opts" > "$C/.options" || fail "writing the same options back"
expect_eq "$(cat "$C/.options")" "$opts" "the options written back"

unmount_docfs
"$DOCFS" check "$STORE" > /dev/null || fail "docfs check after capped writes"
echo ok
