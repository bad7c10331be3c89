# tests/mount/lib.sh - shared helpers of the mount tests: a fresh store and mount point in a
# temporary directory, mounting and unmounting (always, from a trap), and assertions that
# print what differed. Source it from a test script; $DOCFS is the binary under test.
set -euo pipefail
[ -e /dev/fuse ] || { echo "SKIP: no /dev/fuse"; exit 77; }
DOCFS=${DOCFS:?DOCFS must name the docfs binary}
T=$(mktemp -d /tmp/docfs-mt.XXXXXX)
STORE=$T/store
MNT=$T/mnt
mkdir -p "$STORE" "$MNT"
# Sanitizer reports of the daemon (its stderr is gone once it daemonizes) land here.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}log_path=$T/asan"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-}${UBSAN_OPTIONS:+:}log_path=$T/ubsan"

# DOCFS_MOUNT_OPTS: more `docfs mount -o` options for every mount (meson's mount-uring-*
# tests run some scripts again with `uring`, which needs the kernel's FUSE over io_uring:
# its module parameter is turned on for the test and put back after it).
MOUNT_OPTS=${DOCFS_MOUNT_OPTS:-}
URING_PARAM=/sys/module/fuse/parameters/enable_uring
URING_WAS=
if [[ ",$MOUNT_OPTS," == *,uring,* ]]; then
	if [ ! -w "$URING_PARAM" ]; then
		echo "SKIP: this kernel has no FUSE over io_uring ($URING_PARAM missing or read-only)"
		exit 77
	fi
	URING_WAS=$(cat "$URING_PARAM")
	echo Y > "$URING_PARAM"
fi

daemon_pid() {
	pgrep -f -- "docfs mount .*$STORE $MNT" | head -n1 || true
}

# mount_docfs [extra -o options]
mount_docfs() {
	"$DOCFS" mount -o "log=$T/log,notify_ms=100${MOUNT_OPTS:+,$MOUNT_OPTS}${1:+,$1}" "$STORE" "$MNT"
	mountpoint -q "$MNT" || fail "not mounted after docfs mount returned"
}

# With -o uring, requests must really have come through the ring: a mount that silently
# fell back to /dev/fuse would test nothing new.
ring_used() {
	local st
	[ -n "$URING_WAS" ] || return 0
	st=$(cat "$MNT/.docfs/status" 2>/dev/null) || return 0 # not mounted any more
	case $st in
	*'"transport": "io_uring"'*) ;;
	*)
		echo "FAIL: mounted with -o uring, but /.docfs/status says: $st" >&2
		RING_FAILED=1
		return 0
		;;
	esac
	case $st in
	*'"ringRequests": 0,'*)
		echo "FAIL: no request came through the ring: $st" >&2
		RING_FAILED=1
		;;
	esac
	return 0
}

# wait_gone PID: waits up to 10 s for the process to end; fails if it is still running.
# Gone, or a zombie (an exited daemon may be left unreaped in a container), counts as ended.
wait_gone() {
	for _ in $(seq 1 100); do
		case "$(ps -o stat= -p "$1" 2>/dev/null)" in
		"" | Z*) return 0 ;;
		esac
		sleep 0.1
	done
	return 1
}

