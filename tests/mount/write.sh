#!/usr/bin/env bash
# write.sh - the write paths from shell scripts: update/<q> (updateOne, updateMany, upsert,
# replacement, arrayFilters, findAndModify with returnDocument), delete/<q>, .bulk (ordered,
# unordered, atomic), the result read back on the same descriptor, errors that change
# nothing and say why in /.docfs/errors, the docfs update/delete/bulk commands, racing
# upserts, a findAndModify counter under 8 concurrent scripts, and $inc atomicity.
. "$(dirname "$0")/lib.sh"
mount_docfs
C=$MNT/shop/users
mkdir -p "$C"
cat > "$C/.insert" <<'DOCS'
{"_id": 1, "name": "ann", "age": 31, "tags": ["a", "b"], "grades": [80, 95, 70]}
{"_id": 2, "name": "bob", "age": 25, "tags": ["b"]}
{"_id": 3, "name": "cy", "age": 40}
{"_id": 4, "name": "dee", "age": 25}
DOCS

doc() { jq -c "$2" "$C/$1.json"; }
# req PATH BODY: one request and its result, read back on the same descriptor
req() {
	local out
	exec 3<>"$1"
	printf '%s' "$2" >&3
	out=$(cat <&3)
	exec 3>&-
	printf '%s\n' "$out"
}
# put PATH BODY: a request whose close must succeed (coreutils printf reports close errors)
put() { /usr/bin/printf '%s' "$2" > "$1"; }
# bad PATH BODY: a request whose close must fail
bad() {
	if /usr/bin/printf '%s' "$2" > "$1" 2>/dev/null; then
		fail "request to '$1' with '$2' succeeded; it should have failed"
	fi
}
lasterr() { tail -n1 "$MNT/.docfs/errors"; }

step "the collection lists update/ and delete/ (empty); .bulk is there by name, unlisted"
ls -a "$C" | grep -qx update || fail "no update/ in the listing"
ls -a "$C" | grep -qx delete || fail "no delete/ in the listing"
ls -a "$C" | grep -qx .bulk && fail ".bulk is listed: an archive of the collection would hold it"
[ -f "$C/.bulk" ] || fail "no .bulk by name"
expect_eq "$(ls -A "$C/update" | wc -l)" "0" "update/ lists empty"
expect_eq "$(ls -A "$C/delete" | wc -l)" "0" "delete/ lists empty"

step "updateOne: echo an update document into update/<filter>"
echo '{$set: {age: 32}, $push: {tags: "c"}}' > "$C/update/{_id: 1}"
expect_eq "$(doc 1 '[.age, .tags]')" '[32,["a","b","c"]]' "updateOne"
expect_eq "$(stat -c %s "$C/1.json")" "$(wc -c < "$C/1.json")" "st_size after an update"

step "the result is read back on the same descriptor"
expect_eq "$(req "$C/update/{age: 25}?multi=true" '{$inc: {age: 1}}')" \
	'{"acknowledged": true, "matchedCount": 2, "modifiedCount": 2, "upsertedCount": 0, "upsertedId": null}' "updateMany result"
expect_eq "$(doc 2 .age),$(doc 4 .age)" "26,26" "updateMany changed both"
expect_eq "$(req "$C/update/{age: 26}" '{$set: {n: 1}}' | jq -c '[.matchedCount, .modifiedCount]')" \
	'[1,1]' "updateOne changes one"
expect_eq "$(req "$C/update/{_id: 3}" '{$set: {age: 40}}' | jq -r '.modifiedCount')" "0" "a no-op update"
# a reader that seeks back to 0 and reads on to the end gets the result once
expect_eq "$(python3 -c '
import sys
with open(sys.argv[1], "r+") as f:
    f.write("{$set: {seen: 1}}")
    f.flush()
    f.seek(0)
    sys.stdout.write(f.read())
