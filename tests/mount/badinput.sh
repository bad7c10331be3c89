#!/usr/bin/env bash
# badinput.sh - bad input is refused with a clear errno and a message in /.docfs/errors,
# and changes nothing: invalid JSON, a document over 16 MiB, nesting over 100 levels, a '$'
# field name inside _id, a bad {"$oid": ..}, an array _id, an _id differing from the file name, invalid UTF-8,
# database and collection names over 64 bytes, file names over 255 bytes, mkdir of a
# document's name in a collection, rm .insert, a non-canonical document name (007.json), and renaming an invalid
# scratch file over a document.
. "$(dirname "$0")/lib.sh"
mount_docfs

C=$MNT/db/c
A=$C/a.json
ERRORS=$MNT/.docfs/errors

listing() {
	ls -A "$C" | sort | tr '\n' ' '
}

nerrors() {
	wc -l < "$ERRORS"
}

# expect_rejected WHAT ERRNO_TEXT WORD_ERE command... : the command fails, its error output
# holds ERRNO_TEXT, /.docfs/errors gained lines matching WORD_ERE, and a.json and the
# names in the collection are unchanged.
expect_rejected() {
	local what=$1 errtext=$2 word=$3 n0 out new
	shift 3
	n0=$(nerrors)
	if out=$("$@" 2>&1); then
		fail "$what: succeeded but should have failed"
	fi
	case "$out" in
	*"$errtext"*) ;;
	*) fail "$what: expected '$errtext' in the error output, got '$out'" ;;
	esac
	[ "$(nerrors)" -gt "$n0" ] || fail "$what: nothing new in .docfs/errors"
	new=$(tail -n "+$((n0 + 1))" "$ERRORS")
	grep -qiE -- "$word" <<<"$new" || fail "$what: .docfs/errors lacks /$word/: $new"
	grep -qF -- "$new" "$T/log" || fail "$what: message not in the log file"
	cmp "$A" "$T/a.orig" || fail "$what: a.json changed"
	expect_eq "$(listing)" "$names" "$what: names in the collection"
	echo "   $what: ${out:0:160}"
}

# rename_py FROM TO: rename(2), printing the errno text (mv words EINVAL as "subdirectory
# of itself").
rename_py() {
	python3 -c 'import os, sys
try:
    os.rename(sys.argv[1], sys.argv[2])
except OSError as e:
    sys.exit("rename: " + e.strerror)' "$1" "$2"
}

# bad_doc WHAT ERRNO_TEXT WORD_ERE: cp $T/bad over a.json must be rejected.
bad_doc() {
	expect_rejected "$1" "$2" "$3" cp "$T/bad" "$A"
}

step "set up a collection with one document"
mkdir -p "$C"
echo '{"name": "keep", "n": 1}' > "$A"
cp "$A" "$T/a.orig"
names=$(listing)
expect_eq "$names" ".indexes .queries a.json aggregate delete explain query update " "initial names"
[ -r "$ERRORS" ] || fail ".docfs/errors is not readable"

step "invalid JSON"
printf '{"a": \n' > "$T/bad"
bad_doc "invalid JSON" "Invalid argument" "a\.json.*line 2, column 1: expected a value"

step "invalid JSON written by the shell (echo > f)"
n0=$(nerrors)
out=$(sh -c 'echo "{\"a\": " > "$1"' sh "$A" 2>&1) || true
cmp "$A" "$T/a.orig" || fail "echo invalid JSON: a.json changed"
tail -n "+$((n0 + 1))" "$ERRORS" | grep -q "a\.json.*expected a value" ||
	fail "echo invalid JSON: no message in .docfs/errors"
expect_eq "$(listing)" "$names" "echo invalid JSON: names"
echo "   echo > f: '$out'"

step "a document over 16 MiB"
python3 -c 'import json,sys; sys.stdout.write(json.dumps({"s": "x" * 17000000}) + "\n")' \
	> "$T/bad"
expect_eq "$(stat -c %s "$T/bad")" "17000010" "size of the big input"
bad_doc "17 MB document" "File too large" "16 MiB"

step "nesting over 100 levels"
python3 -c 'n = 150; print("{\"a\": " * n + "1" + "}" * n)' > "$T/bad"
bad_doc "nesting 150 deep" "Invalid argument" "nesting|deep|depth"

step "nesting of exactly 100 levels is accepted (control)"
python3 -c 'n = 99; print("{\"a\": " * n + "1" + "}" * n)' > "$C/deep.json"
expect_eq "$(jq '[paths] | map(length) | max' "$C/deep.json")" "99" "deep.json depth"
rm "$C/deep.json"

step "a \$-prefixed field name inside _id (names with '.' or '\$' elsewhere: dots.sh)"
printf '{"_id": {"a": {"$foo": 2}}, "x": 1}\n' > "$T/bad"
bad_doc "\$-field in _id" "Invalid argument" "foo' at '_id\.a' must not start"

step "an Extended JSON wrapper shape with a bad value"
printf '{"x": {"$oid": "12"}}\n' > "$T/bad"
bad_doc "bad \$oid" "Invalid argument" 'invalid ObjectId'

