#!/usr/bin/env bash
# uring.sh - `docfs mount -o uring` (FUSE over io_uring, fs/fuse/ring.c): refused with a clear
# error while the kernel's parameter is off; with it on, requests come through a queue per
# CPU (/.docfs/status), reads and 1 MiB writes and multi-MiB query results are byte-exact, a
# ring thread starved by a CPU hog is raised (the watchdog), and the daemon exits cleanly on
# unmount and on SIGTERM, also with 4 writers busy (every acknowledged document kept). Skips (77) on a kernel without FUSE over io_uring. The other mount
# scripts run with -o uring too (meson's mount-uring-* tests, DOCFS_MOUNT_OPTS).
. "$(dirname "$0")/lib.sh"
trap 'fail "line $LINENO: \"$BASH_COMMAND\" exited $?"' ERR
if [ ! -w "$URING_PARAM" ]; then
	echo "SKIP: this kernel has no FUSE over io_uring ($URING_PARAM missing or read-only)"
	exit 77
fi
URING_BEFORE=$(cat "$URING_PARAM")
wpids=()
uring_restore() {
	local rc=$?
	pkill -f "docfs-uring-hog-$$" 2>/dev/null || true
	for p in "${wpids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	echo "$URING_BEFORE" > "$URING_PARAM"
	cleanup "$rc"
}
trap uring_restore EXIT

status_field() { # NAME: the number after "NAME": in /.docfs/status
	sed -n "s/.*\"$1\": \([0-9]*\).*/\1/p" "$MNT/.docfs/status"
}

step "with the kernel's parameter off, -o uring is refused and nothing is mounted"
echo N > "$URING_PARAM"
rc=0
"$DOCFS" mount -o uring "$STORE" "$MNT" > "$T/out" 2> "$T/err" || rc=$?
expect_eq "$rc" 1 "exit code of mount -o uring with enable_uring off"
grep -q "enable_uring" "$T/err" || fail "the error does not say what to turn on: $(cat "$T/err")"
mountpoint -q "$MNT" && fail "mounted although -o uring was refused"
echo "   $(cat "$T/err")"

step "with it on, requests come through one queue per CPU"
echo Y > "$URING_PARAM"
mount_docfs uring
mkdir "$MNT/db" "$MNT/db/c"
for _ in $(seq 1 50); do
	[ "$(status_field queuesLive)" = "$(nproc --all)" ] && break
	sleep 0.1
done
grep -q '"transport": "io_uring"' "$MNT/.docfs/status" || fail "status: $(cat "$MNT/.docfs/status")"
expect_eq "$(status_field queues)" "$(getconf _NPROCESSORS_CONF)" "queues"
expect_eq "$(status_field queuesLive)" "$(getconf _NPROCESSORS_CONF)" "queues registered"

step "2,000 documents written and read back byte for byte"
before=$(status_field ringRequests)
for i in $(seq 1 2000); do
	printf '{"_id": %d, "s": "x%d"}\n' "$i" "$i"
done > "$T/docs.jsonl"
cat "$T/docs.jsonl" > "$MNT/db/c/.insert"
expect_eq "$(ls "$MNT/db/c" | grep -c '\.json$')" 2000 "documents listed"
for i in 1 777 2000; do
	expect_eq "$(jq -c . "$MNT/db/c/$i.json")" "{\"_id\":$i,\"s\":\"x$i\"}" "document $i"
done
cat "$MNT"/db/c/*.json | jq -c . > "$T/read.jsonl"
expect_eq "$(wc -l < "$T/read.jsonl")" 2000 "documents read by cat"
after=$(status_field ringRequests)
[ "$((after - before))" -ge 2000 ] ||
	fail "only $((after - before)) requests came through the ring for 2,000 files"
echo "   $((after - before)) requests through the ring"

step "a 5 MiB document (1 MiB writes) and a 3 MiB query result (1 MiB reads) are exact"
python3 -c '
import json
print(json.dumps({"_id": "big", "blob": "0123456789abcdef" * (5 * 65536)}, separators=(",", ":")))
' > "$T/big.json"
cp "$T/big.json" "$MNT/db/c/big.json"
cmp <(jq -c . "$T/big.json") <(jq -c . "$MNT/db/c/big.json") || fail "the 5 MiB document differs"
rm "$MNT/db/c/big.json"
for i in $(seq 1 3500); do
	printf '{"_id": "q%d", "pad": "%01000d"}\n' "$i" "$i"
done > "$MNT/db/c/.insert"
cat "$MNT/db/c/query/{_id: {\$regex: '^q'}}?sort={_id:1}" > "$T/q.jsonl"
"$DOCFS" export "$STORE" db.c --query "{_id: {\$regex: '^q'}}" --sort '{_id: 1}' > "$T/q.export"
[ "$(wc -c < "$T/q.jsonl")" -gt $((3 * 1024 * 1024)) ] || fail "the query result is only $(wc -c < "$T/q.jsonl") bytes"
cmp "$T/q.jsonl" "$T/q.export" || fail "the query result differs from docfs export"

step "sed -i and mv through the ring keep the document and its inode"
ino=$(stat -c %i "$MNT/db/c/5.json")
sed -i 's/"x5"/"y5"/' "$MNT/db/c/5.json"
expect_eq "$(jq -r .s "$MNT/db/c/5.json")" y5 "document 5 after sed -i"
expect_eq "$(stat -c %i "$MNT/db/c/5.json")" "$ino" "inode after sed -i"
mv "$MNT/db/c/6.json" "$MNT/db/c/six.json"
expect_eq "$(jq -r ._id "$MNT/db/c/six.json")" six "_id after mv"

step "only the ring threads are pinned and SCHED_IDLE; the workers they started are not"
pid=$(daemon_pid)
all_cpus=$(taskset -pc "$pid" | sed 's/.*: //')
nring=0
for t in /proc/"$pid"/task/*; do
	name=$(cat "$t/comm")
	policy=$(awk '{ print $41 }' "$t/stat")
	cpus=$(taskset -pc "${t##*/}" | sed 's/.*: //')
	case $name in
	docfs-ring[0-9]*)
		nring=$((nring + 1))
		[ "$cpus" = "${name#docfs-ring}" ] || fail "$name runs on CPUs $cpus"
		;;
	*)
		expect_eq "$policy" 0 "scheduling policy of thread ${t##*/} ($name)"
		expect_eq "$cpus" "$all_cpus" "CPUs of thread ${t##*/} ($name)"
		;;
	esac