' "$C/update/{_id: 3}")" \
	'{"acknowledged": true, "matchedCount": 1, "modifiedCount": 1, "upsertedCount": 0, "upsertedId": null}' "the result read from 0 to the end"

step "upsert, replacement, arrayFilters"
expect_eq "$(req "$C/update/{name: 'fay', age: 50}?upsert=true" '{$set: {city: "Paris"}}' | jq -r '.upsertedCount')" "1" "upsert inserts"
expect_eq "$(cat "$C/query/{name: 'fay'}?projection={_id: 0}")" '{"age": 50, "name": "fay", "city": "Paris"}' "upserted from the filter's equality fields (in path order, as MongoDB)"
put "$C/update/{_id: 3}" '{"name": "cy", "age": 41}'
expect_eq "$(cat "$C/3.json" | jq -c .)" '{"_id":3,"name":"cy","age":41}' "replacement keeps _id"
put "$C/update/{_id: 1}?arrayFilters=[{x: {\$gte: 80}}]" '{$inc: {"grades.$[x]": 1}}'
expect_eq "$(doc 1 .grades)" '[81,96,70]' "arrayFilters"
put "$C/update/{_id: 1, grades: 70}" '{$set: {"grades.$": 71}}'
expect_eq "$(doc 1 .grades)" '[81,96,71]' "positional \$"

step "errors change nothing and say why"
before=$(cat "$C/2.json")
bad "$C/update/{_id: 2}" '{$inc: {name: 1}}'
expect_eq "$(cat "$C/2.json")" "$before" "a failed \$inc changes nothing"
lasterr | grep -q "update/{_id: 2}" || fail "the error does not name the path: $(lasterr)"
bad "$C/update/{_id: 2}" '{$set: {_id: 9}}'
lasterr | grep -qi "immutable" || fail "_id change: $(lasterr)"
bad "$C/update/{_id: 2}" '{$set: {a: 1}, $unset: {a: ""}}'
lasterr | grep -qi "conflict" || fail "conflict: $(lasterr)"
bad "$C/update/{_id: 2}" '{$sett: {a: 1}}'
lasterr | grep -q "sett" || fail "unknown operator: $(lasterr)"
bad "$C/update/{_id: 2}" 'not json'
bad "$C/update/{age: {\$gtx: 1}}" '{$set: {a: 1}}'
lasterr | grep -q 'gtx' || fail "bad filter: $(lasterr)"
bad "$C/update/{}?multi=maybe" '{$set: {a: 1}}'
bad "$C/update/{}?multi=true" '{"a": 1}'
expect_eq "$(cat "$C/2.json")" "$before" "still unchanged after every error"
expect_eq "$(req "$C/update/{_id: 2}" '{$inc: {name: 1}}' 2>/dev/null | jq -r .ok)" "0" "the error result on the descriptor"

step "delete/<filter>: deleteMany, justOne, findOneAndDelete"
cat > "$C/.insert" <<'DOCS'
{"_id": 10, "kind": "tmp"}
{"_id": 11, "kind": "tmp"}
{"_id": 12, "kind": "tmp"}
DOCS
expect_eq "$(req "$C/delete/{kind: 'tmp'}?justOne=true" 'x')" '{"acknowledged": true, "deletedCount": 1}' "deleteOne"
[ ! -e "$C/10.json" ] || fail "10.json still there"
echo '{"justOne": true}' > "$C/delete/{kind: 'tmp'}"
expect_eq "$(cat "$C/query/{kind: 'tmp'}?count=1")" "1" "justOne in the request"
expect_eq "$(req "$C/delete/{kind: 'tmp'}?returnDocument=before" 'x' | jq -c .value)" '{"_id":12,"kind":"tmp"}' "findOneAndDelete"
expect_eq "$(cat "$C/query/{kind: 'tmp'}?count=1")" "0" "all deleted"

