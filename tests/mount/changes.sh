#!/usr/bin/env bash
# changes.sh - change streams through the mount and the CLI: the events every kind of write
# makes (a document file, sed -i, update/, delete/, rm, mv to another _id, an index, a
# collection renamed and dropped) as jq reads them from <db>/<coll>/.changes, <db>/.changes
# and /.changes; resume tokens (resumeAfter, startAfter past an invalidate, lost history),
# the options (filter, pipeline, fullDocument=updateLookup, startAtOperationTime) and their
# refusals; `tail -f` and `.changes?follow=1` with concurrent writers, every event seen once
# and in order; the history across a restart of the daemon; `docfs watch`.
. "$(dirname "$0")/lib.sh"
mount_docfs
mkdir -p "$MNT/shop/items"
C=$MNT/shop/items
ops() { jq -r .operationType "$@" | tr '\n' ' '; }

step "each write makes its event"
echo '{"_id": 1, "name": "pen", "qty": 5, "tags": ["a", "b"]}' > "$C/1.json"
echo '{"name": "ink", "qty": 1}' > "$C/2.json"
sed -i 's/"ink"/"blue ink"/' "$C/2.json"
echo '{$set: {qty: 7, "dims.w": 3}, $pop: {tags: 1}}' > "$C/update/{_id: 1}"
echo '{"name": "cap"}' > "$C/.insert"
rm "$C/2.json"
expect_eq "$(ops "$C/.changes")" "insert insert replace update insert delete " "the collection's events"
expect_eq "$(sed -n 4p "$C/.changes" | jq -c .updateDescription)" \
	'{"updatedFields":{"qty":7,"dims":{"w":3}},"removedFields":[],"truncatedArrays":[{"field":"tags","newSize":1}]}' \
	"updateDescription"
expect_eq "$(sed -n 1p "$C/.changes" | jq -c '[.ns, .documentKey, .fullDocument.name]')" \
	'[{"db":"shop","coll":"items"},{"_id":1},"pen"]' "insert event fields"
expect_eq "$(sed -n 6p "$C/.changes" | jq -c '[.documentKey, has("fullDocument")]')" '[{"_id":2},false]' \
	"a delete has no fullDocument"
jq -e '._id._data and .clusterTime["$timestamp"].t and .wallTime["$date"]' "$C/.changes" > /dev/null ||
	fail "every event has _id._data, clusterTime and wallTime"
tokens=$(jq -r ._id._data "$C/.changes")
expect_eq "$(printf '%s\n' "$tokens" | LC_ALL=C sort | tr '\n' ' ')" "$(printf '%s\n' "$tokens" | tr '\n' ' ')" \
	"tokens sort in event order"
expect_eq "$(stat -c %s "$C/.changes")" "$(cat "$C/.changes" | wc -c)" "st_size is the bytes cat reads"
expect_eq "$(tail -n 1 "$C/.changes" | jq -r .operationType)" "delete" "tail -n reads from the end"
expect_fail "writing .changes" sh -c "echo x > '$C/.changes'"

step "options: filter, pipeline, updateLookup, resumeAfter, startAtOperationTime"
expect_eq "$(ops "$C/.changes?filter={operationType: 'insert'}")" "insert insert insert " "filter"
expect_eq "$(ops "$C/.changes?pipeline=[{\$match: {'fullDocument.name': 'cap'}}]")" "insert " "pipeline \$match"
expect_eq "$(cat "$C/.changes?filter={operationType: 'update'}&fullDocument=updateLookup" | jq -c .fullDocument)" \
	'{"_id":1,"name":"pen","qty":7,"tags":["a"],"dims":{"w":3}}' "updateLookup: the document now"
