#!/usr/bin/env bash
# examples/quickstart.sh - from a fresh Debian 12 machine to a mounted document store:
# installs missing packages, builds docfs, generates 100,000 users into test.users, mounts
# the store at ./mnt and shows a few commands. Run it again to remount; the store is kept
# in examples/store (delete that directory to start over).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential pkg-config meson ninja-build libfuse3-dev fuse3 liburing-dev libbson-dev libpcre2-dev
	libsqlite3-dev libgit2-dev libstemmer-dev check sqlite3 jq libzookeeper-mt-dev libssl-dev libicu-dev libmongoc-dev)
missing=()
for p in "${packages[@]}"; do
	dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "== installing ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# mongosh, to show a MongoDB client on the same store (pinned in tests/wire/package-lock.json)
if ! command -v node > /dev/null 2>&1; then
	echo "== installing nodejs and npm"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
if [ ! -x tests/wire/node_modules/.bin/mongosh ]; then
	echo "== installing mongosh (npm ci)"
	npm ci --prefix tests/wire --no-audit --no-fund --loglevel=error >/dev/null
fi

echo "== building"
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null
DOCFS=$PWD/build/docfs
STORE=$PWD/examples/store
MNT=$PWD/mnt
SOCK=$PWD/examples/docfs.sock # the wire protocol's socket: local, so no password
MONGOSH=$PWD/tests/wire/node_modules/.bin/mongosh
URI="mongodb://$(echo "$SOCK" | sed 's|/|%2F|g')/test"

if [ ! -e "$STORE/test.db" ]; then
	echo "== generating 100,000 users into test.users"
	"$DOCFS" generate examples/users.template.json -n 100000 --seed 42 |
		"$DOCFS" import "$STORE" test.users
fi

mkdir -p "$MNT"
if mountpoint -q "$MNT"; then
	fusermount3 -u "$MNT"
fi
echo "== mounting $STORE at ./mnt, serving MongoDB clients on $SOCK"
rm -f "$SOCK"
"$DOCFS" mount -o "listen=$SOCK" "$STORE" "$MNT"

show() {
	echo
	echo "\$ $*"
	bash -c "$*"
}
cd "$MNT"
show 'ls'
show 'ls test'
show "ls test/users | grep -c '\\.json\$'"
first=$(ls -f test/users | grep '\.json$' | sed -n 1p)
show "cat test/users/$first"
show "stat -c '%n %s bytes, inode %i' test/users/$first"
show "grep -l '\"ShenZhen\"' -r test/users | head -n 3"
show "jq -r '.user.name.first' test/users/$first"
show "cat 'test/users/query/{\"user.address.city\": \"Beijing\", \"user.age\": {\$gt: 60}}?count=1'"
show "cat 'test/users/query/{\"user.gender\": \"female\"}?sort={\"user.age\": -1, \"user.name.last\": 1}&limit=3&projection={user.name: 1, user.age: 1, _id: 0}'"
show "cat 'test/users/query/{\"user.age\": {\$lt: 1}}?format=ids' | head -n 3"
show "cat 'test/users/query/{\"user.age\": {\$gtx: 1}}'; tail -n 1 .docfs/errors"
show "cat 'test/users/explain/{\"user.age\": {\$gte: 42, \$lt: 43}}?verbosity=executionStats&format=tree'"
show "ls test/users/.indexes; [ -e test/users/.indexes/user.age_1 ] || echo '{key: {\"user.age\": 1}}' > test/users/.indexes/user.age_1; jq -c '{name, key, stats: {entries: .stats.entries}}' test/users/.indexes/user.age_1"
show "cat 'test/users/explain/{\"user.age\": {\$gte: 42, \$lt: 43}}?verbosity=executionStats&format=tree'"
show "cat 'test/users/explain/{\"user.age\": {\$gte: 42, \$lt: 43}}?count=1&verbosity=executionStats&format=tree'"
show "cat 'test/users/aggregate/[{\$match: {\"user.age\": {\$gte: 60}}}, {\$group: {_id: \"\$user.address.city\", n: {\$sum: 1}}}, {\$sort: {n: -1}}, {\$limit: 3}]'"
show "echo '{\$inc: {\"user.age\": 1}}' > 'test/users/update/{\"user.age\": 99}?multi=true'; cat 'test/users/query/{\"user.age\": {\$gte: 99}}?count=1'"
show "echo '{\"user\": {\"name\": {\"first\": \"Ada\"}, \"age\": 36}}' > test/users/ada.json && cat test/users/ada.json"
show "sed -i 's/36/37/' test/users/ada.json && cat test/users/ada.json"
show "echo '{\"_id\": \"ada\", \"age\": [1' > test/users/ada.json; tail -n 1 .docfs/errors"
show "tail -n 2 test/users/.changes | jq -c '[.operationType, .documentKey._id, .fullDocument.user.age]'"
show "jq -c '{ns, count, size, nindexes}' test/users/.stats"
show "cd / && '$DOCFS' snapshot '$STORE' test.users -m 'quickstart' | tail -n 1; ls '$MNT/.snapshots'"
echo
echo "== mongosh on the same store (the wire protocol, from the mounting daemon)"
show "'$MONGOSH' '$URI' --quiet --eval 'db.users.countDocuments({\"user.age\": {\$gte: 60}})'"
show "'$MONGOSH' '$URI' --quiet --eval 'db.users.deleteOne({_id: \"grace\"}); db.users.insertOne({_id: \"grace\", user: {name: {first: \"Grace\"}, age: 45}}).insertedId' && cat test/users/grace.json"
show "sed -i 's/45/46/' test/users/grace.json && '$MONGOSH' '$URI' --quiet --eval 'db.users.findOne({_id: \"grace\"}).user.age'"
echo
echo "Mounted at ./mnt; README.md shows the rest (writes, .bulk, aggregation, snapshots)."
echo "MongoDB clients: $MONGOSH '$URI'"
echo "Unmount with: fusermount3 -u mnt"
