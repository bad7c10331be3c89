#!/usr/bin/env bash
# attrs.sh - file metadata: chmod, chown and touch -d are kept and survive a remount; new
# files belong to the caller (allow_other, a document created as nobody); default_permissions
# makes the kernel enforce mode bits; df (statfs); symlinks are scratch entries (readlink,
# ls -l) and never documents; inode numbers and mtimes of every file survive a remount.
. "$(dirname "$0")/lib.sh"
mount_docfs allow_other
chmod 755 "$T" # mktemp -d made it 0700: let nobody reach the mount point

C=$MNT/db/c
A=$C/a.json
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)

remount() {
	unmount_docfs
	! mountpoint -q "$MNT" || fail "still mounted after unmount_docfs"
	mount_docfs allow_other
}

# Every file and directory under the mount except /.docfs: name, inode, mtime, size.
tree_stat() {
	(cd "$MNT" && find . -mindepth 1 -path ./.docfs -prune -o -print0 | sort -z |
		xargs -0 stat -c '%n %i %Y %s')
}

step "set up documents"
mkdir -p "$C"
echo '{"name": "a"}' > "$A"
echo '{"name": "b"}' > "$C/b.json"
echo '{"name": "c"}' > "$C/c.json"
echo 'plain scratch bytes' > "$C/notes.txt"

step "chmod is kept and shown by stat"
expect_eq "$(stat -c %a "$A")" "644" "mode of a new document (umask 022)"
chmod 640 "$A"
expect_eq "$(stat -c %a "$A")" "640" "mode after chmod 640"
chmod 600 "$C/notes.txt"
expect_eq "$(stat -c %a "$C/notes.txt")" "600" "mode of the scratch file after chmod"
chmod 750 "$C"
expect_eq "$(stat -c %a "$C")" "750" "mode of the collection after chmod"
chmod 755 "$C"

step "chown by root"
chown 1234:1234 "$C/b.json"
expect_eq "$(stat -c %u:%g "$C/b.json")" "1234:1234" "owner after chown"
chown :4321 "$C/b.json"
expect_eq "$(stat -c %u:%g "$C/b.json")" "1234:4321" "owner after chgrp"

step "touch -d sets the mtime exactly"
touch -d '2020-01-02 03:04:05' "$C/c.json"
want=$(date -d '2020-01-02 03:04:05' +%s)
expect_eq "$(stat -c %Y "$C/c.json")" "$want" "mtime after touch -d"
expect_eq "$(stat -c %y "$C/c.json")" "$(date -d '2020-01-02 03:04:05' '+%Y-%m-%d %H:%M:%S.000000000 %z')" \
	"full mtime after touch -d"
touch -d '2021-06-07 08:09:10.123456789' "$C/notes.txt"
expect_eq "$(stat -c %y "$C/notes.txt")" \
	"$(date -d '2021-06-07 08:09:10.123456789' '+%Y-%m-%d %H:%M:%S.%N %z')" \
	"nanosecond mtime of the scratch file"

step "cp -p and install -m: a new document takes the mode and times set before its close"
# cp -p sets the times and the mode on the open file, before the close that stores it.
echo '{"name": "p"}' > "$T/p.json"
chmod 640 "$T/p.json"
touch -d '2019-05-06 07:08:09.5' "$T/p.json"
cp -p "$T/p.json" "$C/p.json"
expect_eq "$(stat -c '%a %y' "$C/p.json")" "$(stat -c '%a %y' "$T/p.json")" "mode and mtime after cp -p"
install -m 604 "$T/p.json" "$C/i.json"
expect_eq "$(stat -c %a "$C/i.json")" "604" "mode after install -m 604"
python3 - "$C/o.json" <<'PY' || fail "os.fchmod and os.utime on an open new document"
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, b'{"name": "o"}')
os.fchmod(fd, 0o600)
os.utime(fd, ns=(1500000000123456789, 1500000000123456789))
assert os.fstat(fd).st_mode & 0o7777 == 0o600, oct(os.fstat(fd).st_mode)
os.close(fd)
st = os.stat(sys.argv[1])
assert st.st_mode & 0o7777 == 0o600, oct(st.st_mode)
assert st.st_mtime_ns == 1500000000123456789, st.st_mtime_ns
PY

step "chmod, chown and mtime survive a remount"
remount
expect_eq "$(stat -c %a "$A")" "640" "mode after remount"
expect_eq "$(stat -c %a "$C/notes.txt")" "600" "scratch mode after remount"
expect_eq "$(stat -c %u:%g "$C/b.json")" "1234:4321" "owner after remount"
expect_eq "$(stat -c %Y "$C/c.json")" "$want" "mtime after remount"
expect_eq "$(stat -c %y "$C/notes.txt")" \
	"$(date -d '2021-06-07 08:09:10.123456789' '+%Y-%m-%d %H:%M:%S.%N %z')" \
	"nanosecond mtime after remount"
expect_eq "$(jq -c . "$C/c.json")" '{"_id":"c","name":"c"}' "content after remount"

