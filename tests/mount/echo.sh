#!/usr/bin/env bash
# echo.sh - bash's builtin echo ignores close(), so every check that can run before the close
# fails the write() that completes a whole value: a document whose _id differs from its
# name, a unique-key clash with what is committed, a '$' field name inside _id, a bad index spec, bad
# collection options, an invalid saved query (which also leaves no empty .queries/<name>).
# Each fails echo itself, is logged once in /.docfs/errors, and stores nothing.
. "$(dirname "$0")/lib.sh"
mount_docfs
C=$MNT/db/c
mkdir -p "$C"
echo '{"key": {"u": 1}, "unique": true}' > "$C/.indexes/u_1"
echo '{"u": 5}' > "$C/x.json"

# must_fail WHAT TEXT PATH MESSAGE: `echo TEXT > PATH` in bash fails (its own status), the
# message is in /.docfs/errors exactly once, with no other new line.
must_fail() {
	local what=$1 text=$2 path=$3 msg=$4 before after mark
	mark=$(errors_mark)
	before=$(wc -l < "$MNT/.docfs/errors")
	if bash -c 'echo "$1" > "$2"' sh "$text" "$path" 2> "$T/echo.err"; then
		fail "$what: echo succeeded"
	fi
	grep -q "write error" "$T/echo.err" || fail "$what: bash did not report a write error: $(cat "$T/echo.err")"
	after=$(wc -l < "$MNT/.docfs/errors")
	expect_eq "$((after - before))" "1" "$what: lines added to /.docfs/errors"
	errors_since "$MNT/.docfs/errors" "$mark" | grep -qF -- "$msg" ||
		fail "$what: expected '$msg' in /.docfs/errors, got: $(errors_since "$MNT/.docfs/errors" "$mark")"
}

step "documents"
must_fail "_id differs from the name" '{"_id": 9}' "$C/2.json" "_id 9 differs from the file name's _id 2"
[ ! -e "$C/2.json" ] || fail "2.json exists after its refused write"
must_fail "unique key" '{"u": 5}' "$C/21.json" "E11000 duplicate key error collection: db.c index: u_1 dup key: { u: 5 }"
[ ! -e "$C/21.json" ] || fail "21.json exists after its refused write"
must_fail "a \$ field name inside _id" '{"_id": {"$x": 1}}' "$C/a.json" "field name '\$x' at '_id'"
must_fail "rewriting x.json with a different _id" '{"_id": "y", "u": 5}' "$C/x.json" "differs"
expect_eq "$(jq -c . "$C/x.json")" '{"_id":"x","u":5}' "x.json after its refused rewrite"
expect_eq "$(cat "$C/query/{}?count=1")" "1" "documents in the collection"

step "index specs, options, saved queries"
must_fail "index spec" '{key: {price: 1}, bogus: 1}' "$C/.indexes/x" "unknown index option 'bogus'"
expect_eq "$(ls "$C/.indexes" | tr '\n' ' ')" "u_1 " "indexes after the refused spec"
must_fail "collection options" '{viewOn: "a"}' "$C/.options" "unknown collection option 'viewOn'"
must_fail "saved query" '{"filter": {"$gtx": 1}}' "$C/.queries/bad" "unknown top level operator '\$gtx'"
[ ! -e "$C/.queries/bad" ] || fail "an empty .queries/bad was left behind"

step "what succeeds still succeeds, in one write and in many"
bash -c 'echo "{\"u\": 6}" > "$1"' sh "$C/ok.json" || fail "a good document"
/usr/bin/python3 - "$C/big.json" << 'EOF' || fail "a document written in 1-byte writes"
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for b in b'{"u": 7, "s": "a}b", "n": {"m": [1, {"k": "}"}]}}\n':
    os.write(fd, bytes([b]))
os.close(fd)
EOF
expect_eq "$(jq -c .n "$C/big.json")" '{"m":[1,{"k":"}"}]}' "big.json"
bash -c 'echo "{\"filter\": {\"u\": 6}}" > "$1"' sh "$C/.queries/six" || fail "a good saved query"
expect_eq "$(jq -c ._id "$C/query/@six")" '"ok"' "the good saved query"

step "a value cut off at the end can only fail at the close (README: use tee or cat > in scripts)"
before=$(wc -l < "$MNT/.docfs/errors")
bash -c 'echo "{\"u\": " > "$1"' sh "$C/cut.json" && cut_rc=0 || cut_rc=$?
expect_eq "$cut_rc" "0" "echo of a cut document (bash ignores the close)"
[ ! -e "$C/cut.json" ] || fail "cut.json exists"
expect_fail "tee of a cut document" sh -c 'echo "{\"u\": " | tee "$1" > /dev/null' sh "$C/cut.json"