# wait_file PATH: waits up to 10 s for PATH to exist; returns 1 if it never does.
wait_file() {
	for _ in $(seq 1 100); do
		[ -e "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

# mount_fg [OPTS]: mounts in the foreground (-f: the daemon stays in the test's scheduling
# group, so CPU hogs started here compete with its threads directly) and waits until live.
mount_fg() {
	"$DOCFS" mount -f -o "log=$T/log${1:+,$1}" "$STORE" "$MNT" 2> "$T/fg.err" &
	wait_mounted || fail "docfs mount -f did not mount: $(cat "$T/fg.err")"
}

# wait_mounted: waits up to 10 s for the mount to be live; returns 1 if it never is.
wait_mounted() {
	for _ in $(seq 1 100); do
		mountpoint -q "$MNT" && return 0
		sleep 0.1
	done
	return 1
}

# write_heavy PATH: writes a 9.8 MB document of 150,000 small subdocuments (long to load and
# render) to PATH.
write_heavy() {
	python3 -c '
import json
print(json.dumps({"_id": "heavy", "a": [{"k": i, "s": "x" * 20} for i in range(150000)]}))
' > "$1"
}

unmount_docfs() {
	local pid
	pid=$(daemon_pid)
	if mountpoint -q "$MNT"; then
		ring_used
		fusermount3 -u "$MNT" 2>/dev/null || { sleep 1; fusermount3 -u "$MNT" 2>/dev/null; } ||
			fusermount3 -uz "$MNT" 2>/dev/null || true
	fi
	# Wait for the daemon to finish (it checkpoints and frees on the way out).
	[ -z "$pid" ] || wait_gone "$pid" || true
	sanitizer_reports
}

sanitizer_reports() {
	local f
	for f in "$T"/asan.* "$T"/ubsan.*; do
		[ -e "$f" ] || continue
		echo "sanitizer report from the daemon ($f):" >&2
		cat "$f" >&2
		rm -f "$f"
		SANITIZER_FAILED=1
	done
}

SANITIZER_FAILED=0
RING_FAILED=0
# cleanup [RC]: the EXIT trap (RC: the script's exit status, for a trap of a script's own
# that calls this one last; a `(exit $rc)` there would end the trap under set -e).
cleanup() {
	local rc=${1:-$?}
	unmount_docfs
	if [ "$SANITIZER_FAILED" -ne 0 ] || [ "$RING_FAILED" -ne 0 ]; then
		[ "$rc" -ne 0 ] || rc=1
	fi
	[ -z "$URING_WAS" ] || echo "$URING_WAS" > "$URING_PARAM"
	rm -rf "$T"
	exit "$rc"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	if [ -f "$T/log" ]; then
		echo "--- docfs log (last lines)" >&2
		tail -n 20 "$T/log" >&2
	fi
	exit 1
}

# expect_eq ACTUAL EXPECTED WHAT
expect_eq() {
	[ "$1" == "$2" ] || fail "$3: expected '$2', got '$1'"
}

# expect_fail WHAT command... : the command must fail
expect_fail() {
	local what=$1
	shift
	if "$@" 2>/dev/null; then
		fail "$what: succeeded but should have failed"
	fi
}

step() {
	echo "-- $*"
}

# errors_mark: a time stamp to pass to errors_since.
errors_mark() {
	date -u +%Y-%m-%dT%H:%M:%S.%3NZ
}
# errors_since FILE MARK: the lines of an errors file (/.docfs/errors) stamped at or after
# MARK, so a test looks for its own message among what came after its step, never at "the
# last line" (other threads, the balancer or the TTL sweeper, write there too; the file is
# a ring of the last 256 messages, so a count of lines would not do).
errors_since() {
	awk -v m="$2" '$1 >= m' "$1"
}

# cluster_cmd ROUTER_MNT COMMAND: runs a command document through the router's
# /.cluster/command and prints the reply, read back on the same descriptor
cluster_cmd() {
	timeout 60 python3 - "$1/.cluster/command" "$2" <<'EOF'
import sys
with open(sys.argv[1], "r+") as f:
    f.write(sys.argv[2])
    f.flush()
    f.seek(0)
    sys.stdout.write(f.read())
EOF
}
# cluster_ok ROUTER_MNT COMMAND: cluster_cmd that must answer ok: 1, or the test fails
cluster_ok() {
	local out
	out=$(cluster_cmd "$1" "$2") || fail "$2: $out"
	grep -q '"ok": 1.0' <<< "$out" || fail "$2: not ok: $out"
}
# zk_start: starts a ZooKeeper server of the test's own (Debian's package, tickTime 500 ms,
# so sessions may last 1 to 10 s) on a free loopback port, sets ZK (its HOST:PORT) and ZKPID,
# and waits until it answers; skips (77) without the package or java. zk_stop stops it: call
# it from the test's EXIT trap, before cleanup.
zk_start() {
	local port out
	ls /usr/share/java/zookeeper-3*.jar > /dev/null 2>&1 || { echo "SKIP: no zookeeper package"; exit 77; }
	command -v java > /dev/null || { echo "SKIP: no java"; exit 77; }
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	mkdir -p "$T/zk"
	cat > "$T/zoo.cfg" <<ZOOCFG
tickTime=500
dataDir=$T/zk
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
ZOOCFG
	java -cp "/usr/share/java/*" org.apache.zookeeper.server.quorum.QuorumPeerMain "$T/zoo.cfg" > "$T/zk.log" 2>&1 &
	ZKPID=$!
	ZK=127.0.0.1:$port
	for _ in $(seq 100); do
		out=$("$DOCFS" rs "$ZK" zk-probe conf 2>&1) && break
		case $out in *"no replset config"*) break ;; esac
		sleep 0.2
	done
	grep -q "no replset config has been received" <<< "$out" || fail "ZooKeeper did not come up: $out $(tail -n 5 "$T/zk.log")"
}
zk_stop() {
	[ -z "${ZKPID:-}" ] || { kill "$ZKPID" 2> /dev/null || true; wait "$ZKPID" 2> /dev/null || true; }
}
# rs_three: for a replica set test of members 0..2 (store $T/sI, mount $T/mI): sets P0 P1
# P2 and P (three free loopback ports), H (their 127.0.0.1:PORT addresses) and rs() (`docfs
# rs $ZK rs0 ...`; call after zk_start), and makes the directories; the helpers after it
# mount members and wait for states. rs_members_down:
# unmounts those members and waits for their daemons (kill -9 after wait_gone's wait), for
# an EXIT trap, before zk_stop.
rs_three() {
	read -r P0 P1 P2 < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
	P=("$P0" "$P1" "$P2")
	H=("127.0.0.1:$P0" "127.0.0.1:$P1" "127.0.0.1:$P2")
	for i in 0 1 2; do mkdir -p "$T/s$i" "$T/m$i"; done
	rs() { "$DOCFS" rs "$ZK" rs0 "$@"; }
}
# member_up I [MORE -o OPTIONS]: mounts member I of rs_three's set (its log in $T/logI)
member_up() {
	"$DOCFS" mount -o "log=$T/log$1,notify_ms=100,listen=${H[$1]},replset=rs0,zk=$ZK${2:+,$2}" "$T/s$1" "$T/m$1"
	mountpoint -q "$T/m$1" || fail "member $1 did not mount"
}
member_pid() { pgrep -f -- "docfs mount .*$T/s$1 $T/m$1" | head -n1; }
# state_of I: member I's stateStr in rs.status() as ZooKeeper shows it
state_of() { rs status | jq -r ".members[$1].stateStr"; }
is_state() { [ "$(state_of "$1")" == "$2" ]; }
primary_is() { is_state "$1" PRIMARY; }
secondaries() { for i in "$@"; do is_state "$i" SECONDARY || return 1; done; }
# wait_for WHAT SECONDS COMMAND...: polls the command every 0.1 s until it succeeds, else
# fails saying what did not happen, with the members' states
wait_for() {
	local what=$1 secs=$2 until=$((SECONDS + $2))
	shift 2
	while [ "$SECONDS" -lt "$until" ]; do
		"$@" > /dev/null 2>&1 && return 0
		sleep 0.1
	done
	fail "$what: not within $secs s; rs.status(): $(rs status | jq -c '[.members[] | [.name, .stateStr, .infoMessage]]')"
}
# rs_elect0 UP: brings members 0..2 up (UP I mounts member I) so that member 0 wins the first
# election however loaded the machine: with no priority takeover (README), a member 0 that
# publishes its position late loses to a lower-priority one. Member 1 comes first and is
# frozen (alone it cannot stand: no majority), member 0 is elected with it, then member 1 is
# unfrozen and member 2 joins. Needs the test's wait_for and primary_is.
rs_elect0() {
	"$1" 1
	# (until it has read the set's configuration from ZooKeeper it answers 94 NotYetInitialized)
	wait_for "member 1 frozen" 30 rs freeze "${H[1]}" 120
	"$1" 0
	wait_for "member 0 elected" 30 primary_is 0
	rs freeze "${H[1]}" 0 > /dev/null || fail "rs freeze 0 (unfreeze) of member 1"
	"$1" 2
}
rs_members_down() {
	local i pid
	for i in 0 1 2; do # a test may have stopped one (kill -STOP): it must answer the unmount
		pid=$(pgrep -f -- "docfs mount .*$T/s$i $T/m$i" | head -n1 || true)
		[ -z "$pid" ] || kill -CONT "$pid" 2> /dev/null || true
		if mountpoint -q "$T/m$i"; then
			fusermount3 -u "$T/m$i" 2> /dev/null || fusermount3 -uz "$T/m$i" 2> /dev/null || true
		fi
	done
	for i in 0 1 2; do
		pid=$(pgrep -f -- "docfs mount .*$T/s$i $T/m$i" | head -n1 || true)
		[ -z "$pid" ] || wait_gone "$pid" || kill -9 "$pid" 2> /dev/null || true
	done
}
