#!/usr/bin/env bash
# qslash.sh - queries paste as written: a '/' (a regex literal, a URL in a string) spans
# path components, and query/, explain/, aggregate/, update/ and delete/ join them; a '?'
# inside a string or a regex is the value's, not the start of options; a '%' without two hex
# digits is itself. A path that never becomes a whole query says so in /.docfs/errors.
. "$(dirname "$0")/lib.sh"
mount_docfs
C=$MNT/shop/items
mkdir -p "$C"
printf '%s\n' '{"_id": 1, "item": "Pen", "url": "/a/b"}' '{"_id": 2, "item": "paper", "url": "/"}' \
	'{"_id": 3, "item": "ink", "url": "/a?x", "note": "100% cotton"}' > "$C/.insert"
ids() { jq -c ._id | tr '\n' ' '; }

step "regex literals and strings with '/'"
expect_eq "$(cat "$C/query/{ item: /^P/i }" | ids)" "1 2 " "the manual's { item: /^P/i }"
expect_eq "$(cat "$C/query/{url: \"/a/b\"}" | ids)" "1 " "a URL with two slashes"
expect_eq "$(cat "$C/query/{url: /^\/a/}?sort={_id: -1}" | ids)" "3 1 " "an escaped slash in a regex, then options"
expect_eq "$(cat "$C/query/{url: \"/a?x\"}?projection={_id: 1}" | jq -c .)" '{"_id":3}' "a '?' inside a string"
expect_eq "$(cat "$C/query/{url: /^\/a\?x$/}" | ids)" "3 " "a '?' inside a regex"
expect_eq "$(cat "$C/query/{note: \"100% cotton\"}?count=1")" "1" "a '%' without two hex digits"
expect_eq "$(cat "$C/query/{url: \"%2Fa%2Fb\"}" | ids)" "1 " "%2F still escapes a '/'"
expect_eq "$(cat "$C/explain/{url: \"/a/b\"}" | jq -c .queryPlanner.parsedQuery)" '{"url":{"$eq":"/a/b"}}' "explain/"
expect_eq "$(cat "$C/aggregate/[{\$match: {url: /^\/a/}}, {\$count: \"n\"}]" | jq -c .n)" "2" "aggregate/"

step "update/ and delete/ with '/' (the README's upsert example)"
echo '{$inc: {hits: 1}}' > "$C/update/{url: \"/\"}?upsert=true" || fail "update/{url: \"/\"}"
expect_eq "$(jq -c .hits "$C/2.json")" "1" "hits of the page at /"
echo '{$inc: {hits: 1}}' > "$C/update/{url: \"/new/page\"}?upsert=true" || fail "the upsert"
expect_eq "$(cat "$C/query/{url: \"/new/page\"}" | jq -c .hits)" "1" "the upserted document"
echo > "$C/delete/{url: \"/a/b\"}" || fail "delete/{url: \"/a/b\"}"
[ ! -e "$C/1.json" ] || fail "1.json left after its delete"

step "a path that never becomes a whole query"
nerr=$(errors_mark)
expect_fail "cat of a cut query" cat "$C/query/{a: \"x"
errors_since "$MNT/.docfs/errors" "$nerr" | grep -qF "query '{a: \"x': not a whole query yet" ||
	fail "no message naming the cut query: $(errors_since "$MNT/.docfs/errors" "$nerr")"
expect_eq "$(ls "$C/query/" | wc -l)" "0" "query/ still lists empty"
expect_eq "$(find "$C" -path '*query*' | wc -l)" "1" "find sees query/ only, never a query"
