#!/usr/bin/env bash
# insert.sh - the semantics of <coll>/.insert: one document, many concatenated, one per line,
# pretty multi-line documents, Extended JSON and mongo shell literals; an ObjectId for a
# missing _id; ordered semantics (a bad document fails the write or the close with EINVAL,
# the ones before it are committed, the ones after it are not, /.docfs/errors names the
# document and its line); a duplicate _id fails with EEXIST; input truncated at the end
# fails at close.
. "$(dirname "$0")/lib.sh"
# A command that fails outside a check stops the test with its line and the daemon log.
trap 'fail "line $LINENO: \"$BASH_COMMAND\" exited $?"' ERR
mount_docfs

# put FILE < data : writes stdin to FILE (open O_WRONLY|O_CREAT|O_TRUNC, write all, close)
# and prints "ok", or the failing call and errno name ("write EINVAL", "close EEXIST").
# Unlike `printf > FILE` in bash, it sees an error returned by close().
put() {
	python3 -c '
import errno, os, sys
data = sys.stdin.buffer.read()
try:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
except OSError as e:
    print("open", errno.errorcode[e.errno]); sys.exit(0)
step = "write"
try:
    off = 0
    while off < len(data):
        off += os.write(fd, data[off:])
    step = "close"
    os.close(fd)
except OSError as e:
    print(step, errno.errorcode[e.errno])
    if step == "write":
        try:
            os.close(fd)
        except OSError:
            pass
    sys.exit(0)
print("ok")' "$1"
}

# new_errors : the lines of /.docfs/errors added since the last call (the count of lines
# seen is kept in a file: the function runs in a command substitution's subshell)
new_errors() {
	local all seen
	all=$(cat "$MNT/.docfs/errors")
	seen=$(cat "$T/errlines" 2> /dev/null || echo 0)
	tail -n +$((seen + 1)) <<< "$all"
	printf '%s' "$all" | grep -c '' > "$T/errlines" || true
}

# docs COLL : the document names in a collection, sorted, space separated
docs() {
	ls "$MNT/test/$1" | grep '\.json$' | sort | tr '\n' ' '
}

mkdir "$MNT/test"
for c in one many lines pretty ejson shell noid ordered ordered2 pretty_bad dup trunc; do
	mkdir "$MNT/test/$c"
done
new_errors > /dev/null

step "one document"
expect_eq "$(printf '{"_id": "a", "x": 1}' | put "$MNT/test/one/.insert")" "ok" "insert one"
expect_eq "$(docs one)" "a.json " "ls after one insert"
expect_eq "$(cat "$MNT/test/one/a.json")" '{
  "_id": "a",
  "x": 1
}' "a.json"

step "cat writes .insert and .bulk a MiB at a time (st_blksize): one transaction per MiB"
expect_eq "$(stat -c %o "$MNT/test/one/.insert") $(stat -c %o "$MNT/test/one/.bulk")" \
	"1048576 1048576" "st_blksize of .insert and .bulk"
python3 -c '
for i in range(20000):
    print("{\"_id\": %d, \"pad\": \"%s\"}" % (i, "x" * (i % 300)))' > "$T/big.jsonl"
mkdir "$MNT/test/big"
strace -f -e trace=write -o "$T/cat.strace" cat "$T/big.jsonl" > "$MNT/test/big/.insert"
expect_eq "$(grep -c 'write(1, .*= 1048576$' "$T/cat.strace")" "$(($(stat -c %s "$T/big.jsonl") / 1048576))" \
	"cat's full writes are 1 MiB each"
expect_eq "$(ls "$MNT/test/big" | grep -c '\.json$')" "20000" "every document of a 3 MiB cat"

step "many concatenated documents, no separator"
expect_eq "$(printf '{"_id":1,"a":1}{"_id":2,"a":2}{"_id":3,"a":3}' | put "$MNT/test/many/.insert")" \
	"ok" "insert concatenated"
expect_eq "$(docs many)" "1.json 2.json 3.json " "ls after concatenated insert"
expect_eq "$(jq -c . "$MNT/test/many/2.json")" '{"_id":2,"a":2}' "2.json"

step "one per line, with printf > .insert as a shell user would"
printf '{"_id": "l1", "n": 1}\n{"_id": "l2", "n": 2}\n\n{"_id": "l3", "n": 3}\n' > "$MNT/test/lines/.insert"
expect_eq "$(docs lines)" "l1.json l2.json l3.json " "ls after line insert"
expect_eq "$(jq -c . "$MNT/test/lines/l3.json")" '{"_id":"l3","n":3}' "l3.json"
expect_eq "$(stat -c %s "$MNT/test/lines/.insert")" "0" ".insert stays empty"

