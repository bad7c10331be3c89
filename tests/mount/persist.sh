#!/usr/bin/env bash
# persist.sh - what is written through the mount survives an unmount and a remount exactly:
# the same names, inode numbers, mtimes, sizes and bytes for databases, collections,
# documents of many BSON types (int32/int64/double/decimal128, dates, binary, ObjectId,
# regex, timestamps, MinKey/MaxKey, nested documents and arrays), scratch files and symlinks.
# Also: reading a document and writing the same bytes back changes nothing (type-exactness,
# checked on the text and on the stored BSON), rsync -a out of the mount and back in
# converges (a second run copies nothing, across a remount too), and `docfs check` passes.
. "$(dirname "$0")/lib.sh"
# A command that fails outside a check stops the test with its line and the daemon log.
trap 'fail "line $LINENO: \"$BASH_COMMAND\" exited $?"' ERR
mount_docfs

# manifest DIR... : one line per entry (name inode mtime size), then the sha256 of every
# regular file's bytes and the target of every symlink, sorted. The virtual entries of a
# collection (.insert, query/, .changes, ...) are left out: they are not stored.
manifest() {
	find "$@" \( -name .insert -o -name .bulk -o -name .changes -o -name .stats \
		-o -name .options -o -name .indexes -o -name .queries -o -name query \
		-o -name explain -o -name aggregate -o -name update -o -name delete \) -prune \
		-o -exec stat -c '%n %i %Y %s %a %y' {} + | sort
	find "$@" \( -name .insert -o -name .bulk -o -name .changes -o -name .stats \
		-o -name .options -o -name .indexes -o -name .queries -o -name query \
		-o -name explain -o -name aggregate -o -name update -o -name delete \) -prune \
		-o -type f -exec sha256sum {} + | sort -k2
	find "$@" -type l -printf '%p -> %l\n' | sort
}

# stored_bson DB : the hex of every document's stored BSON and its recorded size, by row.
stored_bson() {
	sqlite3 "$STORE/$1.db" "SELECT id, size, hex(bson) FROM docs ORDER BY id" | sha256sum
}

step "databases and collections"
mkdir "$MNT/db" "$MNT/db2"
mkdir "$MNT/db/types" "$MNT/db/other" "$MNT/db2/c"
expect_eq "$(ls "$MNT" | grep -v '^\.' | tr '\n' ' ')" "db db2 " "ls /"
expect_eq "$(ls "$MNT/db" | tr '\n' ' ')" "other types " "ls /db"