step "a rewrite keeps mode and owner, and moves the mtime forward"
echo '{"name": "b2"}' > "$C/b.json"
expect_eq "$(stat -c %u:%g:%a "$C/b.json")" "1234:4321:644" "owner and mode after a rewrite"
[ "$(stat -c %Y "$C/b.json")" -ge "$(($(date +%s) - 5))" ] || fail "mtime not updated by a write"

step "new files belong to the caller (allow_other)"
chmod 777 "$C"
"${NOBODY[@]}" sh -c 'echo "{\"by\": \"nobody\"}" > "$1"' sh "$C/n.json" ||
	fail "nobody cannot create a document in a 777 collection"
expect_eq "$(stat -c %u:%g "$C/n.json")" "65534:65534" "owner of a document made by nobody"
expect_eq "$(jq -c . "$C/n.json")" '{"_id":"n","by":"nobody"}' "content of n.json"
"${NOBODY[@]}" sh -c 'echo scratch > "$1"' sh "$C/n.txt" ||
	fail "nobody cannot create a scratch file"
expect_eq "$(stat -c %u:%g "$C/n.txt")" "65534:65534" "owner of a scratch file made by nobody"
expect_eq "$(stat -c %u:%g "$A")" "0:0" "owner of a document made by root"

step "default_permissions: the kernel enforces mode bits"
chmod 600 "$A"
expect_eq "$(stat -c %u:%a "$A")" "0:600" "a.json is root's, 600"
if out=$("${NOBODY[@]}" cat "$A" 2>&1); then
	fail "nobody read a root 600 file: $out"
fi
case "$out" in
*"Permission denied"*) ;;
*) fail "nobody cat a.json: expected 'Permission denied', got '$out'" ;;
esac
if "${NOBODY[@]}" sh -c 'echo "{}" > "$1"' sh "$A" 2>/dev/null; then
	fail "nobody wrote a root 600 file"
fi
expect_eq "$(jq -c . "$A")" '{"_id":"a","name":"a"}' "a.json after nobody's write attempt"
chmod 644 "$A"
expect_eq "$("${NOBODY[@]}" jq -c .name "$A")" '"a"' "nobody reads a 644 file"
chmod 755 "$C"
if "${NOBODY[@]}" sh -c 'echo "{}" > "$1"' sh "$C/m.json" 2>/dev/null; then
	fail "nobody created a document in a 755 collection of root"
fi
[ ! -e "$C/m.json" ] || fail "m.json exists"

step "df and stat -f (statfs)"
out=$(df "$MNT") || fail "df failed"
expect_eq "$(df --output=target "$MNT" | tail -n1)" "$MNT" "df mount point"
expect_eq "$(stat -f -c %l "$MNT")" "255" "maximum name length"
[ "$(stat -f -c %b "$MNT")" -gt 0 ] || fail "statfs reports no blocks"

step "symlinks"
names=$(ls "$C" | sort | tr '\n' ' ')
ln -s target "$C/link"
ln -s ../c/a.json "$C/alink"
expect_eq "$(readlink "$C/link")" "target" "readlink link"
expect_eq "$(readlink "$C/alink")" "../c/a.json" "readlink alink"
[ -L "$C/link" ] || fail "link is not a symlink"
expect_eq "$(stat -c %F "$C/link")" "symbolic link" "stat type of link"
expect_eq "$(stat -c %s "$C/link")" "6" "size of the link (length of its target)"
ls -l "$C" | grep -q -- ' link -> target$' || fail "ls -l does not show 'link -> target'"
expect_eq "$(jq -c .name "$C/alink")" '"a"' "reading through a symlink to a document"
[ ! -e "$C/link" ] || fail "dangling link resolves"
expect_eq "$(ls "$C" | sort | tr '\n' ' ')" "$(printf '%s\n' $names alink link | sort | tr '\n' ' ')" \
	"names with the symlinks"
ndocs=$(ls "$C"/*.json | wc -l)
expect_eq "$("$DOCFS" export "$STORE" db.c | wc -l)" "$ndocs" "exported documents (no symlinks)"
expect_fail "symlink named like a document" ln -s target "$C/l.json"
[ ! -L "$C/l.json" ] || fail "l.json is a symlink"

step "inode numbers, mtimes and sizes of every file survive a remount"
before=$(tree_stat)
expect_eq "$(wc -l <<<"$before")" "$(cd "$MNT" && find . -mindepth 1 -path ./.docfs -prune -o -print | wc -l)" \
	"stat listing covers every file"
grep -q '^\./db/c/a.json ' <<<"$before" || fail "listing lacks a.json"
sleep 1
remount
after=$(tree_stat)
expect_eq "$after" "$before" "stat listing after remount"
expect_eq "$(readlink "$C/link")" "target" "readlink after remount"
expect_eq "$(stat -c %u:%g "$C/n.json")" "65534:65534" "owner of n.json after remount"

step "docfs check passes"
"$DOCFS" check "$STORE" >/dev/null || fail "docfs check"
echo "ok"
