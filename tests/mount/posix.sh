#!/usr/bin/env bash
# posix.sh - what shell tools and POSIX programs expect of files, on documents and scratch
# files: errors that bash's built-in echo sees (it ignores close(), so a write path or a
# document must fail at the write), touch and `: >` making an empty document, the times of
# the fixed entries, and the POSIX behaviour pjdfstest checks (permissions for another user
# with allow_other, chown, utimensat, rename, unlink, truncate, O_EXCL, ENAMETOOLONG). What
# docfs refuses by design (directories, FIFOs, device nodes and hard links under a
# document's name; a document's hard links) is checked to fail with a clear errno; README.md
# lists those exceptions.
. "$(dirname "$0")/lib.sh"
chmod 755 "$T" # another user must reach the mount point
mount_docfs allow_other
C=$MNT/shop/items
mkdir -p "$C"
printf '{"_id": 1, "n": 1}\n{"_id": 2, "n": 2}\n{"_id": "x", "n": 3}\n' > "$C/.insert"
lasterr() { tail -n1 "$MNT/.docfs/errors"; }
# as_nobody CMD...: runs CMD as uid/gid 65534 with no supplementary groups
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }
# errno_of CMD...: the message of the Python OSError CMD raises, "ok" if none
pyerr() { python3 -c "
import os, sys
try:
    $1
    print('ok')
except OSError as e:
    print(e.strerror)
"; }

step "bash's built-in echo sees a failed update (it ignores close)"
if echo '{$inc: {n: "a"}}' > "$C/update/{_id: 1}" 2>/dev/null; then
	fail "echo of a failing update returned 0"
fi
lasterr | grep -q "update/{_id: 1}" || fail "no error for the update: $(lasterr)"
expect_eq "$(jq -c .n "$C/1.json")" "1" "the failed update changed nothing"
if echo '{$set: {n: 5}, $set2: 1}' > "$C/update/{}" 2>/dev/null; then
	fail "echo of an unknown update operator returned 0"
fi
if echo '{justOne: 5}' > "$C/delete/{_id: 2}" 2>/dev/null; then
	fail "echo of a bad delete request returned 0"
fi
expect_eq "$(ls "$C" | grep -c '^2.json$')" "1" "the failed delete deleted nothing"
echo '{$inc: {n: 10}}' > "$C/update/{_id: 1}" || fail "echo of a good update failed"
expect_eq "$(jq -c .n "$C/1.json")" "11" "the update ran"
echo x > "$C/delete/{_id: 2}" || fail "echo x into delete/ failed"
[ ! -e "$C/2.json" ] || fail "the delete did not run"

step "an update written in pieces runs once it is whole; its result reads back"
out=$(python3 - "$C/update/{_id: 1}" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
os.write(fd, b'{$inc: {n: ')
os.write(fd, b'1}}')
os.write(fd, b'\n')
print(os.read(fd, 4096).decode().strip())
os.close(fd)
PY
)
expect_eq "$(echo "$out" | jq -c '[.matchedCount, .modifiedCount]')" "[1,1]" "result of a request in pieces"
expect_eq "$(jq -c .n "$C/1.json")" "12" "it ran exactly once"

step "bash's built-in echo sees invalid JSON written to a document"
if echo '{"n": 1,, }' > "$C/new.json" 2>/dev/null; then
	fail "echo of invalid JSON into a new document returned 0"
fi
[ ! -e "$C/new.json" ] || fail "a failed create left new.json"
lasterr | grep -q "new.json" || fail "the error does not name the file: $(lasterr)"
before=$(cat "$C/x.json")
if echo 'not json' > "$C/x.json" 2>/dev/null; then
	fail "echo of text into a document returned 0"
fi
expect_eq "$(cat "$C/x.json")" "$before" "a failed write changed nothing"
# A valid document written in small pieces, cut inside a UTF-8 sequence, is fine.
python3 - "$C/pieces.json" <<'PY'
import os, sys
data = '{"s": "caf\u00e9 \u20ac", "n": NumberLong(7)}\n'.encode()
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for i in range(len(data)):
    os.write(fd, data[i:i + 1])
os.close(fd)
PY
expect_eq "$(jq -c '[._id, .s]' "$C/pieces.json")" '["pieces","café €"]' "a document written byte by byte"

step "touch and : > make the empty document; touch of a document changes its time only"
touch "$C/t1.json" || fail "touch failed"
[ -e "$C/t1.json" ] || fail "touch left no file"
expect_eq "$(jq -c . "$C/t1.json")" '{"_id":"t1"}' "touch made {_id: <name>}"
: > "$C/7.json"
expect_eq "$(jq -c . "$C/7.json")" '{"_id":7}' ": > 7.json made {_id: 7}"
expect_eq "$(cat "$C/query/{_id: 't1'}")" '{"_id": "t1"}' "the touched document is queryable"
before=$(cat "$C/1.json")
touch -d '2021-03-04 05:06:07 UTC' "$C/1.json"
expect_eq "$(stat -c %Y "$C/1.json")" "$(date -d '2021-03-04 05:06:07 UTC' +%s)" "touch -d sets mtime"
expect_eq "$(cat "$C/1.json")" "$before" "touch kept the content"

step "fixed entries and computed files show the collection's time, not 1970"
for f in .bulk .insert query explain aggregate update delete .indexes .queries \
	"update/{_id: 1}" "query/{n: 1}"; do
	t=$(stat -c %Y "$C/$f")
	[ "$t" -gt 1000000000 ] || fail "'$f' has mtime $t"
done

step "permissions for another user (allow_other, default_permissions)"
chmod 600 "$C/1.json"
expect_fail "nobody reads a 0600 document" as_nobody cat "$C/1.json"
chmod 644 "$C/1.json"
as_nobody cat "$C/1.json" > /dev/null || fail "nobody cannot read a 0644 document"
expect_fail "nobody writes a 0644 document" as_nobody sh -c "echo '{}' > '$C/1.json'"
expect_fail "nobody creates in a 0755 collection" as_nobody touch "$C/nb.json"
expect_fail "nobody unlinks in a 0755 collection" as_nobody rm -f "$C/1.json"
[ -e "$C/1.json" ] || fail "nobody's rm removed the document"
chmod 777 "$C"
as_nobody sh -c "echo '{\"by\": \"nobody\"}' > '$C/nb.json'" || fail "nobody cannot create in a 0777 collection"
expect_eq "$(stat -c '%u %g %a' "$C/nb.json")" "65534 65534 644" "a created file belongs to its creator"
chmod 666 "$C/x.json"
as_nobody sh -c "echo '{\"n\": 4}' > '$C/x.json'" || fail "nobody cannot write a 0666 document"
expect_eq "$(jq -c .n "$C/x.json")" "4" "nobody's write"
chmod 1777 "$C"
expect_eq "$(stat -c %a "$C")" "1777" "the sticky bit is kept"
expect_fail "nobody removes root's file in a sticky collection" as_nobody rm -f "$C/x.json"
chmod 755 "$C"

step "chown"
chown 65534:65534 "$C/1.json"
expect_eq "$(stat -c '%u %g' "$C/1.json")" "65534 65534" "root chowns"
expect_fail "nobody gives a file to root" as_nobody chown 0 "$C/1.json"
expect_eq "$(stat -c '%u' "$C/1.json")" "65534" "the refused chown changed nothing"
chown 0:0 "$C/1.json"
mkdir "$MNT/shop/owned"
chown 65534:65534 "$MNT/shop/owned"
expect_eq "$(stat -c '%u %g' "$MNT/shop/owned")" "65534 65534" "a collection is chowned"
as_nobody touch "$MNT/shop/owned/mine.json" || fail "the new owner cannot create"

step "utimensat: atime and mtime, nanoseconds, UTIME_OMIT"
python3 - "$C/1.json" <<'PY'
import os, sys
p = sys.argv[1]
os.utime(p, ns=(1_600_000_000_123_456_789, 1_500_000_000_987_654_321))
st = os.stat(p)
assert st.st_mtime_ns == 1_500_000_000_987_654_321, st.st_mtime_ns
os.utime(p, ns=(1_600_000_000_000_000_000, 1_400_000_000_000_000_000))
assert os.stat(p).st_mtime_ns == 1_400_000_000_000_000_000
PY
[ $? -eq 0 ] || fail "utimensat"
touch -a -d '2020-01-01 UTC' "$C/1.json"
expect_eq "$(stat -c %Y "$C/1.json")" "1400000000" "touch -a leaves mtime"

step "rename: over an existing document, of a scratch file, across collections"
echo '{"v": "a"}' > "$C/ra.json"
echo '{"v": "b"}' > "$C/rb.json"
mv "$C/ra.json" "$C/rb.json"
expect_eq "$(jq -c '[._id, .v]' "$C/rb.json")" '["rb","a"]' "rename over a document changes _id"
[ ! -e "$C/ra.json" ] || fail "the source of a rename is still there"
echo hello > "$C/notes.txt"
mv "$C/notes.txt" "$C/notes2.txt"
expect_eq "$(cat "$C/notes2.txt")" "hello" "a renamed scratch file"
mkdir "$MNT/shop/other"
mv "$C/rb.json" "$MNT/shop/other/rb.json"
expect_eq "$(jq -c .v "$MNT/shop/other/rb.json")" '"a"' "a document moved to another collection"
expect_eq "$(pyerr "os.rename('$C/missing.json', '$C/m2.json')")" "No such file or directory" "rename of a missing file"

step "unlink"
rm "$C/rb.json" 2>/dev/null && fail "rm of a moved document succeeded"
rm "$C/nb.json"
[ ! -e "$C/nb.json" ] || fail "rm left the document"
expect_eq "$(pyerr "os.unlink('$C/nb.json')")" "No such file or directory" "unlink of a missing file"

step "truncate: scratch files shrink and grow; a document only to valid content"
printf 'abcdef' > "$C/s.bin"
truncate -s 3 "$C/s.bin"
expect_eq "$(cat "$C/s.bin")" "abc" "truncate -s 3"
truncate -s 6 "$C/s.bin"
expect_eq "$(od -An -c "$C/s.bin" | tr -s ' ')" " a b c \0 \0 \0" "truncate grows with zeros"
expect_eq "$(stat -c %s "$C/s.bin")" "6" "st_size after truncate"
before=$(cat "$C/1.json")
size=$(stat -c %s "$C/1.json")
expect_fail "truncate of a document to broken JSON" truncate -s 5 "$C/1.json"
expect_eq "$(cat "$C/1.json")" "$before" "a refused truncate changed nothing"
truncate -s "$size" "$C/1.json" || fail "truncate of a document to its own size"
python3 - "$C/1.json" <<'PY' || fail "O_TRUNC then a write of the document"
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
os.write(fd, b'{"n": 99}')
os.close(fd)
PY
expect_eq "$(jq -c .n "$C/1.json")" "99" "O_TRUNC and rewrite"

step "O_CREAT|O_EXCL"
expect_eq "$(pyerr "os.close(os.open('$C/1.json', os.O_WRONLY | os.O_CREAT | os.O_EXCL))")" "File exists" "O_EXCL on a document"
expect_eq "$(pyerr "os.close(os.open('$C/s.bin', os.O_WRONLY | os.O_CREAT | os.O_EXCL))")" "File exists" "O_EXCL on a scratch file"
expect_eq "$(pyerr "fd = os.open('$C/ex.json', os.O_WRONLY | os.O_CREAT | os.O_EXCL); os.write(fd, b'{}'); os.close(fd)")" "ok" "O_EXCL on a new name"
expect_eq "$(jq -c . "$C/ex.json")" '{"_id":"ex"}' "the exclusive create"

step "ENAMETOOLONG"
long=$(printf 'n%.0s' $(seq 1 251))
expect_eq "$(pyerr "open('$C/$long.json', 'w').close()")" "File name too long" "create of a 256-byte name"
expect_eq "$(pyerr "os.stat('$C/$long.json')")" "File name too long" "lookup of a 256-byte name"
expect_eq "$(pyerr "os.rename('$C/1.json', '$C/$long.json')")" "File name too long" "rename to a 256-byte name"
expect_eq "$(pyerr "os.mkdir('$MNT/shop/$long')")" "File name too long" "mkdir of a 256-byte name"
ok=$(printf 'n%.0s' $(seq 1 250))
touch "$C/$ok.json" || fail "a 255-byte name"
expect_eq "$(jq -r ._id "$C/$ok.json")" "$ok" "the longest name"
# a refused rename between two long names still says why (pjdfstest rename/01.t in a
# collection: an empty scratch file renamed to a document's name)
scr=$(printf 's%.0s' $(seq 1 255))
: > "$C/$scr"
mark=$(errors_mark)
expect_eq "$(pyerr "os.rename('$C/$scr', '$C/$ok.json')")" "Invalid argument" "an empty scratch file renamed to a document"
errors_since "$MNT/.docfs/errors" "$mark" | grep "rename 's\{40\}\.\.\.' to 'n\{40\}\.\.\.': ..*" > /dev/null ||
	fail "the rename's message lost its reason: $(errors_since "$MNT/.docfs/errors" "$mark")"
rm "$C/$scr"

step "documented exceptions: what a collection refuses, with a clear errno"
# Directories, fifos, sockets and hard links are scratch entries (scratch_dirs.sh); not
# under a document's name, and a document has one name.
expect_eq "$(pyerr "os.mkdir('$C/sub.json')")" "Operation not permitted" "mkdir of a document name"
expect_eq "$(pyerr "os.mkfifo('$C/fifo.json')")" "Operation not permitted" "mkfifo of a document name"
expect_eq "$(pyerr "os.link('$C/1.json', '$C/hard')")" "Operation not permitted" "link of a document"
expect_eq "$(pyerr "os.mknod('$C/null.json', 0o600 | 0o020000, os.makedev(1, 3))")" "Operation not permitted" "a device node under a document name"
unmount_docfs
echo ok