step "documents of many BSON types"
C=$MNT/db/types
printf '%s\n' '{"i32": 5, "i64": {"$numberLong": "5"}, "big": {"$numberLong": "9223372036854775807"}, "neg": -2147483648}' > "$C/ints.json"
printf '%s\n' '{"d": 1.0, "half": 0.5, "tiny": 1e-300, "huge": 1.7976931348623157e308, "negz": {"$numberDouble": "-0.0"}, "nan": {"$numberDouble": "NaN"}, "inf": {"$numberDouble": "-Infinity"}}' > "$C/doubles.json"
printf '%s\n' '{"dec": {"$numberDecimal": "1.10"}, "dec2": {"$numberDecimal": "-0.000"}, "dec3": {"$numberDecimal": "-1.5E-10"}}' > "$C/decimals.json"
printf '%s\n' '{"d1": {"$date": "2020-01-01T00:00:00Z"}, "d2": {"$date": "2014-07-24T12:34:56.789Z"}, "pre": {"$date": {"$numberLong": "-1000"}}, "far": {"$date": {"$numberLong": "253402300800000"}}}' > "$C/dates.json"
printf '%s\n' '{"bin": {"$binary": {"base64": "AAECAwQ=", "subType": "00"}}, "uuid": {"$binary": {"base64": "c3RyaW5ndXVpZDEyMzQ1Ng==", "subType": "04"}}, "empty": {"$binary": {"base64": "", "subType": "80"}}}' > "$C/binary.json"
printf '%s\n' '{"oid": {"$oid": "5f0c7b9e8d1c2a3b4c5d6e7f"}, "re": {"$regularExpression": {"pattern": "^a.*b$", "options": "im"}}, "ts": {"$timestamp": {"t": 1600000000, "i": 7}}, "min": {"$minKey": 1}, "max": {"$maxKey": 1}, "n": null, "t": true, "f": false}' > "$C/misc.json"
printf '%s\n' '{"s": "h\u00e9llo \"q\" \\ \t tab \u4e2d\u6587 \ud83d\ude00", "nested": {"a": {"b": {"c": [1, {"$numberLong": "2"}, 3.5, [], {}, [[{"x": {"$date": "2001-02-03T04:05:06Z"}}]]]}}}, "arr": [null, true, "x", {"$numberDecimal": "7"}]}' > "$C/nested.json"
printf '%s\n' '{"_id": {"$oid": "65a1b2c3d4e5f60718293a4b"}, "k": 1}' > "$C/65a1b2c3d4e5f60718293a4b.json"
printf '%s\n' '{"_id": 42, "k": 2}' > "$C/42.json"
printf '%s\n' '{"x": 1}' > "$MNT/db/other/one.json"
printf '%s\n' '{"y": [1, 2, 3]}' > "$MNT/db2/c/two.json"
for f in ints doubles decimals dates binary misc nested 65a1b2c3d4e5f60718293a4b 42; do
	[ -f "$C/$f.json" ] || fail "$f.json missing after write"
	expect_eq "$(stat -c %s "$C/$f.json")" "$(wc -c < "$C/$f.json")" "st_size of $f.json"
done
grep -q '"i64": {"$numberLong": "5"}' "$C/ints.json" || fail "int64 rendered untyped: $(cat "$C/ints.json")"
grep -q '"i32": 5,' "$C/ints.json" || fail "int32 not plain: $(cat "$C/ints.json")"
grep -q '"d": 1.0,' "$C/doubles.json" || fail "double 1.0 lost its type: $(cat "$C/doubles.json")"
grep -q '"dec": {"$numberDecimal": "1.10"}' "$C/decimals.json" ||
	fail "decimal 1.10 changed: $(cat "$C/decimals.json")"
grep -q '"_id": {"$oid": "65a1b2c3d4e5f60718293a4b"}' "$C/65a1b2c3d4e5f60718293a4b.json" ||
	fail "ObjectId _id: $(cat "$C/65a1b2c3d4e5f60718293a4b.json")"
grep -q '"_id": 42,' "$C/42.json" || fail "integer _id: $(cat "$C/42.json")"

step "scratch files and symlinks"
printf 'just some bytes\n\0binary\xff\n' > "$C/notes.txt"
printf 'backup\n' > "$C/ints.json~"
head -c 100000 /dev/urandom > "$C/blob.bin"
ln -s ints.json "$C/link-to-ints" || fail "symlink in a collection"
ln -s 'user@host.1234:1700000000' "$C/.#ints.json" || fail "emacs lock symlink .#ints.json"
expect_eq "$(readlink "$C/link-to-ints")" "ints.json" "readlink"
expect_eq "$(stat -c %s "$C/blob.bin")" "100000" "scratch size"
cmp -s <(printf 'just some bytes\n\0binary\xff\n') "$C/notes.txt" || fail "scratch bytes differ"

