#!/usr/bin/env bash
# crash.sh - crash safety: a document whose write returned success (close() returned 0) is
# in the store, whole and exact, after the daemon is killed with SIGKILL. 20 rounds: 4
# concurrent writers create unique documents and log each one only after the command that
# wrote it exited 0; after a random 0.2-1.0 s the daemon is killed, the dead mount cleared,
# the store remounted and every logged document checked field by field, and `docfs check`
# must pass. Odd writers write to collection c, even ones to d, so that the two collections'
# ids interleave (their documents are found through runs of ids, store/doc.c note 5): every
# acknowledged document must also be listed by ls.
. "$(dirname "$0")/lib.sh"
# A command that fails outside a check stops the test with its line and the daemon log.
trap 'fail "line $LINENO: \"$BASH_COMMAND\" exited $?"' ERR

# 20 rounds; 10 in the sanitizer build (what the rounds check holds whenever the kill comes;
# the sanitizers watch the recovery as well in 10)
ROUNDS=${CRASH_ROUNDS:-$([ -n "${DOCFS_SANITIZED:-}" ] && echo 10 || echo 20)}
WRITERS=4
# The coreutils printf, not the bash builtin: it reports an error returned by close(), which
# is where a FUSE write is committed (bash ignores the close of a redirection).
PRINTF=$(type -P printf)
WPIDS=()

# Also clear a dead mount (kill -9 left it) before lib.sh's cleanup, and stop the writers.
crash_cleanup() {
	local rc=$?
	for p in "${WPIDS[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	if ! mountpoint -q "$MNT" 2>/dev/null && grep -qs " $MNT " /proc/mounts; then
		fusermount3 -uz "$MNT" 2>/dev/null || true
	fi
	cleanup "$rc"
}
trap crash_cleanup EXIT

mount_docfs

# running PID : the process exists and is not a zombie (the daemon is not our child, and
# whoever reaps it may take its time)
running() {
	local st
	st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	[[ $st != Z* ]]
}

# coll K : the collection of writer K
coll() { if (($1 % 2)); then echo c; else echo d; fi; }

# writer K ROUND : creates w<K>-<N>.json until a write fails; logs "<name> K N" on success
writer() {
	local k=$1 n=$(($2 * 1000000)) name dir
	dir=$MNT/test/$(coll "$k")
	while :; do
		n=$((n + 1))
		name=w$k-$n
		"$PRINTF" '{"k": %d, "n": %d, "s": "%s", "sub": {"pad": "%0200d"}, "arr": [%d, %d]}\n' \
			"$k" "$n" "$name" "$n" "$k" "$n" 2>> "$T/werr.$k" > "$dir/$name.json" || exit 0
		echo "$name $k $n" >> "$T/ack.$k"
	done
}

# expected ACKFILE... : the fields every acknowledged document must have, one line each
expected() {
	awk '{ printf "[\"%s\",%d,%d,\"%s\",200,[%d,%d]]\n", $1, $2, $3, $1, $2, $3 }' "$@" | sort
}

# actual ACKFILE... : the same fields read back through the mount
actual() {
	awk -v d="$MNT/test" '{ print d "/" ($2 % 2 ? "c" : "d") "/" $1 ".json" }' "$@" |
		xargs -r jq -c '[._id, .k, .n, .s, (.sub.pad | length), .arr]' 2> "$T/jqerr" | sort
}

# listed : the documents ls lists in both collections, as paths
listed() {
	for c in c d; do
		ls "$MNT/test/$c" | grep '^w.*\.json$' | sed "s|^|$MNT/test/$c/|"
	done
}

