#!/usr/bin/env bash
# dots.sh - field names with '.' and a leading '$' (MongoDB 5.0+): a document file holding
# them is written with `cat >`, read back byte for byte, rewritten with its own bytes without
# a change, found by query/ only through $getField ('a.b' in a filter stays a path); what
# docfs refuses (a '$' name inside _id, a value that would read back from its file as an
# Extended JSON wrapper) fails the write, stores nothing and is said in /.docfs/errors.
. "$(dirname "$0")/lib.sh"
mount_docfs
C=$MNT/db/c
mkdir -p "$C"

step "a document with '.' and '\$' names round-trips through its file"
# the file exactly as docfs renders documents (two-space indent, one field a line)
cat > "$T/d1.json" << 'EOF2'
{
  "_id": 1,
  "a.b": 1,
  "$x": {
    "c.d": [
      1,
      {
        "$y": 2
      }
    ]
  },
  "r": {
    "$ref": "c",
    "$id": 1,
    "$db": "d"
  },
  "$regex": "not a regex"
}
EOF2
cat "$T/d1.json" > "$C/1.json" || fail "writing 1.json"
cmp "$T/d1.json" "$C/1.json" || fail "1.json does not read back byte for byte: $(cat "$C/1.json")"
ino=$(stat -c %i "$C/1.json")
mark=$(errors_mark)
cat "$C/1.json" > "$T/again.json"
cat "$T/again.json" > "$C/1.json" || fail "rewriting 1.json with its own bytes"
cmp "$T/d1.json" "$C/1.json" || fail "1.json changed when rewritten with its own bytes"
expect_eq "$(stat -c %i "$C/1.json")" "$ino" "inode of 1.json after the rewrite"
# the same fields written compactly, in a second document
printf '{"_id": 2, "a.b": 2, "$x": {"c.d": 3}}' > "$C/2.json" || fail "writing 2.json"
expect_eq "$(jq -c . "$C/2.json")" '{"_id":2,"a.b":2,"$x":{"c.d":3}}' "2.json"

step "query/ reaches them through \$getField only"
expect_eq "$(cat "$C/query/{\"\$expr\":{\"\$eq\":[{\"\$getField\":\"a.b\"},1]}}?projection={\"_id\":1}" | jq -c .)" \
	'{"_id":1}' "\$getField 'a.b' = 1"
expect_eq "$(cat "$C/query/{\"\$expr\":{\"\$eq\":[{\"\$getField\":{\"field\":\"c.d\",\"input\":{\"\$getField\":{\"\$literal\":\"\$x\"}}}},3]}}?count=1")" \
	"1" "\$getField of \$getField: \$x's 'c.d' = 3"
expect_eq "$(cat "$C/query/{\"a.b\":1}?count=1")" "0" "a filter's 'a.b' is a path, not the field"
expect_eq "$(cat "$C/aggregate/[{\"\$project\":{\"v\":{\"\$getField\":{\"\$literal\":\"\$regex\"}}}}]" | jq -c '.v' | tr '\n' ' ')" \
	'"not a regex" null ' "aggregate/ with \$getField of '\$regex'"
expect_fail "\$getField of a field path" cat "$C/query/{\"\$expr\":{\"\$getField\":\"\$a\"}}"
errors_since "$MNT/.docfs/errors" "$mark" | grep -qF "\$getField requires 'field' to evaluate to a constant" ||
	fail "no \$getField argument error in /.docfs/errors: $(errors_since "$MNT/.docfs/errors" "$mark")"

step "index key patterns address paths, never such fields (as MongoDB)"
echo '{"key": {"a.b": 1}}' > "$C/.indexes/ab" || fail "an index on the path a.b"
expect_eq "$(cat "$C/query/{\"a.b\":1}?hint=ab&count=1")" "0" "the index on a.b finds no field named 'a.b'"
expect_eq "$(cat "$C/query/{\"a.b\":null}?hint=ab&projection={\"_id\":1}" | jq -c ._id | tr '\n' ' ')" "1 2 " \
	"both documents are under null in the index on the path a.b"
expect_fail "an index on '\$x'" sh -c 'echo "{\"key\": {\"\$x\": 1}}" > "$1/.indexes/dx"' sh "$C"
[ ! -e "$C/.indexes/dx" ] || fail "the refused index exists"

step "update pipelines write and remove them with \$setField and \$unsetField"
echo '[{$replaceWith: {$setField: {field: {$literal: "$n"}, input: "$$ROOT", value: 7}}}]' > "$C/update/{_id: 2}" ||
	fail "\$setField update"
expect_eq "$(jq -c . "$C/2.json")" '{"_id":2,"a.b":2,"$x":{"c.d":3},"$n":7}' "2.json after \$setField"
echo '[{$replaceWith: {$unsetField: {field: "a.b", input: "$$ROOT"}}}]' > "$C/update/{_id: 2}" ||
	fail "\$unsetField update"
expect_eq "$(jq -c . "$C/2.json")" '{"_id":2,"$x":{"c.d":3},"$n":7}' "2.json after \$unsetField"

step "refused: a '\$' name inside _id, a value that would read back as a typed value"
mark=$(errors_mark)
expect_fail "a '\$' name inside _id" sh -c 'printf "%s" "{\"_id\": {\"\$k\": 1}}" > "$1/.insert"' sh "$C"
errors_since "$MNT/.docfs/errors" "$mark" | grep -qF "field name '\$k' at '_id' must not start with '\$' inside '_id'" ||
	fail "no _id message in /.docfs/errors: $(errors_since "$MNT/.docfs/errors" "$mark")"
mark=$(errors_mark)
expect_fail "a \$numberInt-shaped value" sh -c 'echo "[{\$set: {w: {\$setField: {field: {\$literal: \"\$numberInt\"}, input: {}, value: \"1\"}}}}]" > "$1/update/{_id: 2}"' sh "$C"
errors_since "$MNT/.docfs/errors" "$mark" | grep -qF "the document at 'w' has the keys of an Extended JSON type wrapper ('\$numberInt')" ||
	fail "no wrapper message in /.docfs/errors: $(errors_since "$MNT/.docfs/errors" "$mark")"
expect_eq "$(jq -c . "$C/2.json")" '{"_id":2,"$x":{"c.d":3},"$n":7}' "2.json after the refused update"
expect_eq "$(cat "$C/query/{}?count=1")" "2" "documents in the collection"
cmp "$T/d1.json" "$C/1.json" || fail "1.json changed"

unmount_docfs
"$DOCFS" check "$STORE" > "$T/check" || fail "docfs check: $(cat "$T/check")"
echo "PASS"