step "reading a document and writing the same bytes back changes nothing"
printf '%s\n' '{"a": {"$numberLong": "5"}, "b": 1.0, "c": 5}' > "$C/t.json"
before=$(cat "$C/t.json")
grep -q '"a": {"$numberLong": "5"}' <<< "$before" || fail "t.json a: $before"
grep -q '"b": 1.0,' <<< "$before" || fail "t.json b: $before"
grep -q '"c": 5$' <<< "$before" || fail "t.json c: $before"
bson_before=$(stored_bson db)
for f in "$C"/*.json; do
	sum=$(sha256sum < "$f")
	size=$(stat -c %s "$f")
	cp "$f" "$T/rt"
	cat "$T/rt" > "$f" || fail "writing $f back"
	expect_eq "$(sha256sum < "$f")" "$sum" "sha256 of $f after writing it back"
	expect_eq "$(stat -c %s "$f")" "$size" "size of $f after writing it back"
done
expect_eq "$(stored_bson db)" "$bson_before" "stored BSON after writing every document back"
expect_eq "$(cat "$C/t.json")" "$before" "t.json after writing it back"

# rsync -a of a collection, without the virtual entries (they are not stored).
RSYNC_EXCL=()
for v in .insert .bulk .changes .stats .options .indexes .queries query explain aggregate \
	update delete; do
	RSYNC_EXCL+=("--exclude=$v")
done
step "rsync -a copies a collection out"
rsync -a "${RSYNC_EXCL[@]}" "$C/" "$T/copy/" || fail "rsync -a out of the mount"
expect_eq "$(rsync -a --itemize-changes "${RSYNC_EXCL[@]}" "$C/" "$T/copy/")" "" \
	"what a second rsync -a out copies"

step "record the manifest, unmount, remount"
manifest "$MNT/db" "$MNT/db2" > "$T/before"
expect_eq "$(grep -c '^[0-9a-f]\{64\}  .*\.json$' "$T/before")" "12" "documents in the manifest"
db_bson=$(stored_bson db)
sleep 1 # a remount that rewrote mtimes as "now" would show in the seconds
unmount_docfs
mountpoint -q "$MNT" && fail "still mounted after unmount"
"$DOCFS" check "$STORE" > /dev/null || fail "docfs check (unmounted)"
mount_docfs

step "names, inodes, mtimes, sizes and bytes are identical after the remount"
manifest "$MNT/db" "$MNT/db2" > "$T/after"
if ! diff "$T/before" "$T/after" > "$T/diff"; then
	cat "$T/diff" >&2
	fail "manifest changed across the remount"
fi
expect_eq "$(stored_bson db)" "$db_bson" "stored BSON across the remount"
expect_eq "$(cat "$C/t.json")" "$before" "t.json after the remount"
expect_eq "$(readlink "$C/.#ints.json")" "user@host.1234:1700000000" "lock symlink after remount"

step "rsync -a after the remount: nothing to copy out; a changed file goes back in and stays"
expect_eq "$(rsync -a --itemize-changes "${RSYNC_EXCL[@]}" "$C/" "$T/copy/")" "" \
	"what rsync -a out copies after the remount (sizes and mtimes kept)"
ino=$(stat -c %i "$C/ints.json")
sed -i 's/"i32": 5,/"i32": 6,/' "$T/copy/ints.json"
touch -d '2021-02-03 04:05:06' "$T/copy/ints.json"
# rsync writes a temporary scratch file, sets its mtime and renames it over the document.
rsync -a "${RSYNC_EXCL[@]}" "$T/copy/" "$C/" || fail "rsync -a into the mount"
cmp -s "$C/ints.json" "$T/copy/ints.json" || fail "ints.json after rsync: $(cat "$C/ints.json")"
expect_eq "$(stat -c %i "$C/ints.json")" "$ino" "inode of ints.json after rsync replaced it"
expect_eq "$(stat -c %Y "$C/ints.json")" "$(stat -c %Y "$T/copy/ints.json")" \
	"mtime of ints.json after rsync (that of the file renamed over it)"
expect_eq "$(rsync -a --itemize-changes "${RSYNC_EXCL[@]}" "$T/copy/" "$C/")" "" \
	"what a second rsync -a in copies"

step "docfs check passes while mounted"
out=$("$DOCFS" check "$STORE") || fail "docfs check"
expect_eq "$out" "store '$STORE' is sound (2 databases)" "docfs check output"
echo "ok"