done
expect_eq "$nring" "$(getconf _NPROCESSORS_CONF)" "ring threads"

step "a ring thread starved by CPU hogs on its CPU is raised to normal priority"
# In the foreground the daemon shares the test's scheduling group (autogroup), so hogs
# started here compete with its SCHED_IDLE ring threads directly (fs/fuse/ring.c note 6).
unmount_docfs
mount_fg uring
write_heavy "$MNT/db/c/heavy.json"
sync
echo 3 > /proc/sys/vm/drop_caches # the read below must reach the daemon
boosts=$(status_field starvedBoosts)
hogs=()
for _ in 1 2; do
	taskset -c 0 bash -c 'exec -a docfs-uring-hog-'$$' bash -c "while :; do :; done"' &
	hogs+=($!)
done
sleep 0.2
taskset -c 0 cat "$MNT/db/c/heavy.json" > "$T/heavy.read"
kill "${hogs[@]}"
wait "${hogs[@]}" 2>/dev/null || true
cmp <(jq -c . "$T/heavy.read") <(jq -c . "$MNT/db/c/heavy.json") || fail "the document read under load differs"
[ "$(status_field starvedBoosts)" -gt "$boosts" ] ||
	fail "no ring thread was raised while hogs shared its CPU: $(cat "$MNT/.docfs/status")"
echo "   $(cat "$MNT/.docfs/status")"

step "nothing went wrong in the daemon; docfs check passes"
[ ! -s "$T/log" ] || ! grep -q "ring:" "$T/log" || fail "the ring logged: $(grep "ring:" "$T/log" | head -n 3)"
unmount_docfs
"$DOCFS" check "$STORE" > /dev/null || fail "docfs check failed"

step "SIGTERM: the daemon unmounts and exits"
mount_docfs uring
ls "$MNT" > /dev/null
pid=$(daemon_pid)
kill -TERM "$pid"
wait_gone "$pid" || fail "the daemon is still running 10 s after SIGTERM"
mountpoint -q "$MNT" && fail "still mounted after the daemon exited"
"$DOCFS" check "$STORE" > /dev/null || fail "docfs check failed after SIGTERM"

step "SIGTERM while 4 writers write through the ring: every acknowledged document is kept"
# The coreutils printf reports an error from close(), where a document is committed.
PRINTF=$(type -P printf)
mount_docfs uring
mkdir -p "$MNT/db/t"
for k in 1 2 3 4; do
	(
		n=0
		while :; do
			n=$((n + 1))
			{ "$PRINTF" '{"k": %d, "n": %d, "pad": "%0300d"}\n' "$k" "$n" "$n" \
				> "$MNT/db/t/w$k-$n.json"; } 2> /dev/null || exit 0
			echo "w$k-$n $k $n" >> "$T/ack.$k"
		done
	) &
	wpids+=($!)
done
sleep 1.5
pid=$(daemon_pid)
kill -TERM "$pid"
wait_gone "$pid" || fail "the daemon is still running 10 s after SIGTERM with writers"
for p in "${wpids[@]}"; do
	wait "$p" || true
done
mountpoint -q "$MNT" && fail "still mounted after the daemon exited"
acks=$(cat "$T"/ack.* | wc -l)
[ "$acks" -ge 20 ] || fail "only $acks documents were written before SIGTERM"
mount_docfs uring
cat "$T"/ack.* | while read -r name k n; do
	f=$MNT/db/t/$name.json
	[ -e "$f" ] || { echo "$name"; continue; }
	[ "$(jq -c '[.k, .n, (.pad | length)]' "$f")" = "[$k,$n,300]" ] || echo "$name (content)"
done > "$T/lost"
[ ! -s "$T/lost" ] || fail "acknowledged documents lost or changed by SIGTERM: $(head -n 5 "$T/lost" | tr '\n' ' ')"
echo "   $acks acknowledged documents, all kept"
unmount_docfs
"$DOCFS" check "$STORE" > /dev/null || fail "docfs check failed after SIGTERM with writers"
echo ok