t3=$(sed -n 3p "$C/.changes" | jq -r ._id._data)
expect_eq "$(ops "$C/.changes?resumeAfter=$t3")" "update insert delete " "resumeAfter a token"
expect_eq "$(ops "$C/.changes?resumeAfter={\"_data\": \"$t3\"}")" "update insert delete " "resumeAfter {_data}"
ts4=$(sed -n 4p "$C/.changes" | jq -r '.clusterTime["$timestamp"] | "\(.t).\(.i)"')
expect_eq "$(ops "$C/.changes?startAtOperationTime=$ts4")" "update insert delete " "startAtOperationTime"
expect_fail "an unknown option" cat "$C/.changes?bogus=1"
tail -n1 "$MNT/.docfs/errors" | grep -q "unknown change stream option 'bogus'" || fail "no clear error for bogus"
expect_fail "a bad token" cat "$C/.changes?resumeAfter=82ZZ"
tail -n1 "$MNT/.docfs/errors" | grep -q "FailedToParse" || fail "no clear error for a bad token"
expect_fail "two start points" cat "$C/.changes?resumeAfter=$t3&startAtOperationTime=1"
expect_fail "post-images are not recorded" cat "$C/.changes?fullDocument=required"
tail -n1 "$MNT/.docfs/errors" | grep -q "post-images" || fail "no clear error for fullDocument=required"

step "the database's stream, the mount's, indexes, rename and drop with invalidate"
echo '{"key": {"qty": 1}}' > "$C/.indexes/qty_1"
mkdir "$MNT/shop/other" && echo '{}' > "$MNT/shop/other/9.json"
old=$(tail -n1 "$C/.changes" | jq -r ._id._data)
mv "$C" "$MNT/shop/things"
rmdir "$MNT/shop/other" 2>/dev/null || { rm -f "$MNT/shop/other/"*.json; rmdir "$MNT/shop/other"; }
expect_eq "$(ops "$MNT/shop/.changes" | awk '{print $(NF-4), $(NF-3), $(NF-2), $(NF-1), $NF}')" \
	"createIndexes insert rename delete drop" "the database's last events"
expect_eq "$(grep -c invalidate "$MNT/shop/.changes")" "0" "no invalidate in a database's stream"
expect_eq "$(jq -c 'select(.operationType == "rename") | .to' "$MNT/shop/.changes")" '{"db":"shop","coll":"things"}' "rename names its target"
expect_eq "$(ops "$MNT/shop/.changes?resumeAfter=$old")" "insert rename delete drop " "resume in the database's stream"
# Not listed, so that grep -r, cp -r and rsync do not read copies of documents; there by name.
for d in "$MNT" "$MNT/shop" "$MNT/shop/things"; do
	if ls -a "$d" | grep -q changes; then fail "$d lists .changes"; fi
	[ -f "$d/.changes" ] || fail "$d/.changes is not a file"
done
expect_eq "$(grep -rl '"name": "pen"' "$MNT/shop" | sed "s|$MNT/||")" "shop/things/1.json" "grep -r finds the document, not its events"
expect_fail "mkdir .changes in a database" mkdir "$MNT/shop/.changes"
expect_eq "$(cat "$MNT/.changes" | wc -l)" "$(cat "$MNT/shop/.changes" | wc -l)" "one database: the mount's stream is its stream"
mkdir -p "$MNT/shop/items"
echo '{"_id": 50}' > "$MNT/shop/items/50.json"
# the old collection's stream (same name) shows its history, then rename, invalidate, and on
expect_eq "$(ops "$MNT/shop/items/.changes" | awk '{print $(NF-2), $(NF-1), $NF}')" "rename invalidate insert" \
	"a collection's stream: invalidate after the rename"
inval=$(jq -r 'select(.operationType == "invalidate") | ._id._data' "$MNT/shop/items/.changes")
expect_fail "resumeAfter an invalidate" cat "$MNT/shop/items/.changes?resumeAfter=$inval"
expect_eq "$(ops "$MNT/shop/items/.changes?startAfter=$inval")" "insert " "startAfter passes the invalidate"
expect_eq "$(ops "$MNT/shop/items/.changes?resumeAfter=$old")" "rename invalidate " \
	"a resumed collection stream ends at its invalidate"

step "tail -f and follow=1 see concurrent writers' events once, in order"
F=$MNT/shop/feed
mkdir "$F"
tail -n0 -f "$F/.changes" > "$T/tail.out" &
tailpid=$!
timeout 30 cat "$F/.changes?follow=1" > "$T/follow.out" &
catpid=$!
sleep 1.5
writers=()
for w in 1 2 3 4; do
	(for i in $(seq 1 25); do echo "{\"_id\": \"w$w-$i\"}" > "$F/w$w-$i.json"; done) &
	writers+=($!)
