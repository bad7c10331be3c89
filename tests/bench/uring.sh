#!/usr/bin/env bash
# tests/bench/uring.sh [DOCFS] - every mount script of the suite with each request served
# through FUSE over io_uring (-o uring), one after the other. The test command runs only the
# quick scripts over the ring (tests/meson.build, mount_uring_tests); this adds the long ones
# (crash, write, lifecycle, requests, persist, ...). Prints one line per script and a summary;
# exits 1 when any script failed (a kernel without FUSE over io_uring: every script skips).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DOCFS=${1:-$ROOT/build/docfs}
case $DOCFS in /*) ;; *) DOCFS=$PWD/$DOCFS ;; esac
[ -x "$DOCFS" ] || { echo "uring.sh: no docfs binary at $DOCFS (meson setup build && ninja -C build)" >&2; exit 1; }
scripts=(basic editors badinput attrs persist crash insert query spill write aggregate index
	lifecycle requests posix)
ok=0 failed=() skipped=()
log=$(mktemp -d /tmp/docfs-uring-bench.XXXXXX)
for name in "${scripts[@]}"; do
	start=$EPOCHREALTIME
	DOCFS=$DOCFS DOCFS_MOUNT_OPTS=uring bash "$ROOT/tests/mount/$name.sh" > "$log/$name.log" 2>&1
	rc=$?
	secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
	case $rc in
	0) ok=$((ok + 1)); echo "ok    $name (${secs} s)" ;;
	77) skipped+=("$name"); echo "skip  $name: $(tail -n1 "$log/$name.log")" ;;
	*) failed+=("$name"); echo "FAIL  $name (rc $rc, log $log/$name.log)" ;;
	esac
done
echo "uring.sh: ok ${ok}, skipped ${#skipped[@]}, failed ${#failed[@]}${failed:+ (${failed[*]})}"
[ ${#failed[@]} -eq 0 ] && rm -rf "$log"
[ ${#failed[@]} -eq 0 ]