mkdir "$MNT/test" "$MNT/test/c" "$MNT/test/d"
total=0
for r in $(seq 1 "$ROUNDS"); do
	step "round $r: $WRITERS writers, then kill -9"
	rm -f "$T"/ack.* "$T"/werr.*
	for k in $(seq 1 "$WRITERS"); do
		: > "$T/ack.$k"
		: > "$T/werr.$k"
	done
	WPIDS=()
	for k in $(seq 1 "$WRITERS"); do
		writer "$k" "$r" &
		WPIDS+=($!)
	done
	sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.2f", 0.2 + 0.8 * r / 32767 }')"
	# Writers stop only because of the crash: one that failed already hit a docfs error.
	for k in $(seq 1 "$WRITERS"); do
		kill -0 "${WPIDS[$((k - 1))]}" 2>/dev/null ||
			fail "round $r: writer $k failed before the daemon was killed: $(tail -n 1 "$T/werr.$k")"
	done
	pid=$(daemon_pid)
	[ -n "$pid" ] || fail "round $r: no daemon to kill"
	kill -9 "$pid"
	for _ in $(seq 1 100); do
		running "$pid" || break
		sleep 0.05
	done
	running "$pid" && fail "round $r: daemon $pid survived kill -9"
	fusermount3 -uz "$MNT" || fail "round $r: fusermount3 -uz of the dead mount"
	# The writers now get ENOTCONN (or ENOENT, once the mount point is bare) and stop.
	for p in "${WPIDS[@]}"; do
		for _ in $(seq 1 100); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		kill -0 "$p" 2>/dev/null && fail "round $r: writer $p still running 10 s after the crash"
		wait "$p" || true
	done
	WPIDS=()
	# What a write may fail with once the daemon is gone: the connection is aborted, or the
	# mount point is bare after the lazy unmount; with -o uring, a request that was in the
	# dead daemon's ring is cancelled.
	other=$(cat "$T"/werr.* | grep -v -e 'Transport endpoint is not connected' \
		-e 'Software caused connection abort' -e 'No such file or directory' \
		-e 'Operation canceled' | sed -n 1,3p || true)
	[ -z "$other" ] || fail "round $r: a writer failed with an unexpected error: $other"
	cat "$T"/ack.* > "$T/round.$r"
	acked=$(wc -l < "$T/round.$r")
	[ "$acked" -gt 0 ] || fail "round $r: no write succeeded before the kill ($(cat "$T"/werr.* | tail -n 3))"
	total=$((total + acked))

	mount_docfs
	expected "$T/round.$r" > "$T/expected"
	actual "$T/round.$r" > "$T/actual"
	if ! diff "$T/expected" "$T/actual" > "$T/diff"; then
		head -n 20 "$T/diff" >&2
		head -n 5 "$T/jqerr" >&2
		fail "round $r: $(grep -c '^<' "$T/diff") of $acked acknowledged documents missing or different"
	fi
	# Documents that were written but not acknowledged may exist; each must be whole.
	bad=$(listed | xargs -r jq -r 'select(._id != "w\(.k)-\(.n)" or .s != ._id or (.sub.pad | length) != 200) | ._id' 2>&1 | sed -n 1,5p)
	[ -z "$bad" ] || fail "round $r: malformed documents after the crash: $bad"
	present=$(listed | wc -l)
	[ "$present" -ge "$total" ] || fail "round $r: $present documents present, $total acknowledged so far"
	# Every acknowledged document is listed (found through the runs), not only readable.
	missing=$(awk -v d="$MNT/test" '{ print d "/" ($2 % 2 ? "c" : "d") "/" $1 ".json" }' "$T"/round.* |
		sort | comm -23 - <(listed | sort) | sed -n 1,3p)
	[ -z "$missing" ] || fail "round $r: acknowledged but not listed: $missing"
	out=$("$DOCFS" check "$STORE" 2>&1) || fail "round $r: docfs check: $out"
	why=$(cat "$T"/werr.* | sed 's/.*: //' | sort | uniq -c | tr -s ' ' | tr '\n' ';')
	echo "   $acked acknowledged, $present present in all; writers stopped by:$why"
done

step "after $ROUNDS rounds every acknowledged document is still there"
expected "$T"/round.* > "$T/expected"
actual "$T"/round.* > "$T/actual"
if ! diff "$T/expected" "$T/actual" > "$T/diff"; then
	head -n 20 "$T/diff" >&2
	fail "$(grep -c '^<' "$T/diff") of $total acknowledged documents missing or different at the end"
fi
expect_eq "$(wc -l < "$T/actual")" "$total" "acknowledged documents read back"
echo "ok"
