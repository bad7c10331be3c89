#!/usr/bin/env bash
# tests/bench/run.sh [DOCFS] - docfs benchmarks against plain alternatives, in one run:
#   1. bulk insert of 1,000,000 generated users: `cat > .insert` and `docfs import`,
#      against the sqlite3 CLI importing the same JSON lines into one TEXT column;
#   2. `grep -rl Beijing` over 100,000 documents, cold and warm: docfs (mounted as usual,
#      and with `-o uring` when the kernel has FUSE over io_uring), a native directory
#      holding the same bytes, and that directory through bindfs (a FUSE passthrough);
#   3. `ls -l | wc -l` over the same 100,000 documents: docfs and native, and the docfs
#      daemon's peak RSS.
# Prints one Markdown table per benchmark and a summary block for README.md. Not part of
# the test suite: no figure here fails anything; wrong counts or docfs errors do (exit 1).
# Needs sqlite3, bindfs, jq and /dev/fuse; run as root so that "cold" means cold
# (sync; echo 3 > /proc/sys/vm/drop_caches). Environment: BENCH_DIR (where the temporary
# directory goes, default /tmp), BENCH_N_BULK (1000000), BENCH_N (100000), BENCH_MOUNT_OPTS
# (extra comma-separated `docfs mount -o` options, e.g. notify_ms=100000; default none).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/bench/lib.sh"
DOCFS=${1:-$ROOT/build/docfs}
case $DOCFS in /*) ;; *) DOCFS=$PWD/$DOCFS ;; esac
N_BULK=${BENCH_N_BULK:-1000000}
N=${BENCH_N:-100000}
TEMPLATE=$ROOT/examples/users.template.json

missing=()
for tool in sqlite3 bindfs jq fusermount3 pgrep mountpoint; do
	command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] ||
	die "missing tools: ${missing[*]} (e.g. apt-get install sqlite3 bindfs jq fuse3 procps util-linux)"
[ -x "$DOCFS" ] || die "no docfs binary at $DOCFS (build it: meson setup build --buildtype=release && ninja -C build)"
[ -e /dev/fuse ] || die "no /dev/fuse"
[ -f "$TEMPLATE" ] || die "no template at $TEMPLATE"
[ "$N" -le "$N_BULK" ] || die "BENCH_N ($N) must not exceed BENCH_N_BULK ($N_BULK)"

CAN_DROP=1
if ! { sync && echo 3 > /proc/sys/vm/drop_caches; } 2>/dev/null; then
	CAN_DROP=0
	echo "bench: WARNING: cannot write /proc/sys/vm/drop_caches (not root?): 'cold' runs" \
		"only follow a remount, the page cache of the native directory stays warm" >&2
fi

B=$(mktemp -d "${BENCH_DIR:-/tmp}/docfs-bench.XXXXXX")
MOUNTS=()
FAILED=0

# The daemon serving MNT from STORE.
daemon_pid() { # STORE MNT
	pgrep -f -- "${DOCFS##*/} mount .*$1 $2\$" | head -n1 || true
}

