#!/usr/bin/env bash
# scratch_dirs.sh - names in a collection that are not documents can be directories, fifos,
# sockets, device nodes and hard links (issue 28 item 6): scratch entries, never documents,
# never seen by queries, even when named "<x>.json" inside a directory. Checked with the programs that
# need them: mkdir -p, rm -r, mv (rename(2)'s rules for directories), mkfifo, a Unix socket,
# ln (lock files made with link()), tar x, rsync -aH, git init/commit, stress-ng's file
# stressors; documents keep refusing link(). The store is checked (docfs check) at the end.
. "$(dirname "$0")/lib.sh"
mount_docfs
C=$MNT/shop/c
mkdir -p "$C"
printf '{"_id": 1, "n": 1}\n{"_id": 2, "n": 2}\n' > "$C/.insert"
cd "$T"
pyerr() { python3 -c "
import os, sys
try:
    $1
    print('ok')
except OSError as e:
    print(e.strerror)
"; }

step "mkdir -p, files in subdirectories (a .json there is scratch), ls, rm -r"
mkdir -p "$C/a/b/c"
echo hello > "$C/a/b/c/f.txt"
echo '{"_id": 9, "n": 9}' > "$C/a/b/not-a-doc.json"
printf 'not json at all' > "$C/a/b/c/bad.json"
expect_eq "$(cat "$C/a/b/c/f.txt")" "hello" "a file two directories down"
expect_eq "$(cat "$C/a/b/c/bad.json")" "not json at all" "a .json under a directory is plain bytes"
expect_eq "$(stat -c '%F %h' "$C/a/b")" "directory 3" "a scratch directory (st_nlink: 2 + its subdirectory)"
expect_eq "$(stat -c '%h' "$C/a/b/c")" "2" "st_nlink of a directory with files only"
expect_eq "$(ls "$C/a/b" | tr '\n' ' ')" "c not-a-doc.json " "ls of a scratch directory"
expect_eq "$(find "$C/a" | sort | sed "s|$C/||" | tr '\n' ' ')" \
	"a a/b a/b/c a/b/c/bad.json a/b/c/f.txt a/b/not-a-doc.json " "find in a collection's directory"
expect_eq "$(cat "$C/query/{}" | jq -c ._id | tr '\n' ' ')" "1 2 " "queries see the documents only"
expect_eq "$(cat "$C/query/{n: 9}")" "" "a .json under a directory is not a document"
expect_eq "$(jq .count "$C/.stats")" "2" "collStats counts the documents only"
expect_eq "$(pyerr "os.rmdir('$C/a')")" "Directory not empty" "rmdir of a non-empty directory"
expect_eq "$(pyerr "os.mkdir('$C/a')")" "File exists" "mkdir of an existing directory"
expect_eq "$(pyerr "os.unlink('$C/a')")" "Is a directory" "unlink of a directory"
expect_eq "$(pyerr "os.mkdir('$C/d.json')")" "Operation not permitted" "a directory under a document's name"
expect_eq "$(pyerr "os.mkdir('$C/query')")" "File exists" "a directory under a fixed entry's name"
before=$(stat -c %.9Y "$C/a/b")
sleep 0.02
touch "$C/a/b/new"
after=$(stat -c %.9Y "$C/a/b")
[ "${after/./}" -gt "${before/./}" ] || fail "a create in a directory left its mtime: $before -> $after"

step "rename(2) with directories"
mkdir "$C/m" "$C/empty"
echo x > "$C/m/x"
mv "$C/a/b" "$C/m/b"
expect_eq "$(cat "$C/m/b/c/f.txt")" "hello" "a directory moved with what it holds"
expect_eq "$(stat -c '%h' "$C/a" "$C/m" | tr '\n' ' ')" "2 3 " \
	"st_nlink of the old and new parents after a directory moved (pjdfstest rename/24.t)"
mkdir "$C/m/e"
expect_eq "$(stat -c '%h' "$C/m")" "4" "st_nlink after a mkdir"
rmdir "$C/m/e"
expect_eq "$(stat -c '%h' "$C/m")" "3" "st_nlink after a rmdir"
expect_eq "$(pyerr "os.rename('$C/m', '$C/m/b/c/m')")" "Invalid argument" "a directory into itself"
expect_eq "$(pyerr "os.rename('$C/m/x', '$C/empty')")" "Is a directory" "a file over a directory"
expect_eq "$(pyerr "os.rename('$C/empty', '$C/m/x')")" "Not a directory" "a directory over a file"
expect_eq "$(pyerr "os.rename('$C/empty', '$C/m')")" "Directory not empty" "over a non-empty directory"
mkdir "$C/empty2"
mv -T "$C/empty2" "$C/empty"
[ -d "$C/empty" ] && [ ! -e "$C/empty2" ] || fail "a directory over an empty one"
mv "$C/1.json" "$C/m/one.json"
expect_eq "$(cat "$C/query/{_id: 1}")" "" "a document moved into a directory is no document any more"
expect_eq "$(jq -c .n "$C/m/one.json")" "1" "its bytes are kept"
mv "$C/m/one.json" "$C/1.json"
expect_eq "$(cat "$C/query/{_id: 1}")" '{"_id": 1, "n": 1}' "moved back, it is a document again"
echo '{}' > "$C/m/x7.json"
expect_eq "$(pyerr "os.rename('$C/m/x7.json', '$C/007.json')")" "Invalid argument" "out of a directory to a name no document has"
mkdir "$MNT/shop/other"
expect_eq "$(pyerr "os.rename('$C/m', '$MNT/shop/other/m')")" "Invalid cross-device link" "a directory to another collection"
rm -r "$C/a" "$C/m"
[ ! -e "$C/a" ] && [ ! -e "$C/m" ] || fail "rm -r left directories"
mkdir "$C/gone"
expect_eq "$(pyerr "fd = os.open('$C/gone', os.O_RDONLY); os.rmdir('$C/gone'); os.close(os.open('x', os.O_WRONLY | os.O_CREAT, dir_fd=fd))")" \
	"No such file or directory" "a create in a removed directory"

step "mkfifo and a Unix socket"
mkdir "$C/run"
mkfifo "$C/run/fifo"
expect_eq "$(stat -c %F "$C/run/fifo")" "fifo" "mkfifo"
(echo "through the fifo" > "$C/run/fifo") &
expect_eq "$(cat "$C/run/fifo")" "through the fifo" "a fifo carries bytes"
wait
mkfifo "$C/top.fifo"
expect_eq "$(stat -c %F "$C/top.fifo")" "fifo" "a fifo at the top of a collection"
expect_eq "$(pyerr "os.mkfifo('$C/f.json')")" "Operation not permitted" "a fifo under a document's name"
expect_eq "$(pyerr "os.mknod('$C/dev', 0o600 | 0o020000, os.makedev(1, 3))")" "ok" "a character device node"
expect_eq "$(pyerr "os.mknod('$C/run/blk', 0o640 | 0o060000, os.makedev(8, 17))")" "ok" "a block device node"
expect_eq "$(stat -c '%F %t:%T %a' "$C/dev" "$C/run/blk" | tr '\n' ' ')" \
	"character special file 1:3 600 block special file 8:11 640 " "device nodes keep their numbers"
expect_eq "$(pyerr "os.mknod('$C/d.json', 0o600 | 0o020000, os.makedev(1, 3))")" "Operation not permitted" "a device node under a document's name"
out=$(python3 - "$C/run/sock" <<'PY'
import os, socket, sys
srv = socket.socket(socket.AF_UNIX)
srv.bind(sys.argv[1])
srv.listen(1)
cli = socket.socket(socket.AF_UNIX)
cli.connect(sys.argv[1])
conn, _ = srv.accept()
cli.sendall(b"ping")
print(conn.recv(4).decode(), os.stat(sys.argv[1]).st_mode & 0o170000 == 0o140000)
PY
)
expect_eq "$out" "ping True" "a Unix socket bound in a collection"

step "hard links: lock files made with link(), shared content, st_nlink"
echo pid > "$C/run/lock.tmp"
ln "$C/run/lock.tmp" "$C/run/lock"
expect_eq "$(stat -c %h "$C/run/lock.tmp") $(stat -c %h "$C/run/lock")" "2 2" "st_nlink of both names"
expect_eq "$(stat -c %i "$C/run/lock.tmp")" "$(stat -c %i "$C/run/lock")" "one inode"
expect_eq "$(pyerr "os.link('$C/run/lock.tmp', '$C/run/lock')")" "File exists" "link() of a held lock"
echo more >> "$C/run/lock"
expect_eq "$(cat "$C/run/lock.tmp")" "$(printf 'pid\nmore')" "a write through one name shows through the other"
ln "$C/run/lock" "$C/lock3"
rm "$C/run/lock.tmp"
expect_eq "$(stat -c %h "$C/run/lock")" "2" "st_nlink after one name went"
rm "$C/run/lock"
expect_eq "$(cat "$C/lock3")" "$(printf 'pid\nmore')" "the last name keeps the content"
expect_eq "$(stat -c %h "$C/lock3")" "1" "st_nlink of the last name"
ln "$C/lock3" "$C/run/l2"
python3 -c "import os; os.rename('$C/run/l2', '$C/lock3')" # one file's two names: nothing
expect_eq "$(stat -c %h "$C/lock3")" "2" "a rename between two names of one file"
rm "$C/lock3" "$C/run/l2"
expect_eq "$(pyerr "os.link('$C/2.json', '$C/run/two')")" "Operation not permitted" "link() of a document"
echo s > "$C/s.txt"
expect_eq "$(pyerr "os.link('$C/s.txt', '$C/s2.json')")" "Operation not permitted" "a link under a document's name"
expect_eq "$(pyerr "os.link('$C/s.txt', '$MNT/shop/other/s.txt')")" "Invalid cross-device link" "a link into another collection"

step "tar x of directories, fifos, symlinks and hard links; rsync -aH both ways"
SRC=$T/src
mkdir -p "$SRC/proj/src/lib" "$SRC/proj/empty"
echo 'int main(void) { return 0; }' > "$SRC/proj/src/main.c"
echo '{"conf": true}' > "$SRC/proj/src/conf.json"
head -c 100000 /dev/urandom > "$SRC/proj/src/lib/blob.bin"
ln "$SRC/proj/src/main.c" "$SRC/proj/main-link.c"
ln -s src/main.c "$SRC/proj/sym.c"
mkfifo "$SRC/proj/pipe"
chmod 700 "$SRC/proj/src/lib"
touch -d '2020-02-02 02:02:02 UTC' "$SRC/proj/src/main.c"
tar -C "$SRC" -cf "$T/proj.tar" proj
tar -C "$C" -xf "$T/proj.tar" || fail "tar x into a collection exited $?"
diff -r --no-dereference -x pipe "$SRC/proj" "$C/proj" || fail "tar x: the trees differ"
expect_eq "$(stat -c '%h %a %Y' "$C/proj/src/main.c")" "2 644 1580608922" "a hard link, its mode and mtime from tar"
expect_eq "$(stat -c %i "$C/proj/src/main.c")" "$(stat -c %i "$C/proj/main-link.c")" "tar's hard link is one inode"
expect_eq "$(stat -c '%F %a' "$C/proj/src/lib")" "directory 700" "a directory's mode from tar"
expect_eq "$(stat -c %F "$C/proj/pipe")" "fifo" "tar's fifo"
rm -r "$C/proj"
rsync -aH "$SRC/proj" "$C/" || fail "rsync -aH into a collection"
rsync -aH "$C/proj" "$T/back/" || fail "rsync -aH out of a collection"
diff -r --no-dereference -x pipe "$SRC/proj" "$T/back/proj" || fail "rsync round trip: the trees differ"
expect_eq "$(stat -c %h "$T/back/proj/src/main.c")" "2" "rsync -H kept the hard link"
expect_eq "$(rsync -aHi "$SRC/proj" "$C/" | wc -l)" "0" "a second rsync copies nothing"

step "git init, add, commit, log inside a collection's directory"
(
	cd "$C/proj"
	git init -q
	git -c user.name=t -c user.email=t@t add -A . 2> /dev/null
	git -c user.name=t -c user.email=t@t commit -qm first
	echo change >> src/main.c
	git -c user.name=t -c user.email=t@t commit -qam second
	[ "$(git log --oneline | wc -l)" = 2 ] || exit 1
	git fsck --no-progress 2>&1 | grep -v '^dangling' && exit 1
	git status --porcelain | grep -v '^??' && exit 1
	exit 0
) || fail "git in a collection's directory"

step "stress-ng's file stressors in a collection (they make a directory of their own)"
# Their files kept under the 256 MiB of a scratch file (README), which iomix's default 1 GB
# would cross.
for s in "hdd --hdd-bytes 16m" "seek --seek-size 16m" "fsize" "sync-file --sync-file-bytes 16m" \
	"iomix --iomix-bytes 16m" "readahead --readahead-bytes 16m"; do
	set -- $s
	(cd "$C" && timeout 120 stress-ng --"$1" 1 "${@:2}" --"$1"-ops 50 --timeout 10 \
		--temp-path . > "$T/sng-$1.log" 2>&1) || fail "stress-ng --$s: $(tail -n 5 "$T/sng-$1.log")"
done
expect_eq "$(ls "$C" | grep -c '^tmp-stress-ng' || true)" "0" "stress-ng removed its directories"

rm -r "$C/proj" "$C/run" "$C/empty"

step "cp -r of a collection; rm -r of a collection drops it, and of a database; a fixed directory with entries refuses rmdir"
G="$MNT/sd/gone"
mkdir -p "$G/sub/deep" "$MNT/sd2/other"
echo '{"a": 1}' > "$G/x.json"
echo '{"key": {"a": 1}}' > "$G/.indexes/a_1"
echo '{"filter": {"a": 1}}' > "$G/.queries/byA"
echo scratch > "$G/sub/deep/f.txt"
echo '{"b": 2}' > "$MNT/sd2/other/y.json"
mark=$(errors_mark)
rc=0
rmdir "$G/.indexes" 2> "$T/rmdir.err" || rc=$?
[ "$rc" -ne 0 ] && grep -q "Directory not empty" "$T/rmdir.err" ||
	fail "rmdir of .indexes holding a_1: rc $rc, $(cat "$T/rmdir.err")"
errors_since "$MNT/.docfs/errors" "$mark" | grep -q "rmdir '.indexes': indexes besides _id_ remain (1)" ||
	fail "no error line for rmdir .indexes: $(errors_since "$MNT/.docfs/errors" "$mark")"
rc=0
rmdir "$G/.queries" 2> "$T/rmdir.err" || rc=$?
[ "$rc" -ne 0 ] || fail "rmdir of .queries holding byA succeeded"
[ -f "$G/.queries/byA" ] && [ -f "$G/.indexes/a_1" ] || fail "a refused rmdir removed something"
cp -r "$G" "$T/gone.copy" 2> "$T/cp.err" || fail "cp -r of a collection: $(cat "$T/cp.err")"
cmp "$G/x.json" "$T/gone.copy/x.json" && cmp "$G/sub/deep/f.txt" "$T/gone.copy/sub/deep/f.txt" &&
	cmp "$G/.indexes/a_1" "$T/gone.copy/.indexes/a_1" || fail "cp -r copied other bytes"
rm -r "$G" 2> "$T/rm.err" || fail "rm -r of a collection: $(cat "$T/rm.err")"
[ ! -e "$G" ] || fail "the collection is still there after rm -r"
mkdir "$G"
expect_eq "$(ls -A "$G/.indexes" "$G/.queries" | grep -vc ':$' || true)" "1" 	"a collection made again under the name has no old index or saved query (only the blank line)"
rm -r "$MNT/sd2" 2> "$T/rm.err" || fail "rm -r of a database: $(cat "$T/rm.err")"
[ ! -e "$MNT/sd2" ] || fail "the database is still there after rm -r"
unmount_docfs
"$DOCFS" check "$STORE" > "$T/check.out" 2>&1 || fail "docfs check: $(cat "$T/check.out")"
echo ok
