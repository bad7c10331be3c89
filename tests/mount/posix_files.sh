#!/usr/bin/env bash
# posix_files.sh - the POSIX behaviour of open files, times and truncation that real programs
# rely on (issue 28, items 1-5 and 7), each checked with the program that failed before:
#  1. a file unlinked (or renamed over) while open keeps working for its open descriptors
#     until they close, with st_nlink 0 (Python's tempfile.TemporaryFile, pjdfstest's
#     unlink/14.t operations, mmap, ftruncate, fchmod);
#  2. a file reads back on the descriptor that wrote it what was written, and fstat shows its
#     size (Python's 'w+', a document rewritten longer, fio --verify_backlog);
#  3. O_TRUNC without a write truncates (`: > log.txt`; `: > doc.json` makes the empty
#     document, as touch does on a new name);
#  4. atime is kept (touch -a, utimensat with only atime), across a remount;
#  5. creating an entry updates the collection's mtime and ctime; a file's ctime changes on
#     chmod, chown, rename and write;
#  7. a scratch file stops at 256 MiB with EFBIG at the write that crosses the limit.
# The store is checked (docfs check) after the unmount.
. "$(dirname "$0")/lib.sh"
mount_docfs
C=$MNT/shop/files
mkdir -p "$C"
cd "$T"

# pjdfstest, built from its source next to the repository when it is there (issue 28): its
# syscall sequences are what unlink/14.t runs (that script itself needs mkdir in a
# collection). PJDFSTEST_SRC overrides where the source is.
PJD_SRC=${PJDFSTEST_SRC:-$(cd "$(dirname "$0")/../.." && pwd)/../shared/third_party/pjdfstest}
# a clone made elsewhere (CI clones to a temporary place) finds the workplace's copy
[ -f "$PJD_SRC/pjdfstest.c" ] || PJD_SRC=/work/shared/third_party/pjdfstest
PJD=
if [ -f "$PJD_SRC/pjdfstest.c" ] && command -v autoreconf >/dev/null; then
	cp -r "$PJD_SRC" "$T/pjd"
	if (cd "$T/pjd" && autoreconf -ifs && ./configure && make pjdfstest) > "$T/pjd.log" 2>&1; then
		PJD=$T/pjd/pjdfstest
	else
		fail "pjdfstest did not build: $(tail -n 5 "$T/pjd.log")"
	fi
else
	echo "note: no pjdfstest source at $PJD_SRC: its steps are left out"
fi

step "1. tempfile.TemporaryFile (unlinked at once) reads back what it wrote"
out=$(cd "$C" && python3 -c '
import os, tempfile
with tempfile.TemporaryFile(dir=".") as f:
    f.write(b"hello, temp\n" * 1000)
    f.flush()
    f.seek(0)
    data = f.read()
    st = os.fstat(f.fileno())
    print(len(data), data[:12], st.st_nlink, st.st_size)
')
expect_eq "$out" "12000 b'hello, temp\n' 0 12000" "TemporaryFile read back, st_nlink, st_size"
expect_eq "$(ls -A "$C" | grep -vc -E '^(\.insert|query|explain|\.queries|\.indexes|aggregate|update|delete|\.bulk|\.options|\.changes|\.stats)$' || true)" "0" "the temporary file left no name"

step "1. read, write, fstat, ftruncate, mmap and fchmod on an unlinked scratch file"
python3 - "$C/u.bin" <<'PY' || fail "unlinked scratch file"
import mmap, os, stat, sys
p = sys.argv[1]
fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"Hello, World!")
ro = os.open(p, os.O_RDONLY)           # not read yet: loaded when it is read
os.unlink(p)
assert not os.path.exists(p)
st = os.fstat(fd)
assert (st.st_nlink, st.st_size) == (0, 13), (st.st_nlink, st.st_size)
assert os.pread(fd, 13, 0) == b"Hello, World!"
assert os.pread(ro, 13, 0) == b"Hello, World!", os.pread(ro, 13, 0)
os.pwrite(fd, b"WORLD", 7)
assert os.pread(fd, 13, 0) == b"Hello, WORLD!"
os.ftruncate(fd, 5)
assert os.fstat(fd).st_size == 5 and os.pread(fd, 100, 0) == b"Hello"
os.ftruncate(fd, 8192)
m = mmap.mmap(fd, 8192)
assert m[:5] == b"Hello" and m[5:10] == bytes(5)
m[0:5] = b"HELLO"
m.flush()
m.close()
assert os.pread(fd, 5, 0) == b"HELLO", os.pread(fd, 5, 0)
os.fchmod(fd, 0o600)
assert stat.S_IMODE(os.fstat(fd).st_mode) == 0o600
assert os.fstat(fd).st_nlink == 0
os.close(fd)
os.close(ro)
assert not os.path.exists(p)
PY
[ ! -e "$C/u.bin" ] || fail "the unlinked file came back at its close"