step "pretty multi-line documents"
cat > "$T/pretty" <<'EOF'
{
  "_id": "p1",
  "tags": [
    "x",
    "y"
  ],
  "sub": {
    "k": 1
  }
}
{
  "_id": "p2"
}
EOF
expect_eq "$(put "$MNT/test/pretty/.insert" < "$T/pretty")" "ok" "insert pretty"
expect_eq "$(docs pretty)" "p1.json p2.json " "ls after pretty insert"
expect_eq "$(jq -c . "$MNT/test/pretty/p1.json")" '{"_id":"p1","tags":["x","y"],"sub":{"k":1}}' "p1.json"

step "Extended JSON (canonical and relaxed)"
printf '%s\n' '{"_id": {"$oid": "5f0c7b9e8d1c2a3b4c5d6e7f"}, "i": {"$numberInt": "3"}, "l": {"$numberLong": "4"}, "d": {"$numberDouble": "2.0"}, "dec": {"$numberDecimal": "0.1"}, "t": {"$date": {"$numberLong": "1577836800000"}}, "b": {"$binary": {"base64": "AQI=", "subType": "00"}}}' |
	put "$MNT/test/ejson/.insert" > "$T/r"
expect_eq "$(cat "$T/r")" "ok" "insert EJSON"
f=$MNT/test/ejson/5f0c7b9e8d1c2a3b4c5d6e7f.json
[ -f "$f" ] || fail "EJSON document missing: $(docs ejson)"
grep -qx '  "_id": {"$oid": "5f0c7b9e8d1c2a3b4c5d6e7f"},' "$f" || fail "oid _id: $(cat "$f")"
grep -qx '  "i": 3,' "$f" || fail "int32: $(cat "$f")"
grep -qx '  "l": {"$numberLong": "4"},' "$f" || fail "int64: $(cat "$f")"
grep -qx '  "d": 2.0,' "$f" || fail "double: $(cat "$f")"
grep -qx '  "dec": {"$numberDecimal": "0.1"},' "$f" || fail "decimal: $(cat "$f")"
grep -qxE '  "t": \{"\$date": "2020-01-01T00:00:00(\.000)?Z"\},' "$f" || fail "date: $(cat "$f")"
grep -qx '  "b": {"$binary": {"base64": "AQI=", "subType": "00"}}' "$f" || fail "binary: $(cat "$f")"

step "mongo shell literals"
printf '%s\n' '{_id: NumberLong(7), d: ISODate("2020-01-01"), s: '"'single'"', i: NumberInt(9), o: ObjectId("65a1b2c3d4e5f60718293a4b"), dec: NumberDecimal("2.50"),}' |
	put "$MNT/test/shell/.insert" > "$T/r"
expect_eq "$(cat "$T/r")" "ok" "insert shell literals"
f=$MNT/test/shell/7.json
[ -f "$f" ] || fail "7.json missing: $(docs shell)"
grep -qx '  "_id": {"$numberLong": "7"},' "$f" || fail "NumberLong _id: $(cat "$f")"
grep -qxE '  "d": \{"\$date": "2020-01-01T00:00:00(\.000)?Z"\},' "$f" || fail "ISODate: $(cat "$f")"
grep -qx '  "s": "single",' "$f" || fail "single-quoted string: $(cat "$f")"
grep -qx '  "i": 9,' "$f" || fail "NumberInt: $(cat "$f")"
grep -qx '  "o": {"$oid": "65a1b2c3d4e5f60718293a4b"},' "$f" || fail "ObjectId: $(cat "$f")"
grep -qx '  "dec": {"$numberDecimal": "2.50"}' "$f" || fail "NumberDecimal: $(cat "$f")"

step "a missing _id gets an ObjectId, named by its 24 hex digits"
printf '{"name": "first"}{"name": "second"}\n{"name": "third"}' > "$MNT/test/noid/.insert"
names=$(ls "$MNT/test/noid" | grep "\.json$")
expect_eq "$(grep -c '' <<< "$names")" "3" "documents without _id"
expect_eq "$(grep -cE '^[0-9a-f]{24}\.json$' <<< "$names")" "3" "ObjectId file names: $names"
for n in $names; do
	hex=${n%.json}
	grep -qx "  \"_id\": {\"\$oid\": \"$hex\"}," "$MNT/test/noid/$n" ||
		fail "$n does not hold _id ObjectId $hex: $(cat "$MNT/test/noid/$n")"
done
expect_eq "$(cat "$MNT"/test/noid/*.json | jq -r .name | sort | tr '\n' ' ')" "first second third " \
	"names of the documents without _id"

step "ordered: a syntax error in document 3 (line 3) of 5"
new_errors > /dev/null
printf '{"_id": 1}\n{"_id": 2}\n{"_id": 3, "x": }\n{"_id": 4}\n{"_id": 5}\n' |
	put "$MNT/test/ordered/.insert" > "$T/r"
