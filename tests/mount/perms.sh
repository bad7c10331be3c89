#!/usr/bin/env bash
# perms.sh - what a caller may not read through a document's file reaches it no other way:
# finds, counts, distinct, explain's figures, aggregate, update/ and delete/, the plain and
# streamed .changes (updateLookup too), tailable reads and /.snapshots each see only the
# documents whose file the caller could read (owner, group and other bits, as the kernel
# applies them with default_permissions; root sees all). Each path is proved with a second
# user (nobody) and a third (daemon, in a group that may read a 640 document).
. "$(dirname "$0")/lib.sh"
"$DOCFS" capped "$STORE" db.logs 65536 > /dev/null || fail "docfs capped failed"
mount_docfs allow_other
chmod 755 "$T" # mktemp -d made it 0700: let the other users reach the mount point

C=$MNT/db/c
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
# daemon (uid 1) with group 4242 among its supplementary groups
MEMBER=(setpriv --reuid=1 --regid=1 --groups=4242)
as_nobody() { "${NOBODY[@]}" "$@"; }
ids() { jq -r '._id' | sort | tr '\n' ' '; }

step "set up: a secret (600), a group document (640, group 4242), public ones (644)"
mkdir -p "$C"
chmod 777 "$C"
echo '{"card": "4111-1111", "n": 1}' > "$C/secret.json"
chmod 600 "$C/secret.json"
echo '{"card": "6011-0000", "n": 2}' > "$C/group.json"
chgrp 4242 "$C/group.json"
chmod 640 "$C/group.json"
echo '{"card": "5555-0000", "n": 3}' > "$C/pub.json"
echo '{"card": "3782-0000", "n": 4}' > "$C/pub2.json"
as_nobody sh -c 'echo "{\"card\": \"9999-mine\", \"n\": 5}" > "$1"' sh "$C/mine.json" ||
	fail "nobody cannot create a document"
as_nobody chmod 600 "$C/mine.json"
echo '{"key": {"card": 1}}' > "$C/.indexes/card_1"
expect_fail "nobody reads secret.json" as_nobody cat "$C/secret.json"
as_nobody cat "$C/mine.json" > /dev/null || fail "nobody cannot read its own 600 document"

step "query/: only the readable documents, for each caller"
expect_eq "$(cat "$C/query/{}" | ids)" "group mine pub pub2 secret " "root sees all"
expect_eq "$(as_nobody cat "$C/query/{}" | ids)" "mine pub pub2 " "nobody's find"
expect_eq "$("${MEMBER[@]}" cat "$C/query/{}" | ids)" "group pub pub2 " "a member of group 4242"
expect_eq "$(as_nobody cat "$C/query/{card: '4111-1111'}" | wc -c)" "0" "nobody's guess by value"
expect_eq "$(as_nobody cat "$C/query/{card: {\$gte: '4'}}?hint={card: 1}" | ids)" "mine pub " \
	"nobody through the index"
expect_eq "$(as_nobody cat "$C/query/{}?sort={n: -1}&format=ids" | tr '\n' ' ')" "mine.json pub2.json pub.json " \
	"nobody sorted, ids format"

step "counts and distinct"
expect_eq "$(as_nobody cat "$C/query/{card: '4111-1111'}?count=1")" "0" "nobody's count of the secret"
expect_eq "$(cat "$C/query/{card: '4111-1111'}?count=1")" "1" "root's count of the secret"
expect_eq "$(as_nobody cat "$C/query/{}?count=1")" "3" "nobody's count of all (fast count)"
expect_eq "$("${MEMBER[@]}" cat "$C/query/{}?count=1")" "3" "the member's count of all"
expect_eq "$(as_nobody cat "$C/query/{}?distinct=card" | jq -sc 'sort')" '["3782-0000","5555-0000","9999-mine"]' \
	"nobody's distinct"

step "explain/: the figures of a guess say nothing"
for plan in "" "?hint={card: 1}" "?hint={\$natural: 1}"; do
	x=$(as_nobody cat "$C/explain/{card: '4111-1111'}${plan:-?}&verbosity=executionStats")
	expect_eq "$(jq -c '.executionStats | [.nReturned, .totalKeysExamined, .totalDocsExamined]' <<< "$x")" \
		"$(as_nobody cat "$C/explain/{card: 'no-such-card'}${plan:-?}&verbosity=executionStats" |
			jq -c '.executionStats | [.nReturned, .totalKeysExamined, .totalDocsExamined]')" \
		"nobody's explain ($plan) of the secret's value against an absent one"
done
x=$(cat "$C/explain/{card: '4111-1111'}?verbosity=executionStats")
expect_eq "$(jq -c .executionStats.nReturned <<< "$x")" "1" "root's explain finds it"

