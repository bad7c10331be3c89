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

daemon_pid() {
	pgrep -f -- "docfs mount .*$STORE $MNT" | head -n1 || true
}

# mount_docfs [extra -o options]
mount_docfs() {
	"$DOCFS" mount -o "log=$T/log,notify_ms=100${1:+,$1}" "$STORE" "$MNT"
	mountpoint -q "$MNT" || fail "not mounted after docfs mount returned"
}

unmount_docfs() {
	local pid
	pid=$(daemon_pid)
	if mountpoint -q "$MNT"; then
		fusermount3 -u "$MNT" 2>/dev/null || { sleep 1; fusermount3 -u "$MNT" 2>/dev/null; } ||
			fusermount3 -uz "$MNT" 2>/dev/null || true
	fi
	# Wait for the daemon to finish (it checkpoints and frees on the way out).
	if [ -n "$pid" ]; then
		for _ in $(seq 1 100); do
			# Gone, or a zombie (an exited daemon may be left unreaped in a container).
			case "$(ps -o stat= -p "$pid" 2>/dev/null)" in
			"" | Z*) break ;;
			esac
			sleep 0.1
		done
	fi
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
cleanup() {
	local rc=$?
	unmount_docfs
	if [ "$SANITIZER_FAILED" -ne 0 ] && [ "$rc" -eq 0 ]; then
		rc=1
	fi
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
