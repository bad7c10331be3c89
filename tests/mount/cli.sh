#!/usr/bin/env bash
# cli.sh - the docfs command line next to a live mount: --help, errors for bad commands and
# arguments (exit 1, a message on stderr, nothing on stdout), export (stdout and -o) that
# re-imports to identical files, import that stops at a bad line and keeps what came before,
# CLI changes (import, import --drop) showing in the mount, check on a
# corrupted store, mount of a missing store, generate (bad template, determinism).
. "$(dirname "$0")/lib.sh"
# A command that fails outside a check stops the test with its line and the daemon log.
trap 'fail "line $LINENO: \"$BASH_COMMAND\" exited $?"' ERR
mount_docfs

# expect_usage_error WHAT command... : exit status 1, a message on stderr, nothing on stdout
expect_usage_error() {
	local what=$1 rc=0
	shift
	"$@" > "$T/out" 2> "$T/err" || rc=$?
	expect_eq "$rc" "1" "$what: exit status"
	[ -s "$T/err" ] || fail "$what: no message on stderr"
	[ ! -s "$T/out" ] || fail "$what: wrote to stdout: $(head -c 200 "$T/out")"
}

# wait_for WHAT command... : polls the command until it succeeds. How soon the mount
# notices a CLI's commit is a figure for a benchmark, not a check: the test asks only that
# it comes, and gives up after 30 s.
wait_for() {
	local what=$1
	shift
	for _ in $(seq 1 300); do
		if "$@"; then
			return 0
		fi
		sleep 0.1
	done
	"$@" || fail "$what: not seen in the mount after 30 s"
}

# same_files DIR1 DIR2 : the same document names with the same bytes
same_files() {
	local a b
	a=$(ls "$1" | grep '\.json$' | sort)
	b=$(ls "$2" | grep '\.json$' | sort)
	expect_eq "$b" "$a" "names in $2 vs $1"
	for f in $a; do
		cmp -s "$1/$f" "$2/$f" || fail "$2/$f differs from $1/$f: $(diff "$1/$f" "$2/$f")"
	done
}

step "--help lists every command and exits 0"
"$DOCFS" --help > "$T/out" 2> "$T/err" || fail "docfs --help exited $?"
for c in mount import export check generate snapshot snapshots restore index explain version; do
	grep -qE "^  $c( |$)" "$T/out" || fail "--help does not list '$c'"
done
[ ! -s "$T/err" ] || fail "--help wrote to stderr"

step "bad commands and missing arguments exit 1 with a message on stderr only"
expect_usage_error "no command" "$DOCFS"
expect_usage_error "unknown command" "$DOCFS" frobnicate
grep -q frobnicate "$T/err" || fail "unknown command message does not name it: $(cat "$T/err")"
expect_usage_error "mount without MOUNTPOINT" "$DOCFS" mount "$STORE"
expect_usage_error "mount with a bad option" "$DOCFS" mount --bogus "$STORE" "$MNT"
expect_usage_error "import without DB.COLL" "$DOCFS" import "$STORE"
expect_usage_error "import with a bad namespace" "$DOCFS" import "$STORE" nodot /dev/null
expect_usage_error "import of a missing file" "$DOCFS" import "$STORE" a.b "$T/nonexistent"
expect_usage_error "export without DB.COLL" "$DOCFS" export "$STORE"
expect_usage_error "export of a missing collection" "$DOCFS" export "$STORE" cli.nonexistent
expect_usage_error "check without STORE" "$DOCFS" check
expect_usage_error "check of a missing store" "$DOCFS" check "$T/nonexistent"
expect_usage_error "generate without TEMPLATE" "$DOCFS" generate
expect_usage_error "generate -n not a number" "$DOCFS" generate '{"a": 1}' -n x
[ ! -e "$T/nonexistent" ] || fail "a failed command created $T/nonexistent"