step "an _id that is an array"
printf '{"_id": [1, 2], "x": 1}\n' > "$T/bad"
bad_doc "array _id" "Invalid argument" "array"

step "an _id differing from the file name"
printf '{"_id": "zzz", "x": 1}\n' > "$T/bad"
bad_doc "differing _id" "Invalid argument" "zzz|_id"
printf '{"_id": 1, "x": 1}\n' > "$T/bad"
bad_doc "_id of another type" "Invalid argument" "_id"

step "invalid UTF-8"
printf '{"a": "\xff"}\n' > "$T/bad"
bad_doc "invalid UTF-8 value" "Invalid argument" "utf-8"
printf '{"\xc3\x28": 1}\n' > "$T/bad"
bad_doc "invalid UTF-8 key" "Invalid argument" "utf-8"

step "a database name over 64 bytes"
long65=$(printf 'd%.0s' $(seq 65))
dbs=$(ls -A "$MNT" | sort | tr '\n' ' ')
expect_rejected "65-byte database" "File name too long" "64|long" mkdir "$MNT/$long65"
[ ! -e "$MNT/$long65" ] || fail "65-byte database exists"
expect_eq "$(ls -A "$MNT" | sort | tr '\n' ' ')" "$dbs" "databases after the failed mkdir"
mkdir "$MNT/$(printf 'e%.0s' $(seq 64))" || fail "64-byte database name refused"

step "a collection name over 64 bytes"
expect_rejected "65-byte collection" "File name too long" "64|long" mkdir "$MNT/db/$long65"
[ ! -e "$MNT/db/$long65" ] || fail "65-byte collection exists"
expect_eq "$(ls -A "$MNT/db")" "c" "collections after the failed mkdir"
mkdir "$MNT/db/$(printf 'f%.0s' $(seq 64))" || fail "64-byte collection name refused"
rmdir "$MNT/db/$(printf 'f%.0s' $(seq 64))"

step "a file name over 255 bytes"
long256=$(printf 'x%.0s' $(seq 251)).json
expect_eq "${#long256}" "256" "length of the long name"
expect_rejected "256-byte document name" "File name too long" "long|255" \
	sh -c 'echo "{}" > "$1"' sh "$C/$long256"
expect_rejected "300-byte scratch name" "File name too long" "long|255" \
	touch "$C/$(printf 'y%.0s' $(seq 300))"
ok255=$(printf 'x%.0s' $(seq 250)).json
echo '{}' > "$C/$ok255" || fail "255-byte document name refused"
rm "$C/$ok255"

step "mkdir inside a collection under a document's name"
expect_rejected "mkdir of a document name in a collection" "Operation not permitted" \
	"document|director" mkdir "$C/sub.json"
[ ! -e "$C/sub.json" ] || fail "sub.json exists"

step "rm .insert"
expect_rejected "rm .insert" "Operation not permitted" "\.insert" rm -f "$C/.insert"
[ -e "$C/.insert" ] || fail ".insert gone"

step "rmdir of a collection's query directory is accepted (rm -r's step) and query/ stays"
rmdir "$C/query" || fail "rmdir of the (empty) query directory"
[ -d "$C/query" ] || fail "query/ gone"

step "a non-canonical document name: 007.json"
expect_rejected "007.json" "Invalid argument" "007" sh -c 'echo "{}" > "$1"' sh "$C/007.json"
[ ! -e "$C/007.json" ] || fail "007.json exists"
expect_rejected "rename to 007.json" "Invalid argument" "007" rename_py "$A" "$C/007.json"
expect_fail "mv to 007.json" mv "$A" "$C/007.json"
[ ! -e "$C/007.json" ] || fail "007.json exists after mv"
echo '{"x": 1}' > "$C/%3007.json" || fail "writing %3007.json (the string \"007\")"
expect_eq "$(jq -c ._id "$C/%3007.json")" '"007"' "_id of %3007.json"
rm "$C/%3007.json"

step "renaming an invalid scratch file over a document fails and keeps both"
printf '{"a": ' > "$C/junk.tmp"
cp "$C/junk.tmp" "$T/junk.orig"
names=$(listing)
expect_rejected "rename invalid scratch over a.json" "Invalid argument" "junk\.tmp.*expected" \
	rename_py "$C/junk.tmp" "$A"
cmp "$C/junk.tmp" "$T/junk.orig" || fail "junk.tmp changed"
expect_fail "mv invalid scratch over a.json" mv "$C/junk.tmp" "$A"
cmp "$C/junk.tmp" "$T/junk.orig" || fail "junk.tmp changed"
printf '{"_id": "other"}' > "$C/junk.tmp"
expect_rejected "rename scratch with another _id over a.json" "Invalid argument" "other" \
	rename_py "$C/junk.tmp" "$A"
rm "$C/junk.tmp"

step "the document still reads as before, and the store is sound"
expect_eq "$(jq -cS . "$A")" '{"_id":"a","n":1,"name":"keep"}' "a.json at the end"
"$DOCFS" check "$STORE" >/dev/null || fail "docfs check"
echo "ok"