step "aggregate/"
expect_eq "$(as_nobody cat "$C/aggregate/[{\$group: {_id: null, n: {\$sum: 1}, cards: {\$push: '\$card'}}}]" | jq -c '[.n, (.cards | sort)]')" \
	'[3,["3782-0000","5555-0000","9999-mine"]]' "nobody's \$group"
expect_eq "$(as_nobody cat "$C/aggregate/[{\$lookup: {from: 'c', pipeline: [{\$match: {n: 1}}], as: 'x'}}, {\$limit: 1}]" | jq -c '.x')" \
	'[]' "nobody's \$lookup"
expect_eq "$(cat "$C/aggregate/[{\$count: 'n'}]" | jq -c .n)" "5" "root's \$count"

step "\$out and \$merge write as their caller would through files"
mkdir "$MNT/db/locked" "$MNT/db/open"
chmod 777 "$MNT/db/open"
echo '{"n": 9}' > "$MNT/db/locked/keep.json"
m=$(errors_mark)
expect_fail "nobody's \$out into a new collection" as_nobody cat "$C/aggregate/[{\$out: 'newcoll'}]"
[ -e "$MNT/db/newcoll" ] && fail "nobody's refused \$out created newcoll"
errors_since "$MNT/.docfs/errors" "$m" | grep -q "uid 65534 may not create collection 'newcoll'" ||
	fail "no message for the refused \$out: $(errors_since "$MNT/.docfs/errors" "$m")"
expect_fail "nobody's \$out into root's 755 collection" as_nobody cat "$C/aggregate/[{\$out: 'locked'}]"
expect_eq "$(ls "$MNT/db/locked" | grep json | tr '\n' ' ')" "keep.json " "the refused \$out left the target as it was"
errors_since "$MNT/.docfs/errors" "$m" | grep -q "collection 'locked' is not writable by uid 65534" ||
	fail "no message for the refused \$out into locked"
as_nobody cat "$C/aggregate/[{\$out: 'open'}]" > /dev/null || fail "nobody's \$out into a 777 collection"
expect_eq "$(ls "$MNT/db/open" | grep json | tr '\n' ' ')" "mine.json pub.json pub2.json " "what nobody's \$out wrote: what nobody reads"
expect_eq "$(stat -c '%u %a' "$MNT/db/open/pub.json")" "65534 644" "its documents are nobody's"
m=$(errors_mark)
expect_fail "nobody's \$merge replacing root's 644 document" \
	as_nobody cat "$C/aggregate/[{\$match: {n: 3}}, {\$set: {x: 1}}, {\$merge: {into: 'c', whenMatched: 'replace'}}]"
expect_eq "$(jq -c .x "$C/pub.json")" "null" "pub.json unchanged"
errors_since "$MNT/.docfs/errors" "$m" | grep -q "uid 65534 may not rewrite pub.json" ||
	fail "no message for the refused \$merge"
as_nobody cat "$C/aggregate/[{\$match: {n: 5}}, {\$set: {x: 1}}, {\$merge: {into: 'c', whenMatched: 'merge'}}]" > /dev/null ||
	fail "nobody's \$merge into its own document"
expect_eq "$(as_nobody jq -c .x "$C/mine.json")" "1" "nobody's \$merge changed its own document"
expect_eq "$(stat -c '%u %a' "$C/mine.json")" "65534 600" "and kept its owner and mode"

step ".changes: hidden events keep their place as blanks, streams skip them"
root_plain=$(cat "$C/.changes")
nb_plain=$(as_nobody cat "$C/.changes")
expect_eq "${#nb_plain}" "${#root_plain}" "the plain file has the same size for both"
case $nb_plain in *4111* | *6011*) fail "nobody's .changes shows a secret: $nb_plain" ;; esac
expect_eq "$(jq -r 'select(.operationType == "insert") | .documentKey._id' <<< "$nb_plain" | sort | tr '\n' ' ')" \
	"mine pub pub2 " "the inserts nobody sees"
as_nobody cat "$MNT/db/.changes" | grep -q 4111 && fail "the database's .changes shows the secret"
nb_stream=$(as_nobody cat "$C/.changes?fullDocument=updateLookup")
case $nb_stream in *4111* | *6011*) fail "nobody's stream shows a secret: $nb_stream" ;; esac
expect_eq "$(jq -r 'select(.operationType == "insert") | .documentKey._id' <<< "$nb_stream" | sort | tr '\n' ' ')" "mine pub pub2 " "the inserts in nobody's stream"
# made private after its events were written: they are hidden too
chmod 600 "$C/pub2.json"
case $(as_nobody cat "$C/.changes") in *3782*) fail "pub2's events still shown after chmod 600" ;; esac
expect_eq "$(as_nobody cat "$C/query/{}" | ids)" "mine pub " "nobody's find after chmod 600 pub2"
chmod 644 "$C/pub2.json"
# updateLookup reads the document as it is now
echo '{"$set": {"n": 30}}' > "$C/update/{_id: 'pub'}"
chmod 600 "$C/pub.json"
case $(as_nobody cat "$C/.changes?fullDocument=updateLookup") in
*5555*) fail "updateLookup shows pub, private now" ;;
esac
chmod 644 "$C/pub.json"