step "1. an open document keeps reading its content after rm; a file renamed over too"
printf '{"_id": "d1", "n": 1}' > "$C/d1.json"
echo "old bytes" > "$C/r.txt"
echo "new bytes" > "$C/r2.txt"
python3 - "$C" <<'PY' || fail "open files of removed or replaced entries"
import os, sys
c = sys.argv[1]
before = open(c + "/d1.json", "rb").read()
fd = os.open(c + "/d1.json", os.O_RDONLY)
os.unlink(c + "/d1.json")
assert os.read(fd, 4096) == before
assert os.fstat(fd).st_nlink == 0
os.close(fd)
fd = os.open(c + "/r.txt", os.O_RDONLY)
os.rename(c + "/r2.txt", c + "/r.txt")
assert os.read(fd, 100) == b"old bytes\n"
assert os.fstat(fd).st_nlink == 0
os.close(fd)
assert open(c + "/r.txt", "rb").read() == b"new bytes\n"
fd = os.open(c + "/pend.json", os.O_RDWR | os.O_CREAT, 0o640)  # a document not yet committed
os.write(fd, b'{"a": 1}')
os.unlink(c + "/pend.json")
st = os.fstat(fd)
assert (st.st_nlink, st.st_size, st.st_mode & 0o777) == (0, 8, 0o640), st
assert os.pread(fd, 100, 0) == b'{"a": 1}'
os.close(fd)
assert not os.path.exists(c + "/pend.json")
PY
[ ! -e "$C/d1.json" ] || fail "rm left the document"
expect_eq "$(cat "$C/query/{_id: 'd1'}")" "" "the removed document is not found by a query"

if [ -n "$PJD" ]; then
	step "1. pjdfstest: unlink/14.t's operations in a collection"
	(
		cd "$C"
		"$PJD" create pjd0 0644 > /dev/null
		r=$("$PJD" open pjd0 O_WRONLY : write 0 "Hello,_World!" 2>> "$T/pjd.err" | tail -n1)
		[ "$r" = 0 ] || { echo "write: $r"; exit 1; }
		r=$("$PJD" open pjd0 O_RDONLY : unlink pjd0 : fstat 0 nlink 2>> "$T/pjd.err" | tail -n1)
		[ "$r" = 0 ] || { echo "fstat nlink of an unlinked open file: $r"; exit 1; }
		"$PJD" create pjd0 0644 > /dev/null
		r=$("$PJD" open pjd0 O_RDWR : write 0 "Hello,_World!" : unlink pjd0 : pread 0 13 0 2>> "$T/pjd.err" | tail -n1)
		[ "$r" = "Hello,_World!" ] || { echo "pread of an unlinked open file: $r"; exit 1; }
	) || fail "pjdfstest unlink/14.t operations"
fi

