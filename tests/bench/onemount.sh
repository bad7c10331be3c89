# tests/bench/onemount.sh - helpers of the benchmarks that mount one store (query.sh,
# index.sh, agg.sh); sourced after lib.sh. They use the caller's globals: DOCFS, B (the
# temporary directory), STORE, MNT, MOUNTED (1 while mounted) and FAILED. Sourcing it also
# installs the EXIT trap that unmounts and removes $B.

daemon_pid() { # the daemon serving $MNT from $STORE
	pgrep -f -- "${DOCFS##*/} mount .*$STORE $MNT\$" | head -n1 || true
}

unmount() { # unmounts $MNT, and waits for the docfs daemon to finish
	local pid
	pid=$(daemon_pid)
	if mountpoint -q "$MNT"; then
		fusermount3 -u "$MNT" 2>/dev/null || { sleep 1; fusermount3 -u "$MNT" 2>/dev/null; } ||
			umount "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null || true
	fi
	if [ -n "$pid" ]; then
		for _ in $(seq 1 600); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -0 "$pid" 2>/dev/null && echo "bench: WARNING: docfs daemon $pid still running 60 s after unmount" >&2
	fi
	return 0
}

cleanup() {
	local rc=$?
	[ "$MOUNTED" -eq 1 ] && unmount
	rm -rf "$B"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# problem MESSAGE: records a misbehaviour or a disagreement (the run goes on, exits 1 at the end)
problem() {
	FAILED=1
	echo "bench: PROBLEM: $1" >&2
	if [ -s "$B/log" ]; then
		echo "--- docfs log (last lines)" >&2
		tail -n 20 "$B/log" >&2
	fi
}

# warm_timeit 'COMMAND' : runs COMMAND once untimed (warm-up), then times it WARM_REPEAT times
# (default 1) and keeps the best in T (RC of the last run). The same on both sides of a
# comparison: on a shared 2-core VM one run of a 30 ms query can take twice as long for
# reasons that have nothing to do with either.
warm_timeit() {
	local best="" i
	set +e
	eval "$1"
	set -e
	for ((i = 0; i < ${WARM_REPEAT:-1}; i++)); do
		timeit "$1"
		if [ -z "$best" ] || awk -v a="$T" -v b="$best" 'BEGIN { exit !(a < b) }'; then
			best=$T
		fi
	done
	T=$best
}

lt() { # A B [FACTOR] : "met" when A < B * FACTOR (A <= B * FACTOR when a factor is given)
	awk -v a="$1" -v b="$2" -v f="${3:-}" 'BEGIN {
		if (a == "" || b == "") print "n/a"
		else if (f == "") print (a < b) ? "met" : "**not met**"
		else print (a <= b * f) ? "met" : "**not met**" }'
}
kib_to_mib() {
	awk -v k="$1" 'BEGIN { if (k == "") print "n/a"; else printf "%.1f MiB", k / 1024 }'
}
vmhwm() { # the daemon's peak RSS in KiB
	local pid
	pid=$(daemon_pid)
	[ -n "$pid" ] && awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true
}
bytes_h() { du -sh "$1" 2>/dev/null | cut -f1; }
