#!/usr/bin/env bash
# backup.sh - backups with the usual tools (issue 28): tar (c and x, with -p, and as root
# restoring owners) and rsync -a, of a collection and of a whole database, from the mount to
# a disk and from a disk into the mount (a new database, and over the existing one). Each
# run must exit 0 with nothing on stderr, and what comes back must be what was there: the
# documents (compared with jq -S), their modes, owners and times, the scratch files (cmp),
# scratch directories, a fifo and a symlink, the index specs (.indexes/<name> without the
# figures), the saved queries and the options of a capped collection. Then what must still
# be refused: a different spec under an existing index name, a chmod or chown of query/.
# The store is checked (docfs check) at the end.
. "$(dirname "$0")/lib.sh"
command -v rsync > /dev/null || { echo "SKIP: no rsync"; exit 77; }
mount_docfs
D=$MNT/shop
ROOT=0
[ "$(id -u)" = 0 ] && ROOT=1

step "a database to back up"
mkdir -p "$D/items" "$D/ring"
python3 -c '
import json
for i in range(30):
    print(json.dumps({"_id": i, "name": "item %d" % i, "price": i * 1.5, "tags": ["t%d" % (i % 3)]}))
print(json.dumps({"_id": "s-1", "nested": {"a": [1, {"b": None}]}, "when": {"$date": "2024-01-02T03:04:05Z"}}))
' > "$D/items/.insert"
echo '{"key": {"price": 1}, "name": "price_1"}' > "$D/items/.indexes/price_1"
echo '{"key": {"name": 1, "tags": -1}, "name": "by_name", "unique": true}' > "$D/items/.indexes/by_name"
echo '{"filter": {"price": {"$gt": 10}}, "sort": {"price": -1}}' > "$D/items/.queries/dear"
printf 'free text\n' > "$D/items/notes.txt"
chmod 640 "$D/items/notes.txt"
mkdir -p "$D/items/sub/deep"
head -c 100000 /dev/urandom > "$D/items/sub/deep/blob.bin"
echo 'not a document' > "$D/items/sub/x.json"
mkfifo "$D/items/pipe"
ln -s notes.txt "$D/items/link"
chmod 600 "$D/items/3.json"
touch -d '2020-05-06 07:08:09' "$D/items/4.json" "$D/items/notes.txt"
if [ $ROOT = 1 ]; then
	chown 65534:65534 "$D/items/3.json" "$D/items/sub/deep/blob.bin"
fi
echo '{capped: true, size: 8192, max: 5}' > "$D/ring/.options"
for i in 1 2 3; do echo "{\"_id\": $i, \"msg\": \"m$i\"}" > "$D/ring/$i.json"; done

