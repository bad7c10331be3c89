#!/usr/bin/env bash
# tests/bench/lsbig.sh [DOCFS] - the first `ls -l` of a large collection (issue 30): is a
# listing linear in the number of documents, and how much memory does the daemon take for it?
# One run, two sizes: a collection of BENCH_N_SMALL (100,000) generated users and one of
# BENCH_N (1,000,000), each loaded with `docfs import` into its own store (not timed), then
# mounted and listed with `ls -l` into a file: cold (after a remount and drop_caches) and warm
# (the same again). Printed: the seconds, the large one against ten times the small one
# (N/N_SMALL times, the "linear" figure), the daemon's peak RSS (VmHWM, which counts the
# database pages it maps) and its peak anonymous memory (RssAnon sampled every 50 ms while
# the listing runs: the heap and the threads' arenas, what the goal "heap under 300 MB"
# means), and the CPU seconds of the cold run taken by ls (its system time is the kernel's
# work for each entry) and by the daemon. The listing must show exactly N documents (lines
# ending in .json), else it exits 1.
# Needs root for drop_caches (without it "cold" is only a remount), jq-free, /dev/fuse.
# Environment: BENCH_DIR (default /tmp; about 0.4 GB per million users), BENCH_N,
# BENCH_N_SMALL, BENCH_MOUNT_OPTS.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/bench/lib.sh"
DOCFS=${1:-$ROOT/build/docfs}
case $DOCFS in /*) ;; *) DOCFS=$PWD/$DOCFS ;; esac
N=${BENCH_N:-1000000}
NS=${BENCH_N_SMALL:-100000}
TEMPLATE=$ROOT/examples/users.template.json

for tool in fusermount3 pgrep mountpoint /usr/bin/time; do
	command -v "$tool" >/dev/null 2>&1 || die "missing tool: $tool"
done
[ -x "$DOCFS" ] || die "no docfs binary at $DOCFS (build it: meson setup build-rel --buildtype=release && ninja -C build-rel)"
[ -e /dev/fuse ] || die "no /dev/fuse"
CAN_DROP=1
{ sync && echo 3 > /proc/sys/vm/drop_caches; } 2>/dev/null || {
	CAN_DROP=0
	echo "bench: WARNING: cannot drop caches (not root?): cold = after a remount only" >&2
}

B=$(mktemp -d "${BENCH_DIR:-/tmp}/docfs-lsbig.XXXXXX")
STORE=$B/store
MNT=$B/mnt
MOUNTED=0
FAILED=0
. "$ROOT/tests/bench/onemount.sh" # daemon_pid, unmount, the EXIT trap, problem

DATE=$(date -u +"%Y-%m-%d %H:%M")
VERSION=$("$DOCFS" version 2>/dev/null || echo "docfs ?")
echo "docfs ls -l benchmark: $VERSION ($DOCFS), $DATE UTC, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2

mount_store() {
	"$DOCFS" mount -o "log=$B/log${BENCH_MOUNT_OPTS:+,$BENCH_MOUNT_OPTS}" "$STORE" "$MNT" ||
		die "docfs mount failed"
	MOUNTED=1
}
kib() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; } # user + system, clock ticks

# sample_anon PID FILE: writes the largest RssAnon (KiB) of PID seen every 50 ms into FILE
# until killed
sample_anon() {
	local max=0 v
	trap 'echo "$max" > "$2"; exit 0' TERM
	while :; do
		v=$(awk '/^RssAnon:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0)
		[ -n "$v" ] && [ "$v" -gt "$max" ] && max=$v
		sleep 0.05
	done
}

# listing COUNT: sets T_COLD, T_WARM, HWM, ANON for a store of COUNT users
listing() {
	local n=$1 pid sp lines
	rm -rf "$STORE"
	mkdir -p "$STORE" "$MNT"
	"$DOCFS" generate "$TEMPLATE" -n "$n" --seed 1 > "$B/users.jsonl" || die "docfs generate failed"
	"$DOCFS" import "$STORE" test.users "$B/users.jsonl" > "$B/import.out" 2>&1 ||
		die "docfs import failed: $(tail -n 3 "$B/import.out")"
	rm -f "$B/users.jsonl"
	sync
	[ "$CAN_DROP" -eq 1 ] && echo 3 > /proc/sys/vm/drop_caches
	mount_store
	pid=$(daemon_pid)
	sample_anon "$pid" "$B/anon" &
	sp=$!
	c0=$(cpu_ticks "$pid")
	timeit '/usr/bin/time -f "%U %S" -o "$B/ls.cpu" ls -l "$MNT/test/users" > "$B/ls.out"'
	T_COLD=$T
	C_DAEMON=$(awk -v a="$c0" -v b="$(cpu_ticks "$pid")" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", (b - a) / hz }')
	C_LS=$(awk '{ printf "%.2f", $1 + $2 }' "$B/ls.cpu")
	lines=$(grep -c '\.json$' "$B/ls.out" || true)
	[ "$lines" -eq "$n" ] || problem "ls -l listed $lines documents of $n"
	timeit 'ls -l "$MNT/test/users" > "$B/ls.out"'
	T_WARM=$T
	lines=$(grep -c '\.json$' "$B/ls.out" || true)
	[ "$lines" -eq "$n" ] || problem "ls -l listed $lines documents of $n (warm)"
	kill "$sp"
	wait "$sp" || true
	ANON=$(kib "$(cat "$B/anon")")
	HWM=$(kib "$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status")")
	unmount
	MOUNTED=0
	echo "   $n documents: ls -l cold ${T_COLD}s (CPU: ls ${C_LS}s, daemon ${C_DAEMON}s), warm ${T_WARM}s, peak RSS ${HWM} MiB, peak anonymous ${ANON} MiB" >&2
}

echo "== $NS users" >&2
listing "$NS"
S_COLD=$T_COLD S_WARM=$T_WARM S_HWM=$HWM S_ANON=$ANON S_CLS=$C_LS S_CD=$C_DAEMON
echo "== $N users" >&2
listing "$N"
F=$(div "$N" "$NS" "%.0f")

cat <<EOF
## The first \`ls -l\` of a large collection ($DATE UTC, $VERSION)

| | $NS documents | $N documents | ratio to ${F}x the small one |
|---|---:|---:|---:|
| \`ls -l > file\`, cold (remount, drop_caches), s | $S_COLD | $T_COLD | $(div "$T_COLD" "$(awk -v a="$S_COLD" -v f="$F" 'BEGIN { print a * f }')") |
| CPU of the cold run: \`ls\` (user + system, the kernel's work for each entry included), s | $S_CLS | $C_LS | $(div "$C_LS" "$(awk -v a="$S_CLS" -v f="$F" 'BEGIN { print a * f }')") |
| CPU of the cold run: the docfs daemon, s | $S_CD | $C_DAEMON | $(div "$C_DAEMON" "$(awk -v a="$S_CD" -v f="$F" 'BEGIN { print a * f }')") |
| the same, warm, s | $S_WARM | $T_WARM | $(div "$T_WARM" "$(awk -v a="$S_WARM" -v f="$F" 'BEGIN { print a * f }')") |
| daemon peak RSS (VmHWM, with the mapped database), MiB | $S_HWM | $HWM | |
| daemon peak anonymous memory (RssAnon, sampled), MiB | $S_ANON | $ANON | |

Goal (issue 30): the large one's cold listing under 10 s, anonymous memory under 300 MB.
Each store was loaded with \`docfs import\` and not mounted before the cold run. The CPU rows
tell a loaded machine from a slow listing: on two busy cores the wall clock is mostly waiting.
EOF
[ "$FAILED" -eq 0 ] || { echo "bench: docfs misbehaved (see PROBLEM lines above)" >&2; exit 1; }
