#!/usr/bin/env bash
# import.sh - docfs import and export as mongoimport and mongoexport users expect them: a
# JSON array found by itself, past duplicate keys by default (reported, exit 1) or not with
# --stopOnError, --mode upsert and merge, --upsertFields, CSV and TSV with --headerline or
# --fields (types, nesting, quoting), and export's --jsonArray, --fields, --type csv,
# --query, --sort and --limit, each round trip compared.
. "$(dirname "$0")/lib.sh"
S=$STORE
ex() { "$DOCFS" export "$S" "$@" 2> /dev/null; }
one() { tr '\n' ' '; }

step "JSON: an array by itself, duplicates skipped and reported"
printf '[{"_id": 1, "a": 1}, {"_id": 2, "a": 2}]' | "$DOCFS" import "$S" db.c 2> "$T/e" || fail "import of an array: $(cat "$T/e")"
rc=0
printf '{"_id": 2, "a": 20}\n{"_id": 3, "a": 3}\n{"_id": 1}\n' | "$DOCFS" import "$S" db.c 2> "$T/e" || rc=$?
expect_eq "$rc" "1" "exit status of an import with duplicates"
grep -q "document 1 (line 1) not imported: duplicate _id 2" "$T/e" || fail "no report of the duplicate: $(cat "$T/e")"
grep -q "1 documents imported into db.c .*; 2 failed to import" "$T/e" || fail "no summary: $(cat "$T/e")"
expect_eq "$(ex db.c | jq -c .a | one)" "1 2 3 " "the documents after the import"

step "--stopOnError stops at the first duplicate, keeping the ones before it"
expect_fail "--stopOnError" sh -c "printf '{\"_id\": 4}\n{\"_id\": 2}\n{\"_id\": 5}\n' | '$DOCFS' import '$S' db.c --stopOnError"
expect_eq "$(ex db.c | jq -c ._id | one)" "1 2 3 4 " "documents after --stopOnError"

step "--mode upsert and merge, --upsertFields"
printf '{"_id": 2, "b": 1}\n{"_id": 6, "b": 6}\n' | "$DOCFS" import "$S" db.c --mode upsert 2> /dev/null || fail "upsert"
expect_eq "$(ex db.c --query '{_id: {$in: [2, 6]}}' | jq -c . | one)" '{"_id":2,"b":1} {"_id":6,"b":6} ' "upserted"
printf '{"_id": 1, "m": 1}\n' | "$DOCFS" import "$S" db.c --mode merge 2> /dev/null || fail "merge"
expect_eq "$(ex db.c --query '{_id: 1}' | jq -c .)" '{"_id":1,"a":1,"m":1}' "merged"
printf '{"a": 3, "z": 9}\n' | "$DOCFS" import "$S" db.c --upsertFields a 2> /dev/null || fail "--upsertFields"
expect_eq "$(ex db.c --query '{a: 3}' | jq -c .)" '{"_id":3,"a":3,"z":9}' "replaced by its upsert field"

step "CSV and TSV"
printf 'name,age,addr.city,note\r\nann,31,Paris,"hello, ""world"""\r\nbob,2.5,Rome,\r\ncy,9000000000,Oslo,"two\nlines"\r\n' |
	"$DOCFS" import "$S" db.p --type csv --headerline 2> /dev/null || fail "csv import"
expect_eq "$(ex db.p --projection '{_id: 0}' --sort '{name: 1}' | jq -c . | one)" \
	'{"name":"ann","age":31,"addr":{"city":"Paris"},"note":"hello, \"world\""} {"name":"bob","age":2.5,"addr":{"city":"Rome"},"note":""} {"name":"cy","age":9000000000,"addr":{"city":"Oslo"},"note":"two\nlines"} ' \
	"documents from CSV"
expect_eq "$(ex db.p --query '{age: 31}' --fields age | jq -c '.age | type')" '"number"' "a CSV number"
printf 'x\t3\ny\t"4"\n' | "$DOCFS" import "$S" db.t --type tsv --fields k,v 2> /dev/null || fail "tsv import"
expect_eq "$(ex db.t --projection '{_id: 0}' --sort '{k: 1}' | jq -c . | one)" '{"k":"x","v":3} {"k":"y","v":"\"4\""} ' "documents from TSV"
expect_fail "csv without field names" sh -c "echo a,b | '$DOCFS' import '$S' db.q --type csv"

step "export: --jsonArray, --type csv --fields, round trips"
expect_eq "$(ex db.p --jsonArray --sort '{name: 1}' --limit 2 | jq -c 'map(.name)')" '["ann","bob"]' "--jsonArray"
ex db.p --jsonArray > "$T/p.json"
"$DOCFS" import "$S" db.p3 "$T/p.json" 2> /dev/null || fail "import of an exported array"
expect_eq "$(ex db.p3 | md5sum)" "$(ex db.p | md5sum)" "array round trip"
ex db.p --type csv --fields name,age,addr.city,note --sort '{name: 1}' > "$T/p.csv"
expect_eq "$(head -n 2 "$T/p.csv" | one)" 'name,age,addr.city,note ann,31,Paris,"hello, ""world""" ' "the CSV"
"$DOCFS" import "$S" db.p2 "$T/p.csv" --type csv --headerline 2> /dev/null || fail "import of an exported CSV"
expect_eq "$(ex db.p2 --projection '{_id: 0}' --sort '{name: 1}' | md5sum)" \
	"$(ex db.p --projection '{_id: 0}' --sort '{name: 1}' | md5sum)" "CSV round trip"
expect_fail "csv export without --fields" "$DOCFS" export "$S" db.p --type csv
"$DOCFS" check "$S" > /dev/null || fail "docfs check"