step "2. open('x', 'w+'): write, flush, seek(0), read() on the same descriptor"
out=$(cd "$C" && python3 -c '
import os
with open("x", "w+") as f:
    f.write("abc" * 5000)
    f.flush()
    print(os.fstat(f.fileno()).st_size, end=" ")
    f.seek(0)
    print(len(f.read()))
')
expect_eq "$out" "15000 15000" "fstat size and read back on the writing descriptor"
expect_eq "$(stat -c %s "$C/x")" "15000" "the size once closed"

step "2. a document rewritten longer reads back whole on its descriptor"
echo '{"a": 1}' > "$C/long.json"
out=$(python3 - "$C/long.json" <<'PY'
import json, os, sys
new = '{"a": 1, "b": "' + "x" * 3000 + '"}'
with open(sys.argv[1], "r+") as f:
    f.write(new)
    f.flush()
    size = os.fstat(f.fileno()).st_size
    f.seek(0)
    got = f.read()
print(size == len(new), got == new)
PY
)
expect_eq "$out" "True True" "the longer document read back on its descriptor"
expect_eq "$(jq -r '.b | length' "$C/long.json")" "3000" "the longer document once closed"

if command -v fio >/dev/null; then
	step "2. fio --verify_backlog reads back what it wrote on the same file"
	fio --name=vb --directory="$C" --filename=fio.dat --size=2M --bs=4k --rw=randwrite \
		--ioengine=psync --verify=crc32c --verify_backlog=8 --do_verify=1 \
		--output="$T/fio.out" > /dev/null 2>&1 ||
		fail "fio --verify_backlog: $(grep -iE 'err|verify' "$T/fio.out" | head -n 5)"
	grep -q 'err= 0' "$T/fio.out" || fail "fio reported errors: $(cat "$T/fio.out")"
	rm "$C/fio.dat"
else
	fail "fio is missing (tests/run.sh installs it)"
fi

step "3. : > log.txt empties a scratch file"
printf 'line 1\nline 2\n' > "$C/log.txt"
: > "$C/log.txt"
expect_eq "$(stat -c %s "$C/log.txt")" "0" ": > log.txt: st_size"
expect_eq "$(wc -c < "$C/log.txt")" "0" ": > log.txt: content"
printf 'abc' > "$C/log.txt"
python3 -c "import os; os.close(os.open('$C/log.txt', os.O_WRONLY | os.O_TRUNC))"
expect_eq "$(wc -c < "$C/log.txt")" "0" "open(O_TRUNC) and close: content"

step "3. : > doc.json makes the empty document; a failed rewrite still changes nothing"
printf '{"_id": "e", "a": 1, "b": [1, 2]}' > "$C/e.json"
: > "$C/e.json"
expect_eq "$(jq -c . "$C/e.json")" '{"_id":"e"}' ": > e.json"
expect_eq "$(cat "$C/query/{_id: 'e'}")" '{"_id": "e"}' "the emptied document as a query sees it"
echo '{"a": 2}' > "$C/e.json"
if echo 'not json' > "$C/e.json" 2>/dev/null; then
	fail "invalid JSON written over a document returned 0"
fi
expect_eq "$(jq -c . "$C/e.json")" '{"_id":"e","a":2}' "a failed write with O_TRUNC changed nothing"

step "4. atime is kept (touch -a, utimensat with only atime), apart from mtime"
echo data > "$C/at.txt"
echo '{"n": 1}' > "$C/at.json"
touch -m -d '2022-02-02 02:02:02 UTC' "$C/at.txt" "$C/at.json"
touch -a -d '2020-01-01 00:00:00 UTC' "$C/at.txt" "$C/at.json"
for f in at.txt at.json; do
	expect_eq "$(stat -c '%X %Y' "$C/$f")" "1577836800 1643767322" "$f: atime and mtime"
done
python3 - "$C/at.txt" <<'PY' || fail "utimensat with nanoseconds"
import os, sys
os.utime(sys.argv[1], ns=(1_500_000_000_123_456_789, 1_600_000_000_987_654_321))
st = os.stat(sys.argv[1])
assert (st.st_atime_ns, st.st_mtime_ns) == (1_500_000_000_123_456_789, 1_600_000_000_987_654_321), st
PY
touch -a -d '2019-05-05 05:05:05 UTC' "$C/new-at.json"
expect_eq "$(stat -c %X "$C/new-at.json")" "1557032705" "touch -a of a new document"
expect_eq "$(jq -c . "$C/new-at.json")" '{"_id":"new-at"}' "touch -a made the empty document"
echo more >> "$C/at.txt"
expect_eq "$(stat -c %X "$C/at.txt")" "1500000000" "a write leaves atime"

step "5. creating an entry updates the collection's mtime and ctime"
ctimes() { python3 -c "import os, sys; s = os.stat(sys.argv[1]); print(s.st_mtime_ns, s.st_ctime_ns)" "$1"; }
check_newer() { # WHAT BEFORE AFTER: both numbers of AFTER greater
	local b1 b2 a1 a2
	read -r b1 b2 <<< "$2"
	read -r a1 a2 <<< "$3"
	[ "$a1" -gt "$b1" ] && [ "$a2" -gt "$b2" ] || fail "$1: mtime/ctime $2 -> $3"
}
for how in "touch $C/c1.txt" "sh -c 'echo {} > $C/c2.json'" "ln -s target $C/c3.lnk" \
	"mknod $C/c4.txt p" "python3 -c 'import os; os.mknod(\"$C/c5.txt\")'" \
	"sh -c 'printf \"{\\\"_id\\\": \\\"c6\\\"}\" > $C/.insert'" "rm $C/c1.txt" "mv $C/c2.json $C/c7.json"; do
	before=$(ctimes "$C")
	sleep 0.02
	eval "$how" 2>/dev/null || true
	after=$(ctimes "$C")
	case $how in
	mknod*) ;; # a fifo is refused in a collection (item 6)
	*) check_newer "$how" "$before" "$after" ;;
	esac
