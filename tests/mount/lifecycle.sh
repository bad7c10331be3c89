#!/usr/bin/env bash
# lifecycle.sh - objects that go away or change while something still holds them: a dropped
# database (here, and through a second mount of the store that makes it again),
# an open .insert next to other writes, a collection removed under open files, a
# created document unlinked before it was written, a document replaced while open, a new
# collection used as a working directory, setattr while another process holds the write
# lock, and SIGTERM with a document and a directory open. Each of these once crashed the daemon, hung a client or wrote where it must not.
. "$(dirname "$0")/lib.sh"
mount_docfs
mkdir -p "$MNT/db/c"

step "a dropped database can be listed around and made again (no use after free)"
mkdir "$MNT/xdb"
rmdir "$MNT/xdb"
sleep 0.5
ls "$MNT" > /dev/null || fail "ls / after dropping a database"
mkdir "$MNT/xdb" || fail "mkdir of a dropped database's name"
echo '{}' > "$T/empty"
mkdir "$MNT/xdb/c" && cp "$T/empty" "$MNT/xdb/c/1.json" || fail "writing into the new database"

step "a database dropped and made again through a second mount: writes here reach the new one"
# This mount still has the old file open: before the fix its view stayed empty for good and
# a collection made here went into the unlinked file, lost (store/db.c note 7).
M2=$T/mnt2
mkdir -p "$M2"
trap 'rc=$?; fusermount3 -u "$M2" 2>/dev/null || true; cleanup $rc' EXIT
"$DOCFS" mount -o "log=$T/log2${MOUNT_OPTS:+,$MOUNT_OPTS}" "$STORE" "$M2"
mkdir "$MNT/rdb"
ls "$M2/rdb" > /dev/null # the second mount opens it and watches it
rmdir "$M2/rdb"
mkdir "$M2/rdb" "$M2/rdb/c"
echo '{"v": 1}' > "$M2/rdb/c/one.json"
# Right away this mount may not have seen the drop yet: a write then fails, or goes to the
# new database. Never into the old file.
early=
if mkdir "$MNT/rdb/early" 2> /dev/null; then early="early "; fi
for _ in $(seq 1 30); do
	[ -d "$MNT/rdb/c" ] && break
	sleep 0.1
done
expect_eq "$(ls "$MNT/rdb" | tr '\n' ' ')" "c ${early}" "the new database through this mount"
expect_eq "$(jq -c . "$MNT/rdb/c/one.json")" '{"_id":"one","v":1}' "its document"
mkdir "$MNT/rdb/late"
echo '{"v": 2}' > "$MNT/rdb/late/two.json"
expect_eq "$(ls "$M2/rdb" | tr '\n' ' ')" "c ${early}late " "the other mount sees this one's writes"
expect_eq "$(jq -c . "$M2/rdb/late/two.json")" '{"_id":"two","v":2}' "the document written here"
# Neither daemon keeps the dropped file open: its space is freed now, not at unmount.
for pid in "$(daemon_pid)" "$(pgrep -f -- "docfs mount .*$STORE $M2" | head -n1)"; do
	[ -n "$pid" ] || fail "a daemon of the two mounts is not running"
	held=$(ls -l "/proc/$pid/fd" | grep -c "$STORE/.*(deleted)" || true)
	expect_eq "$held" "0" "unlinked store files daemon $pid holds open"
done
fusermount3 -u "$M2"
"$DOCFS" check "$STORE" > /dev/null || fail "docfs check after the drop through the other mount"