unmount() { # MNT [STORE]: unmounts, and waits for the docfs daemon to finish
	local pid=""
	[ -n "${2:-}" ] && pid=$(daemon_pid "$2" "$1")
	if mountpoint -q "$1"; then
		fusermount3 -u "$1" 2>/dev/null || { sleep 1; fusermount3 -u "$1" 2>/dev/null; } ||
			umount "$1" 2>/dev/null || fusermount3 -uz "$1" 2>/dev/null || true
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
	local rc=$? m
	for m in "${MOUNTS[@]}"; do
		unmount "$m" "$B/store-${m##*/mnt-}"
	done
	# Interrupted during the -o uring runs: put the kernel's parameter back.
	[ -z "${URING_BEFORE:-}" ] || echo "$URING_BEFORE" > "$URING_PARAM" 2>/dev/null || true
	rm -rf "$B"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mount_docfs() { # NAME: mounts $B/store-NAME at $B/mnt-NAME
	mkdir -p "$B/store-$1" "$B/mnt-$1"
	"$DOCFS" mount -o "log=$B/log-$1${BENCH_MOUNT_OPTS:+,$BENCH_MOUNT_OPTS}" "$B/store-$1" "$B/mnt-$1" || die "docfs mount $1 failed"
	mountpoint -q "$B/mnt-$1" || die "$B/mnt-$1 is not mounted after docfs mount returned"
	MOUNTS+=("$B/mnt-$1")
}

unmount_docfs() { # NAME
	unmount "$B/mnt-$1" "$B/store-$1"
}

drop_caches() {
	sync
	[ "$CAN_DROP" -eq 1 ] && echo 3 > /proc/sys/vm/drop_caches
	return 0
}

# problem MESSAGE [LOGNAME]: records a docfs misbehaviour (the run goes on, exits 1 at the end)
problem() {
	FAILED=1
	echo "bench: PROBLEM: $1" >&2
	if [ -n "${2:-}" ] && [ -s "$B/log-$2" ]; then
		echo "--- docfs log $2 (last lines)" >&2
		tail -n 20 "$B/log-$2" >&2
	fi
}


rate() { # COUNT SECONDS : documents per second, rounded
	awk -v n="$1" -v s="$2" 'BEGIN { if (s == 0) print "n/a"; else printf "%d", n / s + 0.5 }'
}
le() { # A B : "met" when A <= B
	awk -v a="$1" -v b="$2" 'BEGIN { print (a <= b) ? "met" : "not met" }'
}
kib_to_mib() {
	awk -v k="$1" 'BEGIN { if (k == "") print "n/a"; else printf "%.1f MiB", k / 1024 }'
}
vmhwm() { # STORE MNT : the daemon's peak RSS in KiB
	local pid
	pid=$(daemon_pid "$1" "$2")
	[ -n "$pid" ] && awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true
}
count_json() { # DIR : the number of <name>.json entries listed
	ls -f "$1" | grep -c '\.json$' || true
}
bytes_h() { # PATH : disk usage
	du -sh "$1" 2>/dev/null | cut -f1
}

CPU=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
MACHINE="$(nproc) cores ($CPU), $(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) RAM, Linux $(uname -r), $(stat -f -c %T "$B") at $B"
DATE=$(date -u +%Y-%m-%d)
VERSION=$("$DOCFS" version 2>/dev/null || echo "docfs ?")
echo "docfs benchmarks: $VERSION ($DOCFS), $DATE" >&2
echo "machine: $MACHINE" >&2
[ "$CAN_DROP" -eq 1 ] || MACHINE="$MACHINE; page cache NOT dropped (not root)"

########################################################################################
# 1. Bulk insert
echo "== 1. bulk insert of $N_BULK users" >&2
"$DOCFS" generate "$TEMPLATE" -n "$N_BULK" --seed 1 > "$B/users.jsonl" || die "docfs generate failed"
[ "$(wc -l < "$B/users.jsonl")" -eq "$N_BULK" ] || die "docfs generate wrote $(wc -l < "$B/users.jsonl") lines, not $N_BULK"
JSONL_SIZE=$(bytes_h "$B/users.jsonl")

mount_docfs bulk
mkdir "$B/mnt-bulk/test" "$B/mnt-bulk/test/users"
drop_caches
timeit 'cat "$B/users.jsonl" > "$B/mnt-bulk/test/users/.insert"'
T_INSERT=$T
[ "$RC" -eq 0 ] || problem "cat users.jsonl > test/users/.insert exited $RC" bulk
C_INSERT=$(count_json "$B/mnt-bulk/test/users")
[ "$C_INSERT" -eq "$N_BULK" ] || problem "test/users lists $C_INSERT documents after inserting $N_BULK" bulk
RSS_INSERT=$(vmhwm "$B/store-bulk" "$B/mnt-bulk")
timeit 'unmount_docfs bulk'
T_UNMOUNT=$T
SIZE_INSERT=$(bytes_h "$B/store-bulk")
rm -rf "$B/store-bulk"
echo "   .insert: ${T_INSERT}s ($C_INSERT documents), unmount ${T_UNMOUNT}s" >&2

mkdir "$B/store-import"
drop_caches
timeit '"$DOCFS" import "$B/store-import" test.users "$B/users.jsonl" > "$B/import.out" 2>&1'
T_IMPORT=$T
[ "$RC" -eq 0 ] || problem "docfs import exited $RC: $(tail -n 3 "$B/import.out")"
C_IMPORT=$("$DOCFS" export "$B/store-import" test.users | wc -l)
[ "$C_IMPORT" -eq "$N_BULK" ] || problem "docfs export test.users wrote $C_IMPORT documents after importing $N_BULK"
SIZE_IMPORT=$(bytes_h "$B/store-import")
rm -rf "$B/store-import"
echo "   docfs import: ${T_IMPORT}s ($C_IMPORT documents)" >&2

# sqlite3: every line is one row of one TEXT column. ASCII mode does no quote processing;
# the field separator 0x1F never occurs in the generated JSON, rows end at '\n'.
mkdir "$B/sqlite"
drop_caches
timeit 'sqlite3 "$B/sqlite/users.db" > "$B/sqlite.out" 2>&1 <<EOF
CREATE TABLE users(doc TEXT);
.mode ascii
.separator "\\037" "\\n"
BEGIN;
.import $B/users.jsonl users
COMMIT;
EOF'
T_SQLITE=$T
[ "$RC" -eq 0 ] || die "sqlite3 import exited $RC: $(tail -n 3 "$B/sqlite.out")"
C_SQLITE=$(sqlite3 "$B/sqlite/users.db" 'SELECT count(*) FROM users')
[ "$C_SQLITE" -eq "$N_BULK" ] || die "sqlite3 table has $C_SQLITE rows, not $N_BULK"
[ "$(sqlite3 "$B/sqlite/users.db" "SELECT doc FROM users WHERE rowid = $N_BULK")" = "$(tail -n 1 "$B/users.jsonl")" ] ||
	die "sqlite3: the last row is not the last line"
SIZE_SQLITE=$(bytes_h "$B/sqlite")
rm -rf "$B/sqlite"
echo "   sqlite3 .import: ${T_SQLITE}s ($C_SQLITE rows)" >&2

R_INSERT=$(rate "$N_BULK" "$T_INSERT")
R_IMPORT=$(rate "$N_BULK" "$T_IMPORT")
[ "$C_INSERT" -eq "$N_BULK" ] || R_INSERT="FAILED after $C_INSERT"
[ "$C_IMPORT" -eq "$N_BULK" ] || R_IMPORT="FAILED after $C_IMPORT"
R_SQLITE=$(rate "$N_BULK" "$T_SQLITE")
X_INSERT=$(div "$T_INSERT" "$T_SQLITE")
X_IMPORT=$(div "$T_IMPORT" "$T_SQLITE")

########################################################################################
# 2. grep -rl Beijing
echo "== 2. grep -rl Beijing over $N documents" >&2
head -n "$N" "$B/users.jsonl" > "$B/users-n.jsonl"
rm -f "$B/users.jsonl"
mount_docfs grep
DG=$B/mnt-grep/test/users
mkdir "$B/mnt-grep/test" "$DG"
cat "$B/users-n.jsonl" > "$DG/.insert" || problem "cat users-n.jsonl > test/users/.insert failed" grep
C_DOCFS=$(count_json "$DG")
[ "$C_DOCFS" -eq "$N" ] || problem "test/users lists $C_DOCFS documents after inserting $N" grep
# The native copy: the same bytes, read through the mount that did the insert.
mkdir "$B/native"
cp -r "$DG" "$B/native/" 2> "$B/cp.err" ||
	problem "cp -r test/users to the native directory failed ($(wc -l < "$B/cp.err") errors): $(head -n 2 "$B/cp.err" | tr '\n' ' ')" grep
rm -f "$B/native/users/.insert"
C_NATIVE=$(count_json "$B/native/users")
[ "$C_NATIVE" -eq "$N" ] || problem "the native copy holds $C_NATIVE documents, not $N" grep
NATIVE_SIZE=$(bytes_h "$B/native/users")
unmount_docfs grep

# grep_run NAME DIR : times `grep -rl Beijing DIR` once; sets T, and G (files found)
grep_run() {
	local gname=$1 gdir=$2
	timeit 'grep -rl Beijing "$gdir" > "$B/grep-$gname" 2> "$B/grep-$gname.err"'
	[ "$RC" -le 1 ] || problem "grep -rl ($1) exited $RC: $(head -n 3 "$B/grep-$1.err")" grep
	G=$(wc -l < "$B/grep-$1")
	sed "s|^$2/||" "$B/grep-$1" | sort > "$B/grep-$1.names"
}

drop_caches
mount_docfs grep
grep_run docfs-cold "$DG"
T_DC=$T G_DC=$G
grep_run docfs-warm "$DG"
T_DW=$T G_DW=$G
RSS_GREP=$(vmhwm "$B/store-grep" "$B/mnt-grep")
unmount_docfs grep

# The same through FUSE over io_uring (`-o uring`, fs/fuse/ring.c), when the kernel has it: its
# module parameter is turned on for this mount and put back after it.
URING_PARAM=/sys/module/fuse/parameters/enable_uring
T_UC=- T_UW=- G_UC=- G_UW=- UR_STATUS="not run: $URING_PARAM missing or read-only"
if [ -w "$URING_PARAM" ]; then
	URING_BEFORE=$(cat "$URING_PARAM")
	echo Y > "$URING_PARAM"
	drop_caches
	BENCH_MOUNT_OPTS="${BENCH_MOUNT_OPTS:+$BENCH_MOUNT_OPTS,}uring" mount_docfs grep
	grep_run docfs-uring-cold "$DG"
	T_UC=$T G_UC=$G
	grep_run docfs-uring-warm "$DG"
	T_UW=$T G_UW=$G
	UR_STATUS=$(cat "$B/mnt-grep/.docfs/status")
	unmount_docfs grep
	echo "$URING_BEFORE" > "$URING_PARAM"
	case $UR_STATUS in
	*'"transport": "io_uring"'*) ;;
	*) problem "-o uring did not serve through io_uring: $UR_STATUS" grep ;;
	esac
