#!/usr/bin/env bash
# basic.sh - databases, collections and documents through the mount with plain tools:
# mkdir, echo/cat, exact sizes, ls -l, grep -rl, find -name, cp, mv (changes _id), rm.
. "$(dirname "$0")/lib.sh"
mount_docfs

step "mkdir database and collection"
mkdir "$MNT/shop"
mkdir "$MNT/shop/users"
[ -d "$MNT/shop/users" ] || fail "collection directory missing"
expect_eq "$(ls "$MNT")" "shop" "ls /"
expect_eq "$(ls "$MNT/shop")" "users" "ls /shop"

step "echo a document, cat it back pretty-printed with _id from the name"
echo '{"name": "Alice", "age": 30}' > "$MNT/shop/users/alice.json"
expected='{
  "_id": "alice",
  "name": "Alice",
  "age": 30
}'
expect_eq "$(cat "$MNT/shop/users/alice.json")" "$expected" "cat alice.json"

step "exact sizes"
echo '{"_id": 2, "city": "Beijing", "tags": ["a", "b"], "n": 1.5}' > "$MNT/shop/users/2.json"
echo '{"city": "ShenZhen", "when": {"$date": "2014-01-01T00:00:00Z"}}' > "$MNT/shop/users/bob.json"
for f in "$MNT"/shop/users/*.json; do
	expect_eq "$(stat -c %s "$f")" "$(wc -c < "$f")" "stat size of $f"
done

step "ls -l lists the documents and no junk"
expect_eq "$(ls "$MNT/shop/users" | sort | tr '\n' ' ')" "2.json aggregate alice.json bob.json delete explain query update " "ls"
expect_eq "$(ls -l "$MNT/shop/users" | grep -c '^-')" "3" "ls -l regular files"

step "grep -rl and find -name"
expect_eq "$(grep -rl Beijing "$MNT/shop")" "$MNT/shop/users/2.json" "grep -rl"
expect_eq "$(find "$MNT/shop" -name 'b*.json')" "$MNT/shop/users/bob.json" "find -name"

step "cp makes a new document with the new name's _id"
cp "$MNT/shop/users/alice.json" "$T/alice.copy"
sed 's/"_id": "alice"/"_id": "carol"/' "$T/alice.copy" > "$MNT/shop/users/carol.json"
grep -q '"_id": "carol"' "$MNT/shop/users/carol.json" || fail "carol.json _id"
expect_fail "cp with a differing _id" cp "$MNT/shop/users/alice.json" "$MNT/shop/users/dave.json"
[ ! -e "$MNT/shop/users/dave.json" ] || fail "dave.json exists after a failed cp"

step "mv renames and changes _id, keeping the inode"
ino=$(stat -c %i "$MNT/shop/users/bob.json")
mv "$MNT/shop/users/bob.json" "$MNT/shop/users/robert.json"
grep -q '"_id": "robert"' "$MNT/shop/users/robert.json" || fail "robert.json _id"
expect_eq "$(stat -c %i "$MNT/shop/users/robert.json")" "$ino" "inode after mv"
[ ! -e "$MNT/shop/users/bob.json" ] || fail "bob.json still there"

step "rm deletes"
rm "$MNT/shop/users/robert.json"
expect_eq "$(ls "$MNT/shop/users" | grep -c "\.json$")" "3" "count after rm"

step "rmdir refuses a non-empty collection, then drops an empty one"
expect_fail "rmdir non-empty" rmdir "$MNT/shop/users"
mkdir "$MNT/shop/empty"
rmdir "$MNT/shop/empty"
[ ! -e "$MNT/shop/empty" ] || fail "empty collection still there"

step "/.docfs/status names the transport: /dev/fuse, or io_uring under -o uring"
st=$(cat "$MNT/.docfs/status")
want='"transport": "/dev/fuse"'
[ -z "$URING_WAS" ] || want='"transport": "io_uring"'
case $st in
*"$want"*) ;;
*) fail "/.docfs/status: expected $want in: $st" ;;
esac
jq -e '[.queues, .queuesLive, .ringRequests, .starvedBoosts] | map(type) == ["number", "number", "number", "number"]' \
	<<< "$st" > /dev/null || fail "/.docfs/status is not the JSON expected: $st"

step "docfs check passes while mounted"
"$DOCFS" check "$STORE" >/dev/null || fail "docfs check"

step "a second mount on the same directory is refused, naming the first"
if "$DOCFS" mount -o "log=$T/log2" "$STORE" "$MNT" 2> "$T/second"; then
	fail "a second docfs mount stacked on $MNT"
fi
grep -qF "is a docfs mount already (of $(realpath "$STORE"))" "$T/second" ||
	fail "the refusal does not name the first mount: $(cat "$T/second")"
expect_eq "$(grep -c " $MNT fuse.docfs " /proc/self/mounts)" "1" "docfs mounts on $MNT"
echo "ok"
