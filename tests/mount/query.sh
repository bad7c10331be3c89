#!/usr/bin/env bash
# query.sh - find through query/ paths with real tools: shell quoting, mongo-shell literals,
# %XX escapes, every option and format, saved queries (.queries/ and @name), errors (EINVAL
# with the reason in /.docfs/errors), query/ listing empty so find/grep -r never run a
# query, a result's true size after open, and docfs export --query using the same engine.
. "$(dirname "$0")/lib.sh"
mount_docfs
C=$MNT/shop/users
mkdir -p "$C"
cat > "$C/.insert" <<'DOCS'
{"_id": 1, "name": "ann", "age": 31, "city": "Beijing", "tags": ["a", "b"]}
{"_id": 2, "name": "bob", "age": 25, "city": "ShenZhen", "tags": ["b"]}
{"_id": 3, "name": "cy", "age": 40, "city": "Beijing", "path": "a/b"}
{"_id": 4, "name": "dee", "age": 25, "city": null}
{"_id": 5, "name": "eve"}
DOCS

ids() { jq -c '._id' | tr '\n' ' '; }

step "a filter in shell-literal syntax, JSON Lines out"
expect_eq "$(cat "$C/query/{age: {\$gt: 30}}" | ids)" "1 3 " "age > 30"
expect_eq "$(cat "$C"/query/'{"city": "Beijing"}' | ids)" "1 3 " "city Beijing"
expect_eq "$(cat "$C/query/{}" | wc -l)" "5" "empty filter"
expect_eq "$(cat "$C/query/" 2>/dev/null | wc -l)" "0" "query/ itself is a directory"

step "sort, skip, limit, projection"
expect_eq "$(cat "$C/query/{age: {\$exists: true}}?sort={age: -1, _id: 1}" | ids)" "3 1 2 4 " "sort"
expect_eq "$(cat "$C/query/{}?sort={_id: -1}&skip=1&limit=2" | ids)" "4 3 " "skip+limit"
expect_eq "$(cat "$C/query/{_id: 1}?projection={name: 1, _id: 0}")" '{"name": "ann"}' "projection"
expect_eq "$(cat "$C/query/{_id: 2}?project={tags: 0, city: 0}")" '{"_id": 2, "name": "bob", "age": 25}' "project alias"

step "null matches null and missing; \$in over arrays"
expect_eq "$(cat "$C/query/{city: null}" | ids)" "4 5 " "city null"
expect_eq "$(cat "$C/query/{tags: {\$in: ['a']}}" | ids)" "1 " "tags \$in"

step "%2F escapes a slash, %3F and %26 the option separators"
expect_eq "$(cat "$C/query/{path: 'a%2Fb'}" | ids)" "3 " "%2F"
expect_eq "$(cat "$C/query/{name: {\$regex: 'nn%3F$'}}" | ids)" "1 " "%3F in a regex"

step "count, distinct"
expect_eq "$(cat "$C/query/{age: 25}?count=1")" "2" "count"
expect_eq "$(cat "$C/query/{}?count=1")" "5" "count of the collection"
expect_eq "$(jq -c '[.queryPlanner.winningPlan.stage, .executionStats.executionStages.nCounted]' \
	"$C/explain/{}?count=1&verbosity=executionStats")" '["RECORD_STORE_FAST_COUNT",5]' \
	"explain of the count of the collection"
expect_eq "$(cat "$C/query/{}?distinct=city" | tr '\n' ' ')" 'null "Beijing" "ShenZhen" ' "distinct"
expect_eq "$(cat "$C/query/{}?distinct=tags" | tr '\n' ' ')" '"a" "b" ' "distinct unwinds arrays"

step "formats: json, pretty, ids"
expect_eq "$(jq -c 'map(._id)' "$C/query/{age: 25}?format=json")" "[2,4]" "format=json"
expect_eq "$(jq -c 'map(._id)' "$C/query/{age: 99}?format=json")" "[]" "format=json, no results"
expect_eq "$(cat "$C/query/{_id: 2}?format=pretty")" "$(cat "$C/2.json")" "format=pretty is the document file"
expect_eq "$(cat "$C/query/{age: 25}?format=ids" | tr '\n' ' ')" "2.json 4.json " "format=ids"
(cd "$C" && expect_eq "$(cat $(cat 'query/{age: 25}?format=ids') | jq -r .name | tr '\n' ' ')" "bob dee " "ids feed cat")

step "stat after open shows the result's true size"
f="$C/query/{city: 'Beijing'}"
exec 3< "$f"
size=$(stat -L -c %s /dev/fd/3)
body=$(cat <&3)
exec 3<&-
expect_eq "$size" "$(( ${#body} + 1 ))" "size of the open result"
expect_eq "$(stat -c %s "$f")" "$size" "stat by name after the open"