fi

drop_caches
grep_run native-cold "$B/native/users"
T_NC=$T G_NC=$G
grep_run native-warm "$B/native/users"
T_NW=$T G_NW=$G

mkdir "$B/bindmnt"
drop_caches
bindfs "$B/native/users" "$B/bindmnt" || die "bindfs failed"
MOUNTS+=("$B/bindmnt")
grep_run bindfs-cold "$B/bindmnt"
T_BC=$T G_BC=$G
grep_run bindfs-warm "$B/bindmnt"
T_BW=$T G_BW=$G
unmount "$B/bindmnt"

URING_RUNS=
[ "$T_UC" = - ] || URING_RUNS="docfs-uring-cold docfs-uring-warm"
for r in docfs-warm $URING_RUNS native-cold native-warm bindfs-cold bindfs-warm; do
	cmp -s "$B/grep-docfs-cold.names" "$B/grep-$r.names" ||
		problem "grep -rl found different files on docfs (cold, $G_DC) and $r: $(diff "$B/grep-docfs-cold.names" "$B/grep-$r.names" | head -n 4 | tr '\n' ' ')"
done
[ "$G_DC" -gt 0 ] || problem "grep -rl Beijing found nothing"
GREP_SAME=$([ "$G_DC" = "$G_DW" ] && [ "$G_DC" = "$G_NC" ] && [ "$G_DC" = "$G_NW" ] &&
	[ "$G_DC" = "$G_BC" ] && [ "$G_DC" = "$G_BW" ] && echo yes || echo NO)