expect_eq "$(cat "$T/r")" "write EINVAL" "bad document 3 of 5"
expect_eq "$(docs ordered)" "1.json 2.json " "documents committed before the bad one"
errs=$(new_errors)
grep -qF "document 3 (line 3)" <<< "$errs" || fail "/.docfs/errors lacks 'document 3 (line 3)': $errs"
grep -q "\.insert" <<< "$errs" || fail "/.docfs/errors does not name .insert: $errs"
grep -qF "document 3 (line 3): " <<< "$errs" && [ -n "$(grep -F "document 3 (line 3): " <<< "$errs" | sed -n 1p | sed 's/.*document 3 (line 3): //')" ] ||
	fail "/.docfs/errors does not say why: $errs"
grep -qF "document 3 (line 3)" "$T/log" || fail "log lacks 'document 3 (line 3)'"

step "ordered: an invalid document 3 (a \$-prefixed field inside _id) of 5"
printf '{"_id": 1}\n{"_id": 2}\n{"_id": {"$bad": 3}}\n{"_id": 4}\n{"_id": 5}\n' |
	put "$MNT/test/ordered2/.insert" > "$T/r"
expect_eq "$(cat "$T/r")" "write EINVAL" "invalid document 3 of 5"
expect_eq "$(docs ordered2)" "1.json 2.json " "documents committed before the invalid one"
errs=$(new_errors)
grep -F "document 3 (line 3)" <<< "$errs" | grep -qF '$bad' ||
	fail "/.docfs/errors does not say 'document 3 (line 3)' and name '\$bad': $errs"

step "ordered: the line of a bad document after pretty multi-line ones"
{ cat "$T/pretty"; printf '{\n  "_id": "p3",\n  oops\n}\n{"_id": "p4"}\n'; } |
	put "$MNT/test/pretty_bad/.insert" > "$T/r"
expect_eq "$(cat "$T/r")" "write EINVAL" "bad pretty document"
expect_eq "$(docs pretty_bad)" "p1.json p2.json " "documents committed before the bad pretty one"
errs=$(new_errors)
grep -qF "document 3 (line 14)" <<< "$errs" || fail "/.docfs/errors lacks 'document 3 (line 14)': $errs"

step "a duplicate _id fails with EEXIST and says duplicate"
printf '{"_id": "dup", "v": 1}' > "$MNT/test/dup/.insert"
printf '{"_id": "x1"}\n{"_id": "dup", "v": 2}\n{"_id": "x2"}\n' | put "$MNT/test/dup/.insert" > "$T/r"
expect_eq "$(cat "$T/r")" "write EEXIST" "duplicate _id"
expect_eq "$(docs dup)" "dup.json x1.json " "documents after the duplicate"
expect_eq "$(jq -c . "$MNT/test/dup/dup.json")" '{"_id":"dup","v":1}' "the first dup.json is kept"
errs=$(new_errors)
grep -F "document 2 (line 2)" <<< "$errs" | grep -qi "duplicate" ||
	fail "/.docfs/errors does not say 'document 2 (line 2)' ... duplicate: $errs"
out=$(printf '{"_id": "dup"}' 2>&1 > "$MNT/test/dup/.insert") && fail "shell insert of a duplicate succeeded"
grep -q "File exists" <<< "$out" || fail "shell error for a duplicate: $out"

step "a document truncated at the end of the input fails at close"
printf '{"_id": "t1"}\n{"_id": "t2", "x": [1, 2' | put "$MNT/test/trunc/.insert" > "$T/r"
expect_eq "$(cat "$T/r")" "close EINVAL" "truncated last document"
expect_eq "$(docs trunc)" "t1.json " "documents after a truncated input"
errs=$(new_errors)
grep -qF "document 2" <<< "$errs" || fail "/.docfs/errors does not name document 2: $errs"

step "each open of .insert starts afresh; docfs check passes"
printf '{"_id": "t3"}' > "$MNT/test/trunc/.insert"
expect_eq "$(docs trunc)" "t1.json t3.json " "insert after a failed one"

step "what a MongoDB user has: a JSON array, documents separated by commas"
mkdir "$MNT/test/arr" "$MNT/test/commas"
printf '[{"_id": 1}, {"_id": 2},\n {_id: 3}\n]\n' > "$MNT/test/arr/.insert" || fail "a JSON array"
expect_eq "$(docs arr)" "1.json 2.json 3.json " "the array's documents"
echo '{"_id": 1, "a": 1}, {"_id": 2}, {_id: 3}' > "$MNT/test/commas/.insert" || fail "commas"
expect_eq "$(docs commas)" "1.json 2.json 3.json " "the comma-separated documents"
expect_fail "an array then more text" sh -c "echo '[{\"_id\": 4}] {\"_id\": 5}' > '$MNT/test/arr/.insert'"
"$DOCFS" check "$STORE" > /dev/null || fail "docfs check"
echo "ok"