step ".bulk: ordered stops at the first error, unordered goes on, atomic is all or nothing"
r=$(req "$C/.bulk" '{"insertOne": {"document": {"_id": 20}}}
{"updateOne": {"filter": {"_id": 20}, "update": {"$set": {"v": 1}}}}
{"insertOne": {"document": {"_id": 20}}}
{"insertOne": {"document": {"_id": 21}}}')
expect_eq "$(jq -c '[.insertedCount, .modifiedCount, (.writeErrors | map([.index, .code]))]' <<<"$r")" \
	'[1,1,[[2,11000]]]' "ordered result"
[ ! -e "$C/21.json" ] || fail "ordered bulk went past its error"
r=$(req "$C/.bulk?ordered=false" '{"insertOne": {"document": {"_id": 20}}}
{"insertOne": {"document": {"_id": 21}}}
{"deleteOne": {"filter": {"_id": 20}}}')
expect_eq "$(jq -c '[.insertedCount, .deletedCount, (.writeErrors | map(.index))]' <<<"$r")" \
	'[1,1,[0]]' "unordered result"
[ -e "$C/21.json" ] && [ ! -e "$C/20.json" ] || fail "unordered bulk did not go on"
r=$(req "$C/.bulk?atomic=true" '{"insertOne": {"document": {"_id": 22}}}
{"updateMany": {"filter": {}, "update": {"$set": {"touched": true}}}}
{"insertOne": {"document": {"_id": 21}}}')
expect_eq "$(jq -c '[.insertedCount, .modifiedCount, (.writeErrors | map(.index))]' <<<"$r")" \
	'[0,0,[2]]' "atomic result"
[ ! -e "$C/22.json" ] || fail "an atomic bulk with an error kept its insert"
expect_eq "$(cat "$C/query/{touched: true}?count=1")" "0" "an atomic bulk with an error kept its update"
bad "$C/.bulk" '{"insertOne": {"document": {"_id": 23}}}
{"explode": {}}'
lasterr | grep -q "explode" || fail "unknown bulk operation: $(lasterr)"
[ -e "$C/23.json" ] || fail "the operation before the bad one is kept (ordered, not atomic)"

step "fsync applies a .bulk, a write path or an .insert before the close, with its status"
# what a network filesystem between (sshfs) needs: it drops a close's status and closes
# after the writer's close returned, but passes an fsync's on
expect_eq "$(python3 - "$C" << 'EOF'
import os, sys
c = sys.argv[1]
out = []
def fsync_then_look(path, text, look):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    except OSError as e:
        out.append("write: " + os.strerror(e.errno))
    try:
        os.fsync(fd)
        out.append("ok")
    except OSError as e:
        out.append(os.strerror(e.errno))
    out.append(str(os.path.exists(os.path.join(c, look))))  # before the close
    try:
        os.close(fd)
        out.append("closed")
    except OSError as e:
        out.append("close: " + os.strerror(e.errno))
fsync_then_look(c + "/.bulk", '{"insertOne": {"document": {"_id": 30}}}\n', "30.json")
fsync_then_look(c + "/.bulk", '{"insertOne": {"document": {"_id": 30}}}\n', "30.json")
fsync_then_look(c + "/.insert", '{"_id": 31}\n', "31.json")
fsync_then_look(c + "/.insert", '{"_id": 31}\n', "31.json")
fsync_then_look(c + "/update/{_id: 31}", '{"$set": {"f": 1}}', "31.json")
fsync_then_look(c + "/update/{_id: 31}", '{"$bad": {"f": 1}}', "31.json")
print(" ".join(out))
EOF
)" "ok True closed File exists True close: File exists ok True closed write: File exists File exists True close: File exists ok True closed write: Invalid argument Invalid argument True close: Invalid argument" \
	"fsync results (the second .bulk and .insert repeat _id 30 and 31; \$bad is refused at the write)"
expect_eq "$(jq -c . "$C/31.json")" '{"_id":31,"f":1}' "the update applied at the fsync, once"
grep -q "operation 0: duplicate _id 30" "$MNT/.docfs/errors" || fail "the bulk refused at the fsync is not in /.docfs/errors"
rm "$C/30.json" "$C/31.json"

step "docfs update / delete / bulk"
"$DOCFS" update "$STORE" shop.users '{_id: 21}' '{$set: {cli: true}}' > "$T/out"
expect_eq "$(jq -r '.modifiedCount' "$T/out")" "1" "docfs update"
"$DOCFS" update "$STORE" shop.users '{_id: 21}' '{$inc: {n: 5}}' --return after > "$T/out"
expect_eq "$(jq -c .value.n "$T/out")" "5" "docfs update --return after"
printf '%s\n' '{"deleteOne": {"filter": {"_id": 23}}}' | "$DOCFS" bulk "$STORE" shop.users > "$T/out"
expect_eq "$(jq -r '.deletedCount' "$T/out")" "1" "docfs bulk"
"$DOCFS" delete "$STORE" shop.users '{_id: 21}' --one > "$T/out"
expect_eq "$(jq -r '.deletedCount' "$T/out")" "1" "docfs delete"
if "$DOCFS" update "$STORE" shop.users '{_id: 1}' '{$inc: {name: 1}}' > "$T/out" 2> "$T/err"; then
	fail "docfs update of a bad \$inc exited 0"
fi
grep -q "docfs update:" "$T/err" || fail "docfs update error: $(cat "$T/err")"
for _ in $(seq 1 50); do [ ! -e "$C/21.json" ] && break; sleep 0.1; done
[ ! -e "$C/21.json" ] || fail "the CLI's delete did not show in the mount"

step "8 concurrent upserts of one key make one document"
for i in $(seq 1 8); do
	put "$C/update/{email: 'x@y'}?upsert=true" "{\$inc: {hits: 1}}" &
done
wait
expect_eq "$(cat "$C/query/{email: 'x@y'}?count=1")" "1" "one upserted document"
expect_eq "$(cat "$C/query/{email: 'x@y'}" | jq .hits)" "8" "every upsert counted"

step "a findAndModify counter from 8 concurrent scripts: no gaps, no duplicates"
mkdir "$MNT/shop/counters"
next_id() {
	req "$MNT/shop/counters/update/{_id: 'order'}?upsert=true&returnDocument=after" \
		'{$inc: {seq: 1}}' | jq -r .value.seq
}
for w in $(seq 1 8); do
	(for _ in $(seq 1 25); do next_id; done > "$T/ids.$w") &
done
wait
expect_eq "$(cat "$T"/ids.* | sort -n | tr '\n' ' ')" "$(seq 1 200 | tr '\n' ' ')" "counter values"

# each writer: PUTS separate requests, then BULK more in one .bulk: every one an updateOne
# (fewer in the sanitizer build: time)
if [ -n "${DOCFS_SANITIZED:-}" ]; then PUTS=50 BULK=450; else PUTS=125 BULK=1125; fi
TOTAL=$((8 * (PUTS + BULK)))
step "\$inc from 8 writers, $TOTAL in total, on one document"
echo '{"_id": "c", "n": 0}' > "$MNT/shop/counters/c.json"
for w in $(seq 1 8); do
	(
		for _ in $(seq 1 "$PUTS"); do put "$MNT/shop/counters/update/{_id: 'c'}" '{$inc: {n: 1}}'; done
		for _ in $(seq 1 "$BULK"); do echo '{"updateOne": {"filter": {"_id": "c"}, "update": {"$inc": {"n": 1}}}}'; done |
			"$DOCFS" bulk "$STORE" shop.counters > /dev/null
	) &
done
wait
for _ in $(seq 1 300); do [ "$(jq .n "$MNT/shop/counters/c.json")" = "$TOTAL" ] && break; sleep 0.1; done
expect_eq "$(jq .n "$MNT/shop/counters/c.json")" "$TOTAL" "\$inc total"

"$DOCFS" check "$STORE" > /dev/null || fail "docfs check after the writes"
echo "ok"