step "a result is a snapshot for its open file"
exec 3< "$C/query/{age: {\$lt: 30}}"
echo '{"_id": 6, "age": 20}' > "$C/6.json"
expect_eq "$(cat <&3 | ids)" "2 4 " "snapshot taken at open"
exec 3<&-
expect_eq "$(cat "$C/query/{age: {\$lt: 30}}" | ids)" "2 4 6 " "a new open sees the insert"
rm "$C/6.json"

step "saved queries"
echo '{"filter": {"city": "Beijing"}, "sort": {"age": -1}, "projection": {"name": 1}}' > "$C/.queries/beijing"
expect_eq "$(ls "$C/.queries")" "beijing" "ls .queries"
expect_eq "$(cat "$C/query/@beijing" | tr '\n' ' ')" '{"_id": 3, "name": "cy"} {"_id": 1, "name": "ann"} ' "@beijing"
expect_eq "$(cat "$C/query/@beijing?limit=1" | jq -c ._id)" "3" "@name with an option over it"
echo '{"filter": {"a": {"$bad": 1}}}' > "$T/bad"
expect_fail "a bad saved query is refused (at the write that completes it)" cp "$T/bad" "$C/.queries/bad"
grep -q "unknown operator '\$bad'" "$MNT/.docfs/errors" || fail "saved query error not in .docfs/errors"
[ ! -e "$C/.queries/bad" ] || fail "the refused saved query left an empty .queries/bad"
expect_fail "unknown saved query" cat "$C/query/@nosuch"
rm "$C/.queries/beijing"
expect_eq "$(ls "$C/.queries" | wc -l)" "0" ".queries empty after rm"

step "errors: EINVAL and a message that says what and where"
err=$(cat "$C/query/{age: {\$gtx: 1}}" 2>&1 >/dev/null || true)
case "$err" in *"Invalid argument"*) ;; *) fail "bad operator: $err" ;; esac
tail -n 1 "$MNT/.docfs/errors" | grep -q "unknown operator '\$gtx' at 'age'" || fail "message: $(tail -n 1 "$MNT/.docfs/errors")"
expect_fail "\$in without an array" cat "$C/query/{tags: {\$in: 5}}"
tail -n 1 "$MNT/.docfs/errors" | grep -q "\$in needs an array at 'tags'" || fail "message: $(tail -n 1 "$MNT/.docfs/errors")"
expect_fail "unparsable filter" cat "$C/query/{age: }"
tail -n 1 "$MNT/.docfs/errors" | grep -q "filter: line 1, column" || fail "parse message: $(tail -n 1 "$MNT/.docfs/errors")"
expect_fail "unknown option" cat "$C/query/{}?sortt={a:1}"
expect_fail "bad limit" cat "$C/query/{}?limit=-1"
expect_fail "results are read-only" cp "$T/bad" "$C/query/{}"

step "query/ lists empty; find and grep -r never run queries"
expect_eq "$(ls -A "$C/query" | wc -l)" "0" "ls query/"
before=$(wc -l < "$MNT/.docfs/errors")
expect_eq "$(find "$C" -name '*.json' | wc -l)" "5" "find sees only documents"
expect_eq "$(grep -rl Beijing "$C" | sort | tr '\n' ' ')" "$C/1.json $C/3.json " "grep -r"
expect_eq "$(wc -l < "$MNT/.docfs/errors")" "$before" "no query ran during find/grep"

step "docfs export --query uses the same engine"
expect_eq "$("$DOCFS" export "$STORE" shop.users --query '{age: {$gte: 25}}' --sort '{age: 1, _id: -1}' --limit 3 | ids)" "4 2 1 " "export --query --sort --limit"
step "a large result (rendered on a second thread) equals docfs export, in every format"
M=$MNT/test/many
mkdir -p "$M"
"$DOCFS" generate "$(dirname "$0")/../../examples/users.template.json" -n 5000 --seed 3 > "$M/.insert"
"$DOCFS" export "$STORE" test.many --query '{"user.age": {$gte: 20}}' > "$T/many.jsonl"
[ "$(wc -l < "$T/many.jsonl")" -gt 2000 ] || fail "too few documents for the test: $(wc -l < "$T/many.jsonl")"
q="$M/query/{\"user.age\": {\$gte: 20}}"
expect_eq "$(md5sum < "$q")" "$(md5sum < "$T/many.jsonl")" "jsonl, byte for byte"
expect_eq "$(jq -c '.[]' "$q?format=json" | md5sum)" "$(jq -c . "$T/many.jsonl" | md5sum)" "format=json"
expect_eq "$(jq -c . "$q?format=pretty" | md5sum)" "$(jq -c . "$T/many.jsonl" | md5sum)" "format=pretty"
expect_eq "$(md5sum < "$q?format=ids")" "$(jq -r '._id["$oid"] + ".json"' "$T/many.jsonl" | md5sum)" "format=ids"
expect_eq "$(md5sum < "$M/aggregate/[{\$match: {\"user.age\": {\$gte: 20}}}]")" "$(md5sum < "$T/many.jsonl")" \
	"aggregate/, byte for byte"
echo ok