step "update/ and delete/ change only documents the caller may write"
# nobody's collection: it may create write paths there; root's 644 document stays root's
mkdir "$MNT/db/n"
chown 65534:65534 "$MNT/db/n"
echo '{"owner": "root"}' > "$MNT/db/n/r.json"
as_nobody sh -c 'echo "{\"owner\": \"nobody\"}" > "$1"' sh "$MNT/db/n/o.json"
as_nobody sh -c 'echo "{\$set: {touched: 1}}" > "$1"' sh "$MNT/db/n/update/{}?multi=true" ||
	fail "nobody's update/ failed"
expect_eq "$(jq -c .touched "$MNT/db/n/o.json")" "1" "nobody's own document updated"
expect_eq "$(jq -c .touched "$MNT/db/n/r.json")" "null" "root's 644 document left alone"
as_nobody sh -c 'echo "{}" > "$1"' sh "$MNT/db/n/delete/{}" || fail "nobody's delete/ failed"
[ -e "$MNT/db/n/r.json" ] || fail "nobody's delete/ removed root's document"
[ ! -e "$MNT/db/n/o.json" ] || fail "nobody's delete/ left its own document"

step "tailable reads of a capped collection"
L=$MNT/db/logs
printf '{"_id": %d, "lvl": "x"}\n' 1 2 > "$L/.insert"
chmod 600 "$L/1.json"
expect_eq "$(as_nobody timeout 10 cat "$L/query/{}?tailable=1&limit=1" | jq -c ._id)" "2" \
	"nobody's tailable read skips the 600 document"

step "snapshots keep each document's mode and owner; /.snapshots enforces them"
"$DOCFS" snapshot "$STORE" db -m "perms" --tag p1 > "$T/out" || fail "snapshot: $(cat "$T/out")"
S=$MNT/.snapshots/p1/db/c
expect_eq "$(stat -c '%a %u %g' "$S/secret.json")" "400 0 0" "the secret in the snapshot (write bits dropped)"
expect_eq "$(stat -c '%a %g' "$S/group.json")" "440 4242" "the group document in the snapshot"
expect_eq "$(stat -c '%a %u' "$S/mine.json")" "400 65534" "nobody's document in the snapshot"
expect_eq "$(jq -c .card "$S/secret.json")" '"4111-1111"' "root reads the snapshot"
expect_fail "nobody reads the secret in a snapshot" as_nobody cat "$S/secret.json"
as_nobody cat "$S/pub.json" > /dev/null || fail "nobody cannot read a 644 document in a snapshot"
as_nobody cat "$S/mine.json" > /dev/null || fail "nobody cannot read its own document in a snapshot"
"${MEMBER[@]}" cat "$S/group.json" > /dev/null || fail "the member cannot read group.json in a snapshot"
as_nobody grep -rq 4111 "$MNT/.snapshots/p1/" 2> /dev/null && fail "nobody's grep -r finds the secret in a snapshot"
# the next snapshot is patched from the change feed: a chmod since is in it
chmod 600 "$C/pub.json"
chmod 644 "$C/secret.json"
"$DOCFS" snapshot "$STORE" db -m "perms 2" --tag p2 > "$T/out" || fail "snapshot 2: $(cat "$T/out")"
expect_eq "$(stat -c '%a' "$MNT/.snapshots/p2/db/c/pub.json" "$MNT/.snapshots/p2/db/c/secret.json" | tr '\n' ' ')" \
	"400 444 " "modes after chmod, in the incremental snapshot"
expect_eq "$(stat -c '%a' "$S/pub.json")" "444" "the first snapshot keeps its modes"
chmod 600 "$C/secret.json"
chmod 644 "$C/pub.json"
# restore brings the modes and owners back
unmount_docfs
"$DOCFS" restore "$STORE" p1 db.c --into db.back > "$T/out" 2>&1 || fail "restore: $(cat "$T/out")"
mount_docfs allow_other
expect_eq "$(stat -c '%a %u:%g' "$MNT/db/back/secret.json" "$MNT/db/back/group.json" "$MNT/db/back/mine.json" | tr '\n' ' ')" \
	"600 0:0 640 0:4242 600 65534:65534 " "modes and owners restored"
expect_eq "$(as_nobody cat "$MNT/db/back/query/{}" | ids)" "mine pub pub2 " "nobody's find in the restored collection"

step "docfs check is clean"
unmount_docfs
"$DOCFS" check "$STORE" > /dev/null || fail "docfs check after the test"