done

step "5. a file's ctime changes on chmod, chown, rename and write"
echo x > "$C/ct.txt"
echo '{"v": 1}' > "$C/ct.json"
for f in ct.txt ct.json; do
	cur=$f
	for how in "chmod 600" "chown 1:1" "mv" "mv" "touch -m -d 2001-01-01"; do
		before=$(stat -c %.9Z "$C/$cur")
		sleep 0.02
		if [ "$how" = mv ]; then # away to another name, then back
			new=$([ "$cur" = "$f" ] && echo "tmp-$f" || echo "$f")
			mv "$C/$cur" "$C/$new"
			cur=$new
		else
			$how "$C/$cur"
		fi
		after=$(stat -c %.9Z "$C/$cur")
		[ "${after/./}" -gt "${before/./}" ] || fail "$how $cur: ctime $before -> $after"
	done
done
before=$(stat -c %.9Z "$C/ct.txt")
sleep 0.02
echo more >> "$C/ct.txt"
after=$(stat -c %.9Z "$C/ct.txt")
[ "${after/./}" -gt "${before/./}" ] || fail "write: ctime $before -> $after"
before=$(stat -c %.9Z "$C/ct.json")
sleep 0.02
echo '{"v": 2}' > "$C/ct.json"
after=$(stat -c %.9Z "$C/ct.json")
[ "${after/./}" -gt "${before/./}" ] || fail "document write: ctime $before -> $after"

step "7. a scratch file stops at 256 MiB: the write that crosses it fails with EFBIG"
if out=$(dd if=/dev/zero of="$C/big.bin" bs=1M count=257 2>&1); then
	fail "dd of 257 MiB into a scratch file succeeded"
fi
case $out in
*"File too large"*"256+0 records out"*) ;;
*) fail "dd did not stop with EFBIG at the 257th MiB: $out" ;;
esac
expect_eq "$(stat -c %s "$C/big.bin")" "268435456" "the 256 MiB before the limit are kept"
if out=$(printf x 2>&1 >> "$C/big.bin"); then
	fail "an append past the limit succeeded"
fi
expect_eq "$(python3 -c "
import os
fd = os.open('$C/big.bin', os.O_WRONLY)
try:
    os.ftruncate(fd, 256 * 1024 * 1024 + 1)
    print('ok')
except OSError as e:
    print(e.strerror)
os.close(fd)")" "File too large" "ftruncate past the limit"
rm "$C/big.bin"

step "4. atime survives a remount"
unmount_docfs
mount_docfs
expect_eq "$(stat -c %X "$C/at.json")" "1577836800" "the document's atime after a remount"
expect_eq "$(stat -c %X "$C/new-at.json")" "1557032705" "the new document's atime after a remount"
expect_eq "$(stat -c %Y "$C/at.json")" "1643767322" "its mtime after a remount"

unmount_docfs
"$DOCFS" check "$STORE" > "$T/check.out" 2>&1 || fail "docfs check: $(cat "$T/check.out")"
echo ok