echo "   docfs ${T_DC}s/${T_DW}s, native ${T_NC}s/${T_NW}s, bindfs ${T_BC}s/${T_BW}s; $G_DC files" >&2

X_DB_COLD=$(div "$T_DC" "$T_BC")
X_DB_WARM=$(div "$T_DW" "$T_BW")
X_DN_COLD=$(div "$T_DC" "$T_NC")
X_DN_WARM=$(div "$T_DW" "$T_NW")
GOAL_BINDFS_COLD=$(le "$T_DC" "$T_BC")
GOAL_BINDFS_WARM=$(le "$T_DW" "$T_BW")
GOAL_NATIVE_WARM=$(le "$T_DW" "$(awk -v n="$T_NW" 'BEGIN { print 3 * n }')")
X_UN_COLD=- X_UN_WARM=- X_UB_COLD=- X_UB_WARM=- GOAL_URING_WARM="not run" GOAL_URING_BINDFS=-
if [ "$T_UC" != - ]; then
	X_UN_COLD=$(div "$T_UC" "$T_NC")
	X_UN_WARM=$(div "$T_UW" "$T_NW")
	X_UB_COLD=$(div "$T_UC" "$T_BC")
	X_UB_WARM=$(div "$T_UW" "$T_BW")
	GOAL_URING_WARM=$(le "$T_UW" "$(awk -v n="$T_NW" 'BEGIN { print 3 * n }')")
	GOAL_URING_BINDFS="cold $(le "$T_UC" "$T_BC"), warm $(le "$T_UW" "$T_BW")"