step "documents through the mount"
mkdir "$MNT/cli" "$MNT/cli/src"
S=$MNT/cli/src
printf '%s\n' '{"_id": 1, "i": 5, "l": {"$numberLong": "5"}, "d": 5.0, "dec": {"$numberDecimal": "5.00"}}' > "$S/1.json"
printf '%s\n' '{"_id": "alice", "when": {"$date": "2020-01-01T00:00:00Z"}, "bin": {"$binary": {"base64": "AAE=", "subType": "04"}}, "nested": {"a": [1, [2, {"b": null}]]}}' > "$S/alice.json"
printf '%s\n' '{"_id": {"$oid": "5f0c7b9e8d1c2a3b4c5d6e7f"}, "s": "multi\nline \"quoted\" \u00e9", "re": {"$regularExpression": {"pattern": "a+", "options": "i"}}, "ts": {"$timestamp": {"t": 5, "i": 6}}, "mk": {"$minKey": 1}}' > "$S/5f0c7b9e8d1c2a3b4c5d6e7f.json"
printf '{"k": 1}{"k": 2}{"k": 3}' > "$S/.insert"
expect_eq "$(ls "$S" | grep -c '\.json$')" "6" "documents in cli.src"

step "export prints one line per document, which re-imports to identical files"
"$DOCFS" export "$STORE" cli.src > "$T/export" 2> "$T/err" || fail "export: $(cat "$T/err")"
expect_eq "$(wc -l < "$T/export")" "6" "export lines"
jq -e . "$T/export" > /dev/null || fail "export is not JSON lines: $(cat "$T/export")"
expect_eq "$(jq -r '._id | if type == "object" then .["$oid"] else tostring end' "$T/export" | sort | tr '\n' ' ')" \
	"$(ls "$S" | grep '\.json$' | sed 's/\.json$//' | sort | tr '\n' ' ')" "exported _ids"
grep -qF '"l": {"$numberLong": "5"}' "$T/export" || fail "export lost the int64: $(head -n1 "$T/export")"
"$DOCFS" import "$STORE" cli.dst "$T/export" 2> "$T/err" || fail "re-import: $(cat "$T/err")"
grep -q "^6 documents imported" "$T/err" || fail "import summary: $(cat "$T/err")"
wait_for "cli.dst" test -d "$MNT/cli/dst"
same_files "$S" "$MNT/cli/dst"

step "export -o FILE writes the same lines"
"$DOCFS" export "$STORE" cli.src -o "$T/export2" > "$T/out" 2> "$T/err" || fail "export -o: $(cat "$T/err")"
[ ! -s "$T/out" ] || fail "export -o wrote to stdout"
cmp -s "$T/export" "$T/export2" || fail "export -o differs from export to stdout"
grep -q "6 documents exported" "$T/err" || fail "export -o summary: $(cat "$T/err")"

step "import from standard input"
printf '{"_id": "s1"}\n{"_id": "s2"}\n' | "$DOCFS" import "$STORE" cli.stdin - 2> "$T/err" ||
	fail "import -: $(cat "$T/err")"
wait_for "cli.stdin documents" test -f "$MNT/cli/stdin/s2.json"

step "import of a bad line reports the line number, exits 1, keeps the documents before it"
printf '{"_id": "b1"}\n{"_id": "b2"}\n{"_id": "b3"}\n{"_id": "b4", "x": [1,}\n{"_id": "b5"}\n' > "$T/bad"
rc=0
"$DOCFS" import "$STORE" cli.bad "$T/bad" > "$T/out" 2> "$T/err" || rc=$?
expect_eq "$rc" "1" "import of a bad line: exit status"
grep -q "line 4" "$T/err" || fail "import error does not name line 4: $(cat "$T/err")"
grep -q "3 documents imported before the error" "$T/err" || fail "import error count: $(cat "$T/err")"
wait_for "cli.bad" test -d "$MNT/cli/bad"
expect_eq "$(ls "$MNT/cli/bad" | grep '\.json$' | sort | tr '\n' ' ')" "b1.json b2.json b3.json " \
	"documents kept after a bad line"

step "an import into a collection the mount has cached shows in the mount"
ls -l "$S" > /dev/null
cat "$S/1.json" > /dev/null
printf '{"_id": "new1", "v": 1}\n{"_id": "new2", "v": 2}\n' | "$DOCFS" import "$STORE" cli.src 2> "$T/err" ||
	fail "import into cli.src: $(cat "$T/err")"
wait_for "new1.json in ls" sh -c "ls '$S' | grep -qx new2.json"
wait_for "new1.json by name" test -f "$S/new1.json"
expect_eq "$(jq -c . "$S/new2.json")" '{"_id":"new2","v":2}' "new2.json"
expect_eq "$(ls "$S" | grep -c '\.json$')" "8" "documents in cli.src after the import"