done
wait_n() { # file n: waits up to 20 s for n lines
	for _ in $(seq 1 200); do
		[ "$(wc -l < "$1")" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}
wait_n "$T/tail.out" 100 || fail "tail -f saw $(wc -l < "$T/tail.out") of 100 events"
wait_n "$T/follow.out" 100 || fail "follow=1 saw $(wc -l < "$T/follow.out") of 100 events"
wait "${writers[@]}"
kill "$tailpid" "$catpid" 2>/dev/null || true
wait "$tailpid" "$catpid" 2>/dev/null || true
for f in tail follow; do
	expect_eq "$(jq -r .documentKey._id "$T/$f.out" | sort -u | wc -l)" "100" "$f: 100 distinct documents"
	expect_eq "$(jq -r ._id._data "$T/$f.out" | LC_ALL=C sort -c && echo sorted)" "sorted" "$f: in token order"
done
cmp -s "$T/tail.out" "$T/follow.out" || fail "tail -f and follow=1 differ"
expect_eq "$(diff <(jq -c . "$F/.changes") <(jq -c . "$T/tail.out") && echo same)" "same" "the file holds what tail saw"

step "history survives a restart; docfs watch; lost history"
before=$(md5sum < "$MNT/shop/.changes")
unmount_docfs
expect_eq "$("$DOCFS" watch "$STORE" shop.feed | wc -l)" "100" "docfs watch of a collection"
expect_eq "$("$DOCFS" watch "$STORE" shop "filter={operationType: 'drop'}" | jq -r .ns.coll)" "other" "docfs watch with a filter"
"$DOCFS" watch "$STORE" > "$T/all" || fail "docfs watch of everything"
first=$(head -n1 "$T/all" | jq -r ._id._data)
mount_docfs
expect_eq "$(md5sum < "$MNT/shop/.changes")" "$before" "the same events after a restart"
size=$(stat -c %s "$MNT/shop/.changes")
unmount_docfs
"$DOCFS" changes-keep "$STORE" shop 4096 || fail "changes-keep"
if "$DOCFS" watch "$STORE" shop "resumeAfter=$first" > /dev/null 2> "$T/err"; then
	fail "resuming from trimmed history succeeded"
fi
grep -q "ChangeStreamHistoryLost" "$T/err" || fail "no ChangeStreamHistoryLost: $(cat "$T/err")"
# a time at or before the oldest event kept (1: the start of history) may skip trimmed
# events: refused the same way (a replica set member's initial sync relies on it)
if "$DOCFS" watch "$STORE" shop "startAtOperationTime=1" > /dev/null 2> "$T/err"; then
	fail "startAtOperationTime before trimmed history succeeded"
fi
grep -q "ChangeStreamHistoryLost" "$T/err" || fail "no ChangeStreamHistoryLost for a time: $(cat "$T/err")"
expect_fail "changes-keep below 4096" "$DOCFS" changes-keep "$STORE" shop 100
mount_docfs
expect_fail "resumeAfter a trimmed token" cat "$MNT/shop/.changes?resumeAfter=$first"
tail -n1 "$MNT/.docfs/errors" | grep -q "ChangeStreamHistoryLost, code 286" || fail "no history-lost message"
expect_eq "$(stat -c %s "$MNT/shop/.changes")" "$size" "trimming does not shrink the file"
expect_eq "$(head -c 1 "$MNT/shop/.changes" | od -An -c | tr -d ' ')" "" "trimmed bytes read as blanks"
expect_eq "$(jq -r .operationType "$MNT/shop/.changes" | sort -u | tr '\n' ' ')" "insert " "what is kept still parses"
echo '{"_id": 1}' > "$F/1.json"
expect_eq "$(stat -c %s "$MNT/shop/.changes")" "$(( size + $(tail -n1 "$MNT/shop/.changes" | wc -c) ))" "and grows by the next event"
echo "changes.sh: ok"