step "an open .insert does not hold up other writers (same process, then another)"
timeout 20 python3 - "$MNT/db/c" <<'PY' || fail "a write next to an open .insert hung or failed"
import os, sys
c = sys.argv[1]
ins = os.open(c + "/.insert", os.O_WRONLY)
os.write(ins, b'{"_id": "ins1"}\n')
fd = os.open(c + "/x.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b'{"v": 1}')
os.close(fd)
os.write(ins, b'{"_id": "ins2"}\n')
os.close(ins)
PY
expect_eq "$(ls "$MNT/db/c" | grep -c 'ins[12]\.json')" "2" "documents of the .insert"
timeout 10 cp "$T/empty" "$MNT/db/c/y.json" || fail "a write by another process"

step "a collection removed under open files gets no orphan rows"
mkdir "$MNT/db/gone"
python3 - "$MNT/db/gone" <<'PY' || fail "writes into a dropped collection did not fail"
import os, sys, errno
c = sys.argv[1]
fd = os.open(c + "/a.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.rmdir(c)
os.write(fd, b'{"v": 1}')
try:
    os.close(fd)
except OSError as e:
    sys.exit(0 if e.errno == errno.ENOENT else 1)
sys.exit(1)
PY
"$DOCFS" check "$STORE" > /dev/null || fail "docfs check after writes into a dropped collection"

step "a created document unlinked before its first write stays gone"
exec 3> "$MNT/db/c/p.json"
rm "$MNT/db/c/p.json"
echo '{"x": 1}' >&3
exec 3>&-
sleep 0.3
[ ! -e "$MNT/db/c/p.json" ] || fail "p.json came back after being unlinked"

step "a document replaced by rename while open: the old descriptor writes nowhere"
echo '{"v": "old"}' > "$MNT/db/c/b.json"
echo '{"v": "new"}' > "$MNT/db/c/t"
python3 - "$MNT/db/c" <<'PY' || fail "the replaced document's descriptor"
import os, sys
c = sys.argv[1]
fd = os.open(c + "/b.json", os.O_RDWR)
os.rename(c + "/t", c + "/b.json")
os.ftruncate(fd, 0)
os.write(fd, b'{"v": "stale"}')
os.close(fd)
PY
grep -q '"new"' "$MNT/db/c/b.json" || fail "b.json after the rename: $(cat "$MNT/db/c/b.json")"

step "a collection made by this mount works as a working directory at once"
for i in 1 2 3 4 5; do
	mkdir "$MNT/db/cwd$i"
	(cd "$MNT/db/cwd$i" && sleep 0.3 && python3 -c 'import os; os.getcwd()') ||
		fail "getcwd inside a new collection (round $i)"
done

step "setattr while another process holds the write lock fails cleanly (EBUSY)"
python3 - "$STORE/db.db" "$T/locked" <<'PY' &
import sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
con.execute("BEGIN IMMEDIATE")
open(sys.argv[2], "w").close()
time.sleep(12)
con.execute("ROLLBACK")
PY
locker=$!
# Once it holds the lock (a fixed sleep lost the race on a loaded machine).
wait_file "$T/locked" || fail "the locker did not take the write lock"
expect_fail "chmod under a held write lock" chmod 600 "$MNT/db/c/b.json"
wait "$locker"
chmod 600 "$MNT/db/c/b.json" || fail "chmod after the lock is released (the mount died?)"
expect_eq "$(stat -c %a "$MNT/db/c/b.json")" "600" "mode after the lock"

step "SIGTERM with a document and a directory open: the daemon frees them and exits"
python3 - "$MNT/db/c" "$T/held" "$T/go" <<'PY' &
import os, sys, time
c, held, go = sys.argv[1:4]
fd = os.open(c + "/unflushed.json", os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b'{"v": "never closed"}')
d = os.open(c, os.O_RDONLY | os.O_DIRECTORY)
os.listdir(d)
open(held, "w").close()
while not os.path.exists(go):
    time.sleep(0.05)
PY
holder=$!
wait_file "$T/held" || fail "the files were not opened"
pid=$(daemon_pid)
kill -TERM "$pid"
wait_gone "$pid" || fail "the daemon is still running 10 s after SIGTERM with files open"
touch "$T/go"
wait "$holder" || true
grep -q "ended with 2 files or directories open" "$T/log" ||
	fail "the log does not say what was open: $(tail -n 3 "$T/log")"
sanitizer_reports # a handle the daemon did not free is a leak report here
mountpoint -q "$MNT" && fusermount3 -u "$MNT"
mount_docfs
[ ! -e "$MNT/db/c/unflushed.json" ] || fail "a document never closed was created"
expect_eq "$(jq -c . "$MNT/db/c/x.json")" '{"_id":"x","v":1}' "x.json after the SIGTERM"
echo ok