# manifest DIR LEVEL: one line per entry under DIR (a collection, LEVEL 1, or a database,
# LEVEL 2; on the mount or on a disk): its path, type, mode and owner, and what it holds:
# documents (the .json files at the top of a collection) as jq -S prints them, with their
# mtime; index files as their spec without the figures; other files by their bytes and
# mtime. The fixed directories (query/, ...) are left out: they are empty.
manifest() {
	python3 - "$1" "$2" << 'EOF'
import hashlib, json, os, stat, subprocess, sys

root, level = sys.argv[1], int(sys.argv[2])
fixed = {"query", "explain", "aggregate", "update", "delete"}
lines, docs = {}, []
for d, dirs, files in os.walk(root):
    dirs[:] = [x for x in dirs if x not in fixed]
    for name in dirs + files:
        p = os.path.join(d, name)
        rel = os.path.relpath(p, root)
        st = os.lstat(p)
        who = "%o %d %d" % (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
        top = rel.count("/") == level - 1
        if stat.S_ISDIR(st.st_mode):
            lines[rel] = "dir " + who
        elif stat.S_ISFIFO(st.st_mode):
            lines[rel] = "fifo " + who
        elif stat.S_ISLNK(st.st_mode):
            lines[rel] = "link " + os.readlink(p)
        elif os.path.basename(d) == ".indexes" and rel.count("/") == level:
            spec = json.load(open(p))
            spec.pop("stats", None)
            lines[rel] = "file %s spec %s" % (who, json.dumps(spec, sort_keys=True))
        elif top and name == ".options":
            lines[rel] = "file %s options %s" % (who, json.dumps(json.load(open(p)), sort_keys=True))
        elif top and name.endswith(".json") and not name.startswith("."):
            lines[rel] = "file %s doc %d" % (who, int(st.st_mtime))
            docs.append(rel)
        else:
            h = hashlib.sha256(open(p, "rb").read()).hexdigest()
            lines[rel] = "file %s %d %s" % (who, int(st.st_mtime), h)
if docs:  # the documents as jq -S prints them: one jq for all
    out = subprocess.run(["jq", "-cS", "."] + docs, cwd=root, check=True,
                         capture_output=True, text=True).stdout.splitlines()
    assert len(out) == len(docs), "jq printed %d lines for %d documents" % (len(out), len(docs))
    for rel, doc in zip(docs, out):
        lines[rel] += " " + doc
for rel in sorted(lines):
    print(rel, lines[rel])
EOF
}

# same WHAT LEVEL A B: the manifests of A and B are the same.
same() {
	manifest "$3" "$2" > "$T/m.a" || fail "$1: manifest of $3"
	manifest "$4" "$2" > "$T/m.b" || fail "$1: manifest of $4"
	diff "$T/m.a" "$T/m.b" > "$T/m.diff" || fail "$1: differs from the original: $(cat "$T/m.diff")"
}

# quiet WHAT command...: runs it; it must exit 0 with nothing on stderr.
quiet() {
	local what=$1 rc=0
	shift
	"$@" 2> "$T/stderr" || rc=$?
	[ $rc = 0 ] || fail "$what: exit status $rc: $(cat "$T/stderr")"
	[ ! -s "$T/stderr" ] || fail "$what: wrote to stderr: $(cat "$T/stderr")"
}

manifest "$D/items" 1 > "$T/items.m"
grep -q '^.indexes/price_1 file 644 0 0 spec {"key": {"price": 1}' "$T/items.m" ||
	fail "the manifest has no index spec: $(cat "$T/items.m")"
grep -q '^3.json file 600 ' "$T/items.m" || fail "the manifest has no mode 600 document"
[ "$(grep -c ' doc ' "$T/items.m")" = 31 ] || fail "not 31 documents in the manifest"
step "what an archive holds: no .insert, .bulk, .stats, .changes, _id_ or {} options"
ls -A "$D/items" | grep -qxE '\.insert|\.bulk|\.stats|\.changes|\.options' &&
	fail "a fixed file that an archive need not hold is listed: $(ls -A "$D/items")"
ls -A "$D/items/.indexes" | grep -qx _id_ && fail "_id_ is listed"
expect_eq "$(jq -c .key "$D/items/.indexes/_id_")" '{"_id":1}' "_id_ is there by name"
expect_eq "$(ls -A "$D/ring" | grep -c '^\.options$')" 1 "a capped collection lists .options"
expect_eq "$(stat -c %s "$D/items/.indexes/price_1")" "$(cat "$D/items/.indexes/price_1" | wc -c)" \
	"st_size of an index file before any open"

step "tar of a collection, into another database (tar x, then tar xp)"
cd "$D"
quiet "tar czf of a collection" tar czf "$T/items.tgz" items
mkdir "$MNT/copy1"
cd "$MNT/copy1"
quiet "tar xzf of a collection into another database" tar xzf "$T/items.tgz"
same "tar of a collection" 1 "$D/items" "$MNT/copy1/items"
mkdir "$MNT/copy2"
cd "$MNT/copy2"
quiet "tar xpzf" tar xpzf "$T/items.tgz"
same "tar xp of a collection" 1 "$D/items" "$MNT/copy2/items"
expect_eq "$(cat "$MNT/copy2/items/query/{price: {\$gt: 41}}" | jq -c ._id | tr '\n' ' ')" \
	"28 29 " "the restored collection answers queries"
expect_eq "$(jq '.stages // . | tostring | test("price_1")' "$MNT/copy2/items/explain/{price: 3}")" \
	true "the restored index is used"

step "tar of a whole database, to a disk and back into a new database"
cd "$MNT"
quiet "tar cf of a database" tar cf "$T/shop.tar" shop
mkdir "$T/disk"
cd "$T/disk"
quiet "tar xf on a disk" tar xf "$T/shop.tar"
same "tar of a database to a disk" 2 "$D" "$T/disk/shop"
cd "$MNT"
quiet "tar xf of a database, renamed" tar xf "$T/shop.tar" --transform 's|^shop|shop2|'
same "tar of a database into a new database" 2 "$D" "$MNT/shop2"
expect_eq "$(cat "$MNT/shop2/ring/.options")" '{"capped": true, "size": 8192, "max": 5}' \
	"the options of the capped collection"

step "tar xf over the existing database: a capped collection's .options written back"
# plain tar (no --overwrite) meets EEXIST on .options, unlinks it and creates it again:
# the unlink only hides the file (the cap stays), the same options are accepted
quiet "tar xf of a database over itself" tar xf "$T/shop.tar"
same "tar xf over the existing database" 2 "$T/disk/shop" "$D"
expect_eq "$(cat "$D/ring/.options")" '{"capped": true, "size": 8192, "max": 5}' \
	"the options after tar xf over the capped collection"
mkdir -p "$T/other/shop/ring"
echo '{"capped": true, "size": 4096}' > "$T/other/shop/ring/.options"
(cd "$T/other" && tar cf "$T/other.tar" shop/ring/.options)
mark=$(errors_mark)
if tar xf "$T/other.tar" 2> "$T/stderr"; then
	fail "tar xf of different options over a capped collection succeeded"
fi
errors_since "$MNT/.docfs/errors" "$mark" | grep -q "collection 'ring' is capped already: its options cannot change" ||
	fail "no message for different options: $(cat "$T/stderr")"
expect_eq "$(cat "$D/ring/.options")" '{"capped": true, "size": 8192, "max": 5}' \
	"the options after a refused change"
for i in 4 5 6 7 8 9; do echo "{\"_id\": $i}" > "$D/ring/$i.json"; done
expect_eq "$(ls "$D/ring" | grep -c '\.json$')" 5 "the collection is still capped at 5 documents"

step "rsync -a: mount to disk, disk to a new database, disk over the existing database"
quiet "rsync -a mount to disk" rsync -a "$D/" "$T/rs/"
same "rsync -a to a disk" 2 "$D" "$T/rs"
quiet "rsync -a disk to a new database" rsync -a "$T/rs/" "$MNT/shop3/"
same "rsync -a into a new database" 2 "$D" "$MNT/shop3"
# -I: every file is sent again (no quick check), so every one is written to rsync's
# temporary name and renamed over the existing one: documents, .options, index files.
quiet "rsync -aI disk over the existing database" rsync -aI "$T/rs/" "$D/"
same "rsync -aI over the existing database" 2 "$T/rs" "$D"
quiet "rsync -a mount to mount (a collection)" rsync -a "$D/items" "$MNT/shop4/"
same "rsync -a of a collection between databases" 1 "$D/items" "$MNT/shop4/items"
ls -A "$D/items/.indexes" | grep -q '^\.' && fail "rsync left a temporary file in .indexes/"

step "what stays refused"
echo '{"key": {"price": -1}, "name": "price_1"}' > "$T/rs/items/.indexes/price_1"
if rsync -a "$T/rs/" "$D/" 2> "$T/stderr"; then
	fail "rsync of a different spec under an existing index name succeeded"
fi
grep -q "File exists" "$T/stderr" || fail "rsync's error: $(cat "$T/stderr")"
expect_eq "$(jq -c .key "$D/items/.indexes/price_1")" '{"price":1}' "the index is unchanged"
ls -A "$D/items/.indexes" | grep -q '^\.price_1\.' && fail "a refused rename left its temporary file listed"
expect_fail "chmod of query/" chmod 700 "$D/items/query"
expect_fail "chmod of .insert" chmod 600 "$D/items/.insert"
if [ $ROOT = 1 ]; then
	expect_fail "chown of explain/" chown 65534 "$D/items/explain"
fi
chmod 555 "$D/items/query" || fail "chmod of query/ to its own mode"
touch -d '2001-01-01' "$D/items/query" || fail "utimes of query/"
expect_fail "a bad .options through a rename" bash -c "echo '{capped: 1}' > '$D/items/.o.tmp' && mv '$D/items/.o.tmp' '$D/items/.options'"
[ -e "$D/items/.options" ] && fail "a refused .options rename made one"
rm -f "$D/items/.o.tmp"

cd "$T"
unmount_docfs
"$DOCFS" check "$STORE" > "$T/check.out" 2>&1 || fail "docfs check: $(cat "$T/check.out")"
echo "PASS"
