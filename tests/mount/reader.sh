#!/usr/bin/env bash
# reader.sh - the /dev/fuse reader follows its callers (fs/fuse/mount.c note 3): with two CPUs or
# more it runs at SCHED_IDLE and pins itself to the CPU of the process whose requests it
# serves (/.docfs/status: readerFollows, readerMoves), what it serves is exact, and busy
# tasks on its CPU do not starve it (fs/fuse/idle.c's watchdog raises it). Without the right to
# leave SCHED_IDLE again, and with -o uring (uring.sh checks every thread's policy and
# CPUs), it stays an ordinary thread.
. "$(dirname "$0")/lib.sh"
if [ "$(getconf _NPROCESSORS_ONLN)" -lt 2 ]; then
	echo "SKIP: one CPU online: the reader has no other CPU to follow a caller to"
	exit 77
fi
policy() { # the reader's scheduling policy (0: normal, 5: SCHED_IDLE)
	local pid
	pid=$(daemon_pid)
	sed 's/.*) //' "/proc/$pid/task/$pid/stat" | cut -d' ' -f39
}
# settle_idle: waits until the reader is back at SCHED_IDLE: a raised one goes back at its
# next request once its second at normal priority is over (fs/fuse/idle.c note 2). The request
# is a quick one from CPU 0 (a warm open), which leaves its CPUs as they are.
settle_idle() {
	for _ in 1 2 3 4 5; do
		[ "$(policy)" = 5 ] && return 0
		sleep 1.1
		taskset -c 0 cat "$C/1.json" > /dev/null
	done
	[ "$(policy)" = 5 ]
}
pkill_hogs() {
	local rc=$?
	pkill -f "docfs-reader-hog-$$" 2> /dev/null || true
	cleanup "$rc"
}
trap pkill_hogs EXIT

N=300
C=$MNT/db/c

status_field() { # NAME: the value after "NAME": in /.docfs/status
	sed -n "s/.*\"$1\": \([a-z0-9]*\).*/\1/p" "$MNT/.docfs/status"
}
# pass CPU: on that CPU, opens and reads every numbered document (warm: each open is a
# request the reader serves itself); prints the bytes read and the CPUs the reader (the
# daemon's main thread) may run on right after the last read (a listing, served by a worker,
# or the process's exit may unpin it: note 3).
pass() {
	taskset -c "$1" python3 - "$C" "$(daemon_pid)" <<'EOF'
import os, sys
d, pid = sys.argv[1:3]
total = 0
names = sorted(n for n in os.listdir(d) if n.endswith(".json") and n[0].isdigit())
for _ in range(3):
    for name in names:
        with open(os.path.join(d, name), "rb") as f:
            total += len(f.read())
cpus = [l.split()[1] for l in open("/proc/%s/status" % pid) if l.startswith("Cpus_allowed_list")]
print(total, cpus[0])
EOF
}

step "it moves to the CPU of the process it serves, and back, at SCHED_IDLE"
mount_docfs
expect_eq "$(status_field readerFollows)" "true" "readerFollows in /.docfs/status"
mkdir -p "$C"
seq 1 "$N" | sed 's/.*/{"_id": &, "city": "c&"}/' > "$C/.insert"
cat "$C"/*.json > /dev/null # now warm: opens are served by the reader itself
moves=$(status_field readerMoves)
read -r B1 cpus < <(pass 1)
expect_eq "$cpus" "1" "the reader's CPUs after a process on CPU 1 read $N documents"
# At normal priority only while workers have requests (none here: all were quick), or for
# a second after the watchdog raised it (a busy machine: another test's daemon exiting).
settle_idle || fail "the reader stayed at scheduling policy $(policy) (5: SCHED_IDLE)"
read -r B0 cpus < <(pass 0)
expect_eq "$cpus" "0" "the reader's CPUs after a process on CPU 0 read them"
expect_eq "$B0" "$B1" "bytes read on CPU 0 and on CPU 1"
[ "$(status_field readerMoves)" -ge $((moves + 2)) ] ||
	fail "readerMoves went from $moves to $(status_field readerMoves) (expected 2 more at least)"
python3 - "$C" <("$DOCFS" export "$STORE" db.c) <<'EOF' || fail "documents read through the mount differ from docfs export"
import json, os, sys
d, exp = sys.argv[1], sys.argv[2]
want = {str(doc["_id"]) + ".json": doc for doc in map(json.loads, open(exp))}
names = [n for n in os.listdir(d) if n.endswith(".json")]
assert sorted(names) == sorted(want), "names differ"
for n in names:
    with open(os.path.join(d, n)) as f:
        assert json.load(f) == want[n], n
EOF

step "busy tasks on its CPU do not starve it: the watchdog raises it"
# In the foreground the daemon shares the test's scheduling group (autogroup), so hogs
# started here compete with the SCHED_IDLE reader directly (fs/fuse/idle.c note 2).
unmount_docfs
mount_fg
write_heavy "$C/heavy.json"
cat "$C"/*.json > /dev/null
# Read before the pass: /.docfs/status is opened by a worker, which unpins the reader.
boosts=$(status_field starvedBoosts)
read -r _ cpus < <(pass 0)
expect_eq "$cpus" "0" "the reader's CPUs after a process on CPU 0 read the documents"
# A reader raised during the pass is not starved, so would not be raised again below.
settle_idle || fail "the reader stayed at scheduling policy $(policy) (5: SCHED_IDLE)"
sync
echo 1 > /proc/sys/vm/drop_caches # pages only: the read below must reach the daemon, and
# without a lookup (a worker's: note 3 unpins the reader then)
for _ in 1 2; do
	taskset -c 0 bash -c 'exec -a docfs-reader-hog-'$$' bash -c "while :; do :; done"' &
done
sleep 0.2
taskset -c 0 cat "$C/heavy.json" > "$T/heavy.read"
pkill -f "docfs-reader-hog-$$"
cmp <(jq -c . "$T/heavy.read") <(jq -c . "$C/heavy.json") || fail "the document read under load differs"
[ "$(status_field starvedBoosts)" -gt "$boosts" ] ||
	fail "the reader was not raised while hogs shared its CPU: $(cat "$MNT/.docfs/status")"
echo "   $(cat "$MNT/.docfs/status")"

step "a daemon that may not leave SCHED_IDLE again keeps an ordinary reader"
# Root without CAP_SYS_NICE (as in many containers) and RLIMIT_NICE 0: the kernel refuses
# SCHED_IDLE -> SCHED_OTHER, so the watchdog could not raise a starved reader.
unmount_docfs
prlimit --nice=0:0 setpriv --bounding-set=-sys_nice --inh-caps=-sys_nice \
	"$DOCFS" mount -o "log=$T/log" "$STORE" "$MNT"
mountpoint -q "$MNT" || fail "not mounted without CAP_SYS_NICE"
read -r _ cpus < <(pass 1)
expect_eq "$(status_field readerFollows)" "false" "readerFollows without CAP_SYS_NICE"
pid=$(daemon_pid)
for t in /proc/"$pid"/task/*; do
	expect_eq "$(sed 's/.*) //' "$t/stat" | cut -d' ' -f39)" "0" \
		"scheduling policy of thread ${t##*/} without CAP_SYS_NICE"
done

step "nothing went wrong in the daemon; docfs check passes"
unmount_docfs
! grep -i "cannot" "$T/log" || fail "the daemon logged a failure"
"$DOCFS" check "$STORE" > /dev/null || fail "docfs check failed"