step "an import --drop shows in the mount: old documents gone, same names with new content"
cat "$S/alice.json" "$S/1.json" > /dev/null
size_before=$(stat -c %s "$S/alice.json")
printf '{"_id": "alice", "replaced": true}\n{"_id": 1, "replaced": true}\n{"_id": "fresh"}\n' |
	"$DOCFS" import "$STORE" cli.src --drop 2> "$T/err" || fail "import --drop: $(cat "$T/err")"
wait_for "the dropped documents leave ls" sh -c "! ls '$S' | grep -qx new2.json"
expect_eq "$(ls "$S" | grep '\.json$' | sort | tr '\n' ' ')" "1.json alice.json fresh.json " "ls after --drop"
wait_for "new content of alice.json" sh -c "grep -q replaced '$S/alice.json'"
expect_eq "$(jq -c . "$S/alice.json")" '{"_id":"alice","replaced":true}' "alice.json after --drop"
expect_eq "$(jq -c . "$S/1.json")" '{"_id":1,"replaced":true}' "1.json after --drop"
expect_eq "$(stat -c %s "$S/alice.json")" "$(cat "$S/alice.json" | wc -c)" "size of alice.json after --drop"
[ "$(stat -c %s "$S/alice.json")" != "$size_before" ] || fail "alice.json size unchanged after --drop"
wait_for "new1.json gone after --drop" test ! -e "$S/new1.json"

step "generate: a bad template names the operator; -n 3 --seed 5 is deterministic"
expect_usage_error "generate with an unknown operator" "$DOCFS" generate '{"x": {"$nosuchop": 1}}'
grep -qF '$nosuchop' "$T/err" || fail "generate error does not name the operator: $(cat "$T/err")"
tmpl=$(dirname "$0")/../../examples/users.template.json
"$DOCFS" generate "$tmpl" -n 3 --seed 5 > "$T/g1" || fail "generate"
"$DOCFS" generate "$tmpl" -n 3 --seed 5 > "$T/g2" || fail "generate (again)"
"$DOCFS" generate "$tmpl" -n 3 --seed 6 > "$T/g3" || fail "generate --seed 6"
expect_eq "$(wc -l < "$T/g1")" "3" "generated lines"
expect_eq "$(jq -r '.user.name.first | type' "$T/g1" | sort -u)" "string" "generated user.name.first"
expect_eq "$(jq -r '.user.address.zip_code | . >= 10000 and . <= 99999' "$T/g1" | sort -u)" "true" \
	"generated zip codes in [10000, 99999]"
cmp -s "$T/g1" "$T/g2" || fail "generate -n 3 --seed 5 differs between runs"
cmp -s "$T/g1" "$T/g3" && fail "generate --seed 5 and --seed 6 are identical"
expect_eq "$("$DOCFS" generate '{"a": 1}' -n 2 | jq -c 'del(._id)' | tr '\n' '|')" \
	'{"a":1}|{"a":1}|' "generate of a constant template"

step "mount of a missing store exits 1 with a message"
mkdir "$T/mnt2"
rc=0
"$DOCFS" mount "$T/nostore" "$T/mnt2" > "$T/out" 2> "$T/err" || rc=$?
if mountpoint -q "$T/mnt2"; then
	fusermount3 -u "$T/mnt2"
	fail "mounted a missing store"
fi
expect_eq "$rc" "1" "mount of a missing store: exit status"
grep -q "nostore" "$T/err" || fail "mount error does not name the store: $(cat "$T/err")"
[ ! -e "$T/nostore" ] || fail "mount created the missing store"

step "docfs check on a store with a corrupted document exits non-zero naming the problem"
"$DOCFS" check "$STORE" > /dev/null || fail "docfs check before the corruption"
unmount_docfs
sqlite3 "$STORE/cli.db" "UPDATE docs SET size = size + 1 WHERE id = (SELECT min(id) FROM docs)"
rc=0
"$DOCFS" check "$STORE" > "$T/out" 2> "$T/err" || rc=$?
[ "$rc" -ne 0 ] || fail "docfs check passed a corrupted store: $(cat "$T/out")"
grep -q "size" "$T/err" || fail "docfs check does not name the size problem: $(cat "$T/err")"
grep -q "cli" "$T/err" || fail "docfs check does not name the database: $(cat "$T/err")"
grep -q "sound" "$T/out" && fail "docfs check says sound: $(cat "$T/out")"
sqlite3 "$STORE/cli.db" "UPDATE docs SET size = size - 1 WHERE id = (SELECT min(id) FROM docs)"
"$DOCFS" check "$STORE" > /dev/null || fail "docfs check after repairing the corruption"
echo "ok"
