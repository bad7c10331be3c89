#!/usr/bin/env bash
# coherence.sh - a soak of the kernel caches against another process's writes (fs/fuse/fsops.c
# notes 3 and 8): for SECONDS seconds, the CLI updates random documents of a 200-document
# collection while two shells `cat` random documents through the mount and a third process
# keeps every seventh document open and reads it again and again. Then, once the notifier
# has had time to see the last change, every document read through the mount must equal
# `docfs export`. Also reports a hang (a worker or reader stuck for 60 s).
#
# usage: bash tests/bench/coherence.sh DOCFS [SECONDS] [MOUNT_OPTS]
#   e.g. bash tests/bench/coherence.sh build/docfs 20
#        echo Y > /sys/module/fuse/parameters/enable_uring
#        taskset -c 0 bash tests/bench/coherence.sh build/docfs 20 uring
# Exit status 0 when every document matched. Not part of tests/run.sh (it takes a while and
# is a soak, not a check of one behaviour): run it after changing how the mount caches.
set -u
DOCFS=$(realpath "${1:?usage: coherence.sh DOCFS [SECONDS] [MOUNT_OPTS]}")
SECS=${2:-20}
OPTS=${3:-}
T=$(mktemp -d --suffix=.docfs-coherence)
S=$T/store M=$T/mnt
mkdir -p "$S" "$M"
pids=()
finish() {
	for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
	if mountpoint -q "$M"; then
		local pid
		pid=$(pgrep -f "docfs mount .*$S $M" | head -n1)
		timeout 20 fusermount3 -u "$M" || { echo "coherence: unmount hung" >&2; fusermount3 -uz "$M"; }
		[ -z "$pid" ] || while kill -0 "$pid" 2> /dev/null; do sleep 0.2; done
	fi
	rm -rf "$T"
}
trap finish EXIT

"$DOCFS" mount -o "notify_ms=50${OPTS:+,$OPTS}" "$S" "$M" || exit 1
mkdir -p "$M/db/c"
pad=$(head -c 3000 /dev/zero | tr '\0' x)
seq 1 200 | sed 's/.*/{"_id": &, "v": 0, "pad": "'"$pad"'"}/' > "$M/db/c/.insert"
end=$((SECONDS + SECS))
(
	n=0
	while [ $SECONDS -lt $end ]; do
		"$DOCFS" update "$S" db.c "{_id: $((RANDOM % 200 + 1))}" '{$inc: {v: 1}}' > /dev/null
		n=$((n + 1))
	done
	echo "   CLI updates: $n"
) &
pids+=($!)
for _ in 1 2; do
	(
		n=0
		while [ $SECONDS -lt $end ]; do
			cat "$M/db/c/$((RANDOM % 200 + 1)).json" > /dev/null
			n=$((n + 1))
		done
		echo "   cat: $n documents"
	) &
	pids+=($!)
done
python3 -c '
import os, sys, time
d, secs = sys.argv[1], int(sys.argv[2])
end = time.monotonic() + secs
fds = [os.open(os.path.join(d, "%d.json" % i), os.O_RDONLY) for i in range(1, 201, 7)]
n = 0
while time.monotonic() < end:
    for fd in fds:
        os.pread(fd, 65536, 0)
    n += 1
print("   held-open passes:", n)' "$M/db/c" "$SECS" &
pids+=($!)
deadline=$((SECONDS + SECS + 60))
for p in "${pids[@]}"; do
	while kill -0 "$p" 2> /dev/null; do
		if [ $SECONDS -ge $deadline ]; then
			echo "coherence: FAIL: a process is stuck 60 s after the end (pid $p)" >&2
			exit 1
		fi
		sleep 0.5
	done
done
pids=()
sleep 1 # changes by another process show within notify_ms
"$DOCFS" export "$S" db.c > "$T/export" || { echo "coherence: FAIL: docfs export failed" >&2; exit 1; }
python3 - "$M/db/c" "$T/export" <<'EOF'
import json, os, sys
d, exp = sys.argv[1], sys.argv[2]
want = {str(json.loads(l)["_id"]): json.loads(l) for l in open(exp)}
if len(want) != 200:
    print("coherence: FAIL: docfs export gave %d documents, not 200" % len(want), file=sys.stderr)
    sys.exit(1)
bad = []
for k, v in sorted(want.items()):
    with open(os.path.join(d, k + ".json")) as f:
        if json.load(f) != v:
            bad.append(k)
if bad:
    print("coherence: FAIL: %d of %d documents differ from docfs export: %s"
          % (len(bad), len(want), " ".join(bad[:10])), file=sys.stderr)
    sys.exit(1)
print("coherence: ok, %d documents equal docfs export" % len(want))
EOF
