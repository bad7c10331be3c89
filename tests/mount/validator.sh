#!/usr/bin/env bash
# validator.sh - a collection's validator through the mount (store/validator.c): set by
# writing .options, shown there, and the same rule on every write path of the files: a
# document file written with echo (the write itself fails, EINVAL, one line in
# /.docfs/errors), sed -i, .insert, update/ and .bulk refuse what does not match and change
# nothing; validationLevel moderate lets an invalid document be updated, validationAction
# warn lets everything through and logs it, "validator": {} removes it (off is in
# tests/wire/cmds_test.py).
. "$(dirname "$0")/lib.sh"
mount_docfs
C=$MNT/shop/items
mkdir -p "$C"
echo '{"_id": 1, "qty": 5}' > "$C/1.json"
echo '{"_id": 2, "qty": -1}' > "$C/2.json" # invalid once the validator is set: kept

step ".options sets and shows the validator"
echo '{validator: {qty: {$gte: 0}}}' > "$C/.options" || fail "writing the validator"
expect_eq "$(jq -c . "$C/.options")" \
	'{"validator":{"qty":{"$gte":0}},"validationLevel":"strict","validationAction":"error"}' \
	".options after setting a validator"
ls -A "$C" | grep -qx .options || fail ".options is not listed once there is a validator"

# refused WHAT PATH TEXT: `echo TEXT > PATH` fails its write, EINVAL, with the message.
refused() {
	local mark
	mark=$(errors_mark)
	if bash -c 'echo "$1" > "$2"' sh "$3" "$2" 2> "$T/echo.err"; then
		fail "$1: echo succeeded"
	fi
	grep -q "Invalid argument" "$T/echo.err" || fail "$1: not EINVAL: $(cat "$T/echo.err")"
	errors_since "$MNT/.docfs/errors" "$mark" | grep -q "Document failed validation" ||
		fail "$1: no message in /.docfs/errors: $(errors_since "$MNT/.docfs/errors" "$mark")"
}

step "every write path refuses an invalid document"
refused "a new document file" "$C/3.json" '{"qty": -3}'
[ ! -e "$C/3.json" ] || fail "3.json exists after its refused write"
refused "rewriting 1.json" "$C/1.json" '{"_id": 1, "qty": -7}'
expect_eq "$(jq -c . "$C/1.json")" '{"_id":1,"qty":5}' "1.json after its refused rewrite"
expect_fail "sed -i making 1.json invalid" sed -i 's/5/-5/' "$C/1.json"
expect_eq "$(jq -c . "$C/1.json")" '{"_id":1,"qty":5}' "1.json after sed -i"
mark=$(errors_mark)
printf '{"_id": 4, "qty": 1}\n{"_id": 5, "qty": -1}\n' > "$C/.insert" 2>/dev/null &&
	fail ".insert of an invalid document succeeded"
errors_since "$MNT/.docfs/errors" "$mark" | grep -q "Document failed validation" ||
	fail ".insert: no message"
expect_eq "$(ls "$C" | grep -c '^5\.json$')" "0" ".insert stored the invalid document"
mark=$(errors_mark)
echo '{$inc: {qty: -10}}' > "$C/update/{_id: 1}" 2>/dev/null && fail "update/ succeeded"
expect_eq "$(jq -c .qty "$C/1.json")" "5" "update/ made 1.json invalid"
errors_since "$MNT/.docfs/errors" "$mark" | grep -q "Document failed validation" ||
	fail "update/: no message"
mark=$(errors_mark)
echo '{insertOne: {document: {_id: 6, qty: -2}}}' > "$C/.bulk" 2>/dev/null || true
[ ! -e "$C/6.json" ] || fail ".bulk stored the invalid document"
echo '{"_id": 7, "qty": 0}' > "$C/7.json" || fail "a valid document refused"
echo '{$inc: {qty: -1}}' > "$C/update/{_id: 2}" 2>/dev/null && fail "strict: update/ of 2"
expect_eq "$(jq -c .qty "$C/2.json")" "-1" "strict: an invalid document cannot be updated to another invalid one"

step "moderate, off, warn, removal"
echo '{validator: {qty: {$gte: 0}}, validationLevel: "moderate"}' > "$C/.options" || fail "moderate"
echo '{$inc: {qty: -1}}' > "$C/update/{_id: 2}" || fail "moderate: updating an invalid document"
expect_eq "$(jq -c .qty "$C/2.json")" "-2" "moderate lets an invalid document be updated"
refused "moderate still checks new documents" "$C/8.json" '{"qty": -8}'
echo '{validationLevel: "strict", validationAction: "warn"}' > "$C/.options" || fail "warn"
mark=$(errors_mark)
echo '{"qty": -9}' > "$C/9.json" || fail "warn refused a document"
errors_since "$MNT/.docfs/errors" "$mark" | grep -q "Document would fail validation: collection 'shop.items' _id 9" ||
	fail "warn: no log line: $(errors_since "$MNT/.docfs/errors" "$mark")"
echo '{validator: {}}' > "$C/.options" || fail "removing the validator"
echo '{"qty": -10}' > "$C/10.json" || fail "a document refused after the validator went"
bad_opts() {
	if bash -c 'echo "$1" > "$2"' sh "$2" "$C/.options" 2>/dev/null; then
		fail "$1: accepted"
	fi
}
bad_opts "an unknown level" '{validationLevel: "loose"}'
bad_opts "a validator that does not compile" '{validator: {qty: {$bogus: 1}}}'
expect_eq "$(jq -c .validationAction "$C/.options")" '"warn"' "refused options changed nothing"

unmount_docfs
"$DOCFS" check "$STORE" > /dev/null || fail "docfs check after validated writes"
echo ok