fi

########################################################################################
# 3. ls -l | wc -l
echo "== 3. ls -l | wc -l over $N documents" >&2
ls_run() { # NAME DIR : times `ls -l DIR | wc -l`; sets T, L (lines)
	local lname=$1 ldir=$2
	timeit 'ls -l "$ldir" 2> "$B/ls-$lname.err" | wc -l > "$B/ls-$lname"'
	if [ -s "$B/ls-$1.err" ]; then
		problem "ls -l ($1): $(head -n 3 "$B/ls-$1.err")" grep
	fi
	L=$(cat "$B/ls-$1")
}
drop_caches
mount_docfs grep
ls_run docfs-cold "$DG"
T_LDC=$T L_DC=$L
ls_run docfs-warm "$DG"
T_LDW=$T L_DW=$L
RSS_LS=$(vmhwm "$B/store-grep" "$B/mnt-grep")
unmount_docfs grep
drop_caches
ls_run native-cold "$B/native/users"
T_LNC=$T L_NC=$L
ls_run native-warm "$B/native/users"
T_LNW=$T L_NW=$L
# The "total" line, N documents and the other names the copy holds (query/: listed empty).
L_EXPECT=$(($(ls "$B/native/users" | wc -l) + 1))
for l in "$L_DC" "$L_DW" "$L_NC" "$L_NW"; do
	[ "$l" -eq "$L_EXPECT" ] ||
		problem "ls -l | wc -l printed $l, expected $L_EXPECT (docfs cold $L_DC, warm $L_DW, native $L_NC, $L_NW)" grep
done
GOAL_LS=$(le "$T_LDC" 2)
echo "   docfs ${T_LDC}s/${T_LDW}s, native ${T_LNC}s/${T_LNW}s" >&2

########################################################################################
# Report
NFMT=$(printf "%'d" "$N" 2>/dev/null || echo "$N")
NBFMT=$(printf "%'d" "$N_BULK" 2>/dev/null || echo "$N_BULK")
cat <<EOF
# docfs benchmarks

