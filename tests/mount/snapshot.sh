#!/usr/bin/env bash
# snapshot.sh - git snapshots end to end: snapshot, change documents through the mount
# (insert, update, delete, rename), snapshot again; plain git sees exactly those changes;
# /.snapshots serves the same bytes as `git show`; restore brings the first state back byte
# for byte (also --into another collection, and --force over an existing one); errors.
. "$(dirname "$0")/lib.sh"
mount_docfs
C=$MNT/shop/users
REPO=$STORE/snapshots.git
mkdir -p "$C" "$MNT/shop/orders"
printf '%s\n' '{"_id": "a", "n": 1}' '{"_id": "b", "n": 2}' '{"_id": "c", "n": 3}' \
	'{"_id": "d", "n": 4, "when": {"$date": "2020-01-01T00:00:00Z"}}' > "$C/.insert"
echo '{"_id": 1, "total": 9.5}' > "$MNT/shop/orders/1.json"
export GIT_AUTHOR_NAME="Test Author" GIT_AUTHOR_EMAIL=author@example.com

step "a first snapshot is a real commit with <db>/<coll>/<name>.json blobs"
"$DOCFS" snapshot "$STORE" shop -m "first state" --tag first > "$T/out" || fail "snapshot: $(cat "$T/out")"
expect_eq "$(git -C "$REPO" ls-tree -r --name-only first | tr '\n' ' ')" \
	"shop/orders/.attrs.json shop/orders/.indexes.json shop/orders/1.json shop/users/.attrs.json shop/users/.indexes.json shop/users/a.json shop/users/b.json shop/users/c.json shop/users/d.json " "tree of the first snapshot"
for f in a b c d; do
	cmp -s <(git -C "$REPO" show "first:shop/users/$f.json") "$C/$f.json" || fail "blob $f.json differs from the mount"
done
expect_eq "$(git -C "$REPO" log -1 --format='%an <%ae> %s' first)" "Test Author <author@example.com> first state" "author and message"

step "change through the mount: insert, update, delete, rename"
echo '{"n": 5}' > "$C/e.json"
sed -i 's/"n": 2/"n": 20/' "$C/b.json"
rm "$C/c.json"
mv "$C/d.json" "$C/dd.json"
"$DOCFS" snapshot "$STORE" shop.users -m "second state" --tag second > "$T/out" || fail "snapshot 2: $(cat "$T/out")"
expect_eq "$(git -C "$REPO" diff --no-renames --name-status first second | tr '\t\n' '  ')" \
	"M shop/users/b.json D shop/users/c.json D shop/users/d.json A shop/users/dd.json A shop/users/e.json " "git diff first second"
expect_eq "$(git -C "$REPO" diff --no-renames --stat first second | tail -n 1 | sed 's/^ *//')" \
	"5 files changed, 10 insertions(+), 10 deletions(-)" "git diff --stat"
expect_eq "$(git -C "$REPO" ls-tree --name-only second shop/orders/ | tr '\n' ' ')" \
	"shop/orders/.attrs.json shop/orders/.indexes.json shop/orders/1.json " "a one-collection snapshot keeps the others"
grep -q "(3 written, 1 reused" "$T/out" || fail "the second snapshot should render only b, dd and e: $(cat "$T/out")"

step "an unchanged collection reuses its tree"
"$DOCFS" snapshot "$STORE" shop -m "third" > "$T/out" || fail "snapshot 3"
expect_eq "$(git -C "$REPO" rev-parse second:shop/users)" "$(git -C "$REPO" rev-parse main:shop/users)" "tree of an unchanged collection"
grep -q "2 collections unchanged" "$T/out" || fail "unchanged collections not reused: $(cat "$T/out")"

step "docfs snapshots lists them, newest first"
"$DOCFS" snapshots "$STORE" > "$T/list" || fail "snapshots"
expect_eq "$(wc -l < "$T/list")" "3" "three snapshots"
head -n 1 "$T/list" | grep -q "third" || fail "newest first: $(cat "$T/list")"
grep "first state" "$T/list" | grep -q "first" || fail "the tag shows: $(cat "$T/list")"