$VERSION, $DATE, \`tests/bench/run.sh\`${BENCH_MOUNT_OPTS:+ with mount options \`$BENCH_MOUNT_OPTS\`}; machine: $MACHINE.

## 1. Bulk insert of $NBFMT generated users ($JSONL_SIZE of JSON Lines)

| method | seconds | documents/s | time / sqlite3 time | on disk |
|---|---:|---:|---:|---:|
| docfs: \`cat users.jsonl > test/users/.insert\` | $T_INSERT | $R_INSERT | $X_INSERT | $SIZE_INSERT |
| docfs: \`docfs import STORE test.users users.jsonl\` (not mounted) | $T_IMPORT | $R_IMPORT | $X_IMPORT | $SIZE_IMPORT |
| sqlite3 CLI: \`.import\` into one TEXT column, one transaction | $T_SQLITE | $R_SQLITE | 1.00 | $SIZE_SQLITE |

Documents counted afterwards: .insert $C_INSERT, import $C_IMPORT, sqlite3 $C_SQLITE rows.
Unmounting after the .insert (checkpoint) took $T_UNMOUNT s (not included above); the
daemon's peak RSS during the insert was $(kib_to_mib "$RSS_INSERT").

## 2. \`grep -rl Beijing\` over $NFMT documents ($NATIVE_SIZE as native files)

| | docfs | native dir | bindfs over native | docfs / bindfs | docfs / native |
|---|---:|---:|---:|---:|---:|
| cold (s) | $T_DC | $T_NC | $T_BC | $X_DB_COLD | $X_DN_COLD |
| warm (s) | $T_DW | $T_NW | $T_BW | $X_DB_WARM | $X_DN_WARM |
| files found (cold / warm) | $G_DC / $G_DW | $G_NC / $G_NW | $G_BC / $G_BW | | |
| \`-o uring\`: cold (s) | $T_UC | | | $X_UB_COLD | $X_UN_COLD |
| \`-o uring\`: warm (s) | $T_UW | | | $X_UB_WARM | $X_UN_WARM |
| \`-o uring\`: files found (cold / warm) | $G_UC / $G_UW | | | | |

The \`-o uring\` mount (FUSE over io_uring, a queue per CPU): $UR_STATUS

Same files found everywhere: $GREP_SAME. Cold = after unmount/remount (docfs, bindfs) and
\`sync; echo 3 > /proc/sys/vm/drop_caches\`; warm = the same command run again right after.

| goal | result |
|---|---|
| docfs at least as fast as bindfs, cold ($T_DC s vs $T_BC s) | $GOAL_BINDFS_COLD |
| docfs at least as fast as bindfs, warm ($T_DW s vs $T_BW s) | $GOAL_BINDFS_WARM |
| docfs warm within 3x of native warm ($X_DN_WARM x) | $GOAL_NATIVE_WARM |
| docfs \`-o uring\` at least as fast as bindfs | $GOAL_URING_BINDFS |
| docfs \`-o uring\` warm within 3x of native warm ($X_UN_WARM x) | $GOAL_URING_WARM |

## 3. \`ls -l | wc -l\` over $NFMT documents

| | docfs | native dir | docfs / native |
|---|---:|---:|---:|
| cold (s) | $T_LDC | $T_LNC | $(div "$T_LDC" "$T_LNC") |
| warm (s) | $T_LDW | $T_LNW | $(div "$T_LDW" "$T_LNW") |
| lines (cold / warm) | $L_DC / $L_DW | $L_NC / $L_NW | |

Lines = the \`total\` line + $NFMT documents + the other names listed (\`query/\`, listed
empty by design and copied as an empty directory into the native tree).

| goal / figure | result |
|---|---|
| docfs cold \`ls -l\` under 2 s ($T_LDC s) | $GOAL_LS |
| docfs daemon peak RSS (VmHWM) after the cold and warm \`ls -l\` | $(kib_to_mib "$RSS_LS") |
| docfs daemon peak RSS (VmHWM) after the cold and warm \`grep -rl\` | $(kib_to_mib "$RSS_GREP") |

## Summary (for README.md)

\`\`\`
Benchmarks ($DATE, $(nproc) cores, tests/bench/run.sh${BENCH_MOUNT_OPTS:+, -o $BENCH_MOUNT_OPTS}):
  insert $NBFMT docs via .insert   $T_INSERT s  ($R_INSERT docs/s; sqlite3 .import: $T_SQLITE s, $R_SQLITE docs/s; ratio $X_INSERT)
  docfs import $NBFMT docs         $T_IMPORT s  ($R_IMPORT docs/s; ratio $X_IMPORT)
  grep -rl over $NFMT docs, cold   docfs $T_DC s, bindfs $T_BC s, native $T_NC s  (docfs/bindfs $X_DB_COLD: $GOAL_BINDFS_COLD)
  grep -rl over $NFMT docs, warm   docfs $T_DW s, bindfs $T_BW s, native $T_NW s  (docfs/native $X_DN_WARM, goal <= 3: $GOAL_NATIVE_WARM)
  the same with -o uring           cold $T_UC s (docfs/bindfs $X_UB_COLD), warm $T_UW s (docfs/native $X_UN_WARM, goal <= 3: $GOAL_URING_WARM)
  ls -l over $NFMT docs, cold      docfs $T_LDC s, native $T_LNC s  (goal < 2 s: $GOAL_LS); daemon peak RSS $(kib_to_mib "$RSS_LS")
\`\`\`
EOF

if [ "$FAILED" -ne 0 ]; then
	echo
	echo "**docfs misbehaved during this run** (wrong counts or errors, see the PROBLEM lines on stderr); the figures above are not valid."
	echo "bench: docfs misbehaved during the run (see PROBLEM lines above); figures may be meaningless" >&2
	exit 1
fi