step "/.snapshots browses branches, tags, commit ids and main~N read-only"
expect_eq "$(ls "$MNT/.snapshots" | tr '\n' ' ')" "first main second " "ls /.snapshots"
for ref in first second main~1 "$(git -C "$REPO" rev-parse --short=8 first)" "$(git -C "$REPO" rev-parse first)"; do
	f="$MNT/.snapshots/$ref/shop/users/b.json"
	cmp -s "$f" <(git -C "$REPO" show "$ref:shop/users/b.json") || fail "$ref: b.json differs from git show"
done
expect_eq "$(ls "$MNT/.snapshots/first/shop/users" | tr '\n' ' ')" "a.json b.json c.json d.json " "ls of a snapshot"
expect_eq "$(find "$MNT/.snapshots/second/shop" -type f | wc -l)" "9" "find in a snapshot (and two .attrs.json)"
expect_fail "snapshots are read-only" cp "$C/a.json" "$MNT/.snapshots/first/shop/users/x.json"
expect_fail "a missing ref" ls "$MNT/.snapshots/nosuchref"

step "restore --into brings the first state back byte for byte"
"$DOCFS" restore "$STORE" first shop.users --into shop.restored > "$T/out" || fail "restore: $(cat "$T/out")"
expect_eq "$(ls "$MNT/shop/restored" | grep '\.json$' | tr '\n' ' ')" "a.json b.json c.json d.json " "restored names"
for f in a b c d; do
	cmp -s "$MNT/shop/restored/$f.json" "$MNT/.snapshots/first/shop/users/$f.json" || fail "restored $f.json differs"
done

step "restore over an existing collection needs --force"
expect_fail "restore over users without --force" "$DOCFS" restore "$STORE" first shop.users
expect_eq "$(ls "$C" | grep '\.json$' | tr '\n' ' ')" "a.json b.json dd.json e.json " "users untouched by the refused restore"
"$DOCFS" restore "$STORE" first shop.users --force > /dev/null || fail "restore --force"
# The mount sees another process's change within a notifier pass (100 ms here): wait up to
# 3 s (a slow sanitizer build), then compare.
for _ in $(seq 1 30); do
	[ "$(ls "$C" | grep '\.json$' | tr '\n' ' ')" == "a.json b.json c.json d.json " ] && break
	sleep 0.1
done
expect_eq "$(ls "$C" | grep '\.json$' | tr '\n' ' ')" "a.json b.json c.json d.json " "users after restore --force"
cmp -s "$C/b.json" <(git -C "$REPO" show first:shop/users/b.json) || fail "b.json after restore --force"

step "a plain git clone, log -p"
git clone -q "$REPO" "$T/clone" || fail "git clone"
[ -f "$T/clone/shop/users/dd.json" ] || fail "clone has no checkout of main"
git -C "$T/clone" log -p --format=%s > "$T/logp" || fail "git log -p"
grep -q '^+  "n": 20' "$T/logp" || fail "git log -p does not show the update of b.json"

step "errors: missing ref, not a repository, existing tag"
expect_fail "restore from a missing ref" "$DOCFS" restore "$STORE" nosuch shop.users
mkdir -p "$T/notgit"
expect_fail "snapshot into a non-repository" "$DOCFS" snapshot "$STORE" shop --repo "$T/notgit"
msg=$("$DOCFS" snapshot "$STORE" shop --repo "$T/notgit" 2>&1 || true)
case "$msg" in *"not a git repository"*) ;; *) fail "message for a non-repository: $msg" ;; esac
expect_fail "a tag that exists" "$DOCFS" snapshot "$STORE" shop --tag first
expect_eq "$(git -C "$REPO" rev-list --count main)" "3" "no commit made by the failed snapshots"

step "the profiler's system.profile stays out of snapshots"
echo 2 > "$MNT/shop/.profile"
cat "$MNT/shop/users/query/{}" > /dev/null
echo 0 > "$MNT/shop/.profile"
[ -d "$MNT/shop/system.profile" ] || fail "the profiler wrote no system.profile"
"$DOCFS" snapshot "$STORE" shop -m "with a profile" > "$T/out" || fail "snapshot: $(cat "$T/out")"
if git -C "$REPO" ls-tree -r --name-only main | grep -q system.profile; then
	fail "system.profile is in the snapshot"
fi
echo ok
