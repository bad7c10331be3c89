#!/usr/bin/env bash
# tests/bench/snapshot.sh [DOCFS] - git snapshots of a collection against the route a user
# would take without docfs, in one run, on 1,000,000 generated users:
#   1. docfs: `docfs snapshot STORE test.users` (first), then 1% of the documents changed
#      through a mount, then a second `docfs snapshot STORE test.users`;
#   2. the same documents as files (`cp -r` of the collection directory out of the mount:
#      the same bytes), `git init && git add -A && git commit` on them; then the same 1%
#      change copied in, and `git add -A && git commit` again.
# Prints one Markdown table and the goals (second snapshot under 10% of the first; the
# first snapshot faster than export + git). Not part of the test suite: no figure fails
# anything; wrong counts (documents in the commits, files changed between them, blobs
# differing between the two routes) or docfs errors do (exit 1).
# Needs git, python3, fusermount3 and /dev/fuse. Environment: BENCH_DIR (where the
# temporary directory goes, default /tmp), BENCH_N_SNAP (1000000), BENCH_MOUNT_OPTS (extra
# comma-separated `docfs mount -o` options).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/bench/lib.sh"
TIMEIT_SYNC=1
DOCFS=${1:-$ROOT/build/docfs}
case $DOCFS in /*) ;; *) DOCFS=$PWD/$DOCFS ;; esac
N=${BENCH_N_SNAP:-1000000}
TEMPLATE=$ROOT/examples/users.template.json

# git must not ask who we are; the docfs snapshots take the same identity.
export GIT_AUTHOR_NAME="docfs bench" GIT_AUTHOR_EMAIL=bench@example.com
export GIT_COMMITTER_NAME="docfs bench" GIT_COMMITTER_EMAIL=bench@example.com
# No user or system git configuration changes what is measured.
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null

missing=()
for tool in git python3 fusermount3 mountpoint pgrep; do
	command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] ||
	die "missing tools: ${missing[*]} (e.g. apt-get install git python3 fuse3 util-linux procps)"
[ -x "$DOCFS" ] || die "no docfs binary at $DOCFS (build it: meson setup build --buildtype=release && ninja -C build)"
"$DOCFS" --help 2>&1 | grep '^  snapshot ' >/dev/null || die "$DOCFS has no 'snapshot' command (docfs --help)"
[ -e /dev/fuse ] || die "no /dev/fuse"
[ -f "$TEMPLATE" ] || die "no template at $TEMPLATE"
[ "$N" -ge 100 ] || die "BENCH_N_SNAP ($N) must be at least 100 (1% of it is changed)"

B=$(mktemp -d "${BENCH_DIR:-/tmp}/docfs-snapbench.XXXXXX")
STORE=$B/store
MNT=$B/mnt
FILES=$B/files # the plain git route: FILES/users/<name>.json, a git work tree
REPO=$STORE/snapshots.git
MOUNTED=0
FAILED=0
mkdir -p "$STORE" "$MNT" "$FILES"

daemon_pid() {
	pgrep -f -- "${DOCFS##*/} mount .*$STORE $MNT\$" | head -n1 || true
}

mount_docfs() {
	"$DOCFS" mount -o "log=$B/log${BENCH_MOUNT_OPTS:+,$BENCH_MOUNT_OPTS}" "$STORE" "$MNT" || die "docfs mount failed"
	mountpoint -q "$MNT" || die "$MNT is not mounted after docfs mount returned"
	MOUNTED=1
}

unmount_docfs() { # unmounts, and waits for the daemon to finish (gone or a zombie)
	local pid
	pid=$(daemon_pid)
	if mountpoint -q "$MNT"; then
		fusermount3 -u "$MNT" 2>/dev/null || { sleep 1; fusermount3 -u "$MNT" 2>/dev/null; } ||
			umount "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null || true
	fi
	if [ -n "$pid" ]; then
		for _ in $(seq 1 600); do
			case "$(ps -o stat= -p "$pid" 2>/dev/null)" in
			"" | Z*) break ;;
			esac
			sleep 0.1
		done
		case "$(ps -o stat= -p "$pid" 2>/dev/null)" in
		"" | Z*) ;;
		*) echo "bench: WARNING: docfs daemon $pid still running 60 s after unmount" >&2 ;;
		esac
	fi
	MOUNTED=0
	return 0
}

cleanup() {
	local rc=$?
	[ "$MOUNTED" -eq 1 ] && unmount_docfs
	rm -rf "$B"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# problem MESSAGE: records a docfs misbehaviour or a wrong count (the run goes on, exits 1)
problem() {
	FAILED=1
	echo "bench: PROBLEM: $1" >&2
	if [ -s "$B/log" ]; then
		echo "--- docfs log (last lines)" >&2
		tail -n 20 "$B/log" >&2
	fi
}


# peak RSS in KiB of a command run under `/usr/bin/time -f %M -o FILE` (empty when absent)
TIMEV=""
[ -x /usr/bin/time ] && TIMEV=/usr/bin/time
rss_run() { # FILE COMMAND... : runs COMMAND, its peak RSS goes to FILE
	local f=$1
	shift
	if [ -n "$TIMEV" ]; then
		"$TIMEV" -f %M -o "$f" "$@"
	else
		"$@"
	fi
}
rss_mib() { # FILE
	[ -s "$1" ] && awk 'END { printf "%.1f MiB", $1 / 1024 }' "$1" || echo "n/a"
}

add() { # A B
	awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a + b }'
}
pct() { # A B : 100 * A / B, one decimal
	awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "n/a"; else printf "%.1f%%", 100 * a / b }'
}
lt() { # A B : "met" when A < B
	awk -v a="$1" -v b="$2" 'BEGIN { print (a < b) ? "met" : "not met" }'
}
bytes_h() { # PATH : disk usage
	du -sh "$1" 2>/dev/null | cut -f1
}
# The blobs of a tree as "<blob id> <name>", sorted, for comparing the two routes.
blobs() { # GITDIR TREEISH PREFIX : entries under PREFIX, the prefix stripped
	git --git-dir="$1" ls-tree -r "$2" -- "$3" | awk -v p="$3" '{ sub("^" p, "", $4); print $3, $4 }' | sort
}

CPU=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
MACHINE="$(nproc) cores ($CPU), $(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) RAM, Linux $(uname -r), $(stat -f -c %T "$B") at $B"
DATE=$(date -u +%Y-%m-%d)
VERSION=$("$DOCFS" version 2>/dev/null || echo "docfs ?")
GITVERSION=$(git --version)
T_START=$(date +%s)
echo "docfs snapshot benchmark: $VERSION ($DOCFS), $GITVERSION, $DATE" >&2
echo "machine: $MACHINE" >&2

########################################################################################
# Setup (not timed): N users imported into test.users
echo "== import of $N generated users (not timed)" >&2
"$DOCFS" generate "$TEMPLATE" -n "$N" --seed 1 | "$DOCFS" import "$STORE" test.users > "$B/import.out" 2>&1 ||
	die "docfs generate | docfs import failed: $(tail -n 3 "$B/import.out")"
STORE_SIZE=$(bytes_h "$STORE")

########################################################################################
# The documents as files, for the plain git route: the same bytes, copied out of the mount.
echo "== cp -r of test/users out of the mount" >&2
mount_docfs
C_MNT=$(ls -f "$MNT/test/users" | grep -c '\.json$' || true)
[ "$C_MNT" -eq "$N" ] || problem "test/users lists $C_MNT documents after importing $N"
timeit 'cp -r "$MNT/test/users" "$FILES/" 2> "$B/cp.err"'
T_CP=$T
[ "$RC" -eq 0 ] || problem "cp -r test/users out of the mount failed ($(wc -l < "$B/cp.err") errors): $(head -n 2 "$B/cp.err" | tr '\n' ' ')"
unmount_docfs
# Only the documents: every dot entry (.insert, .bulk, .indexes/, .queries/, .changes,
# .stats, .options, and whatever docfs lists there next) and the query and write
# directories (empty) are docfs's.
find "$FILES/users" -mindepth 1 -maxdepth 1 -name '.*' -exec rm -rf {} +
rm -rf "$FILES"/users/{query,explain,aggregate,update,delete}
C_FILES=$(ls -f "$FILES/users" | grep -c '\.json$' || true)
[ "$C_FILES" -eq "$N" ] || problem "the copy holds $C_FILES documents, not $N"
FILES_SIZE=$(bytes_h "$FILES/users")
echo "   cp -r: ${T_CP}s ($C_FILES files, $FILES_SIZE)" >&2

# For reference: `docfs export` of the collection to one JSON Lines file (not a file per
# document, and not the bytes the mount shows; the lower bound of an export route).
timeit '"$DOCFS" export "$STORE" test.users -o "$B/export.jsonl" 2> "$B/export.err"'
T_EXPORT=$T
[ "$RC" -eq 0 ] || problem "docfs export exited $RC: $(head -n 3 "$B/export.err")"
C_EXPORT=$(wc -l < "$B/export.jsonl")
[ "$C_EXPORT" -eq "$N" ] || problem "docfs export wrote $C_EXPORT documents, not $N"
EXPORT_SIZE=$(bytes_h "$B/export.jsonl")
rm -f "$B/export.jsonl"
echo "   docfs export: ${T_EXPORT}s ($C_EXPORT lines, $EXPORT_SIZE)" >&2

########################################################################################
# 1a. First snapshot, and the first commit of the plain route
echo "== first docfs snapshot" >&2
timeit 'rss_run "$B/rss-snap1" "$DOCFS" snapshot "$STORE" test.users -m first > "$B/snap1.out" 2>&1'
T_SNAP1=$T
[ "$RC" -eq 0 ] || problem "docfs snapshot (first) exited $RC: $(tail -n 3 "$B/snap1.out")"
SNAP1_OUT=$(tail -n 1 "$B/snap1.out")
C_SNAP1=$(git --git-dir="$REPO" ls-tree -r main 2>/dev/null | wc -l)
[ "$C_SNAP1" -eq $((N + 2)) ] ||
	problem "the first snapshot's tree has $C_SNAP1 entries, expected $((N + 2)) ($N documents, test/users/.indexes.json and .attrs.json)"
echo "   ${T_SNAP1}s: $SNAP1_OUT" >&2

echo "== git init && git add -A && git commit (first)" >&2
# gc.auto=0: otherwise `git commit` starts a detached `git gc --auto` (packing the N loose
# objects) that would run in the background of the timings that follow.
timeit 'git -C "$FILES" -c init.defaultBranch=main init -q && git -C "$FILES" config gc.auto 0 &&
	rss_run "$B/rss-git-add1" git -C "$FILES" add -A && git -C "$FILES" commit -q -m first > "$B/git1.out" 2>&1'
T_GIT1=$T
[ "$RC" -eq 0 ] || problem "git init/add/commit (first) exited $RC: $(tail -n 3 "$B/git1.out")"
C_GIT1=$(git -C "$FILES" ls-tree -r HEAD | wc -l)
[ "$C_GIT1" -eq "$N" ] || problem "the first plain git commit has $C_GIT1 files, expected $N"
echo "   ${T_GIT1}s" >&2

########################################################################################
# The 1% change, through the mount (not timed): every 100th document name in `ls -f`
# order, rewritten with user.age + 1 by python3, one open/write/close per file.
NCHG=$((N / 100))
echo "== change $NCHG documents through the mount (not timed)" >&2
mount_docfs
ls -f "$MNT/test/users" | grep '\.json$' | awk 'NR % 100 == 0' > "$B/changed"
[ "$(wc -l < "$B/changed")" -eq "$NCHG" ] || problem "picked $(wc -l < "$B/changed") documents to change, not $NCHG"
NCHG=$(wc -l < "$B/changed")
cat > "$B/change.py" <<'EOF'
import re, sys
d, names = sys.argv[1], sys.argv[2]
age = re.compile(r'("age": )(-?\d+)')
n = 0
for name in open(names).read().split():
    p = d + "/" + name
    with open(p) as f:
        text = f.read()
    new, k = age.subn(lambda m: m.group(1) + str(int(m.group(2)) + 1), text, count=1)
    if k != 1:
        sys.exit(f"{p}: no age field")
    with open(p, "w") as f:
        f.write(new)
    n += 1
print(n)
EOF
timeit 'python3 "$B/change.py" "$MNT/test/users" "$B/changed" > "$B/change.out" 2>&1'
T_CHANGE=$T
[ "$RC" -eq 0 ] || problem "rewriting $NCHG documents through the mount failed: $(tail -n 3 "$B/change.out")"
# The same change for the plain route: the changed files copied out of the mount.
timeit '(cd "$MNT/test/users" && xargs cp -t "$FILES/users/" < "$B/changed") 2> "$B/cp2.err"'
T_CP2=$T
[ "$RC" -eq 0 ] || problem "copying the $NCHG changed files out of the mount failed: $(head -n 2 "$B/cp2.err" | tr '\n' ' ')"
C_MNT2=$(ls -f "$MNT/test/users" | grep -c '\.json$' || true)
[ "$C_MNT2" -eq "$N" ] || problem "test/users lists $C_MNT2 documents after the change, not $N"
unmount_docfs
echo "   rewrite ${T_CHANGE}s, copy of the changed files ${T_CP2}s" >&2

########################################################################################
# 1b. Second snapshot, second commit
echo "== second docfs snapshot" >&2
timeit 'rss_run "$B/rss-snap2" "$DOCFS" snapshot "$STORE" test.users -m second > "$B/snap2.out" 2>&1'
T_SNAP2=$T
[ "$RC" -eq 0 ] || problem "docfs snapshot (second) exited $RC: $(tail -n 3 "$B/snap2.out")"
SNAP2_OUT=$(tail -n 1 "$B/snap2.out")
C_SNAP2=$(git --git-dir="$REPO" ls-tree -r main 2>/dev/null | wc -l)
[ "$C_SNAP2" -eq $((N + 2)) ] || problem "the second snapshot's tree has $C_SNAP2 entries, expected $((N + 2))"
D_SNAP=$(git --git-dir="$REPO" diff --name-only main~1 main 2>/dev/null | wc -l)
[ "$D_SNAP" -eq "$NCHG" ] || problem "git diff --name-only between the two snapshots lists $D_SNAP files, expected $NCHG"
echo "   ${T_SNAP2}s: $SNAP2_OUT" >&2
REPO_SIZE=$(bytes_h "$REPO")

echo "== git add -A && git commit (second)" >&2
timeit 'rss_run "$B/rss-git-add2" git -C "$FILES" add -A && git -C "$FILES" commit -q -m second > "$B/git2.out" 2>&1'
T_GIT2=$T
[ "$RC" -eq 0 ] || problem "git add/commit (second) exited $RC: $(tail -n 3 "$B/git2.out")"
C_GIT2=$(git -C "$FILES" ls-tree -r HEAD | wc -l)
[ "$C_GIT2" -eq "$N" ] || problem "the second plain git commit has $C_GIT2 files, expected $N"
D_GIT=$(git -C "$FILES" diff --name-only HEAD~1 HEAD | wc -l)
[ "$D_GIT" -eq "$NCHG" ] || problem "git diff --name-only HEAD~1 HEAD (plain route) lists $D_GIT files, expected $NCHG"
echo "   ${T_GIT2}s" >&2
GIT_SIZE=$(bytes_h "$FILES/.git")

# Both routes hold the same bytes (the mount's), so the same blob ids, in both commits.
SAME_BLOBS=yes
for c in 1 0; do
	blobs "$REPO" "main~$c" test/users/ | grep -v -E ' \.(indexes|attrs)\.json$' > "$B/blobs-docfs" || true
	blobs "$FILES/.git" "HEAD~$c" users/ > "$B/blobs-git" || true
	if ! cmp -s "$B/blobs-docfs" "$B/blobs-git"; then
		SAME_BLOBS=NO
		problem "snapshot main~$c and the plain commit HEAD~$c differ in $(diff "$B/blobs-docfs" "$B/blobs-git" | grep -c '^[<>]') blob lines, e.g. $(diff "$B/blobs-docfs" "$B/blobs-git" | grep '^[<>]' | head -n 2 | tr '\n' ' ')"
	fi
done

########################################################################################
# Report
T_ROUTE1=$(add "$T_CP" "$T_GIT1")
T_ROUTE2=$(add "$T_CP2" "$T_GIT2")
NFMT=$(printf "%'d" "$N" 2>/dev/null || echo "$N")
CFMT=$(printf "%'d" "$NCHG" 2>/dev/null || echo "$NCHG")
GOAL_RATIO=$(lt "$(div "$T_SNAP2" "$T_SNAP1" %.6f)" 0.1)
GOAL_FIRST=$(lt "$T_SNAP1" "$T_ROUTE1")
T_TOTAL=$(($(date +%s) - T_START))
cat <<EOF
# docfs snapshot benchmark

$VERSION, $GITVERSION, $DATE, \`tests/bench/snapshot.sh\`; machine: $MACHINE.
$NFMT generated users in test.users (store $STORE_SIZE; as files $FILES_SIZE), then $CFMT of
them (every 100th name of \`ls -f\`) rewritten through the mount with \`user.age\` + 1.

| | docfs snapshot | plain git: export + \`git add -A && git commit\` | git alone | docfs / git route | docfs / git alone |
|---|---:|---:|---:|---:|---:|
| first (s) | $T_SNAP1 | $T_ROUTE1 | $T_GIT1 | $(div "$T_SNAP1" "$T_ROUTE1") | $(div "$T_SNAP1" "$T_GIT1") |
| second, after the $CFMT changes (s) | $T_SNAP2 | $T_ROUTE2 | $T_GIT2 | $(div "$T_SNAP2" "$T_ROUTE2") | $(div "$T_SNAP2" "$T_GIT2") |
| second / first | $(pct "$T_SNAP2" "$T_SNAP1") | $(pct "$T_ROUTE2" "$T_ROUTE1") | $(pct "$T_GIT2" "$T_GIT1") | | |
| peak RSS (first / second) | $(rss_mib "$B/rss-snap1") / $(rss_mib "$B/rss-snap2") | \`git add\`: $(rss_mib "$B/rss-git-add1") / $(rss_mib "$B/rss-git-add2") | | | |
| repository size after both | $REPO_SIZE | $GIT_SIZE (\`.git\`, loose objects) | | | |

- Export for the git route: first \`cp -r MNT/test/users\` out of the mount, $T_CP s (the
  same bytes the snapshot stores; \`.insert\`, \`query/\`, \`.queries/\` removed); second only
  the $CFMT changed files copied out of the mount, $T_CP2 s (a user who does not know which
  files changed would copy all again). For reference, \`docfs export STORE test.users -o FILE\`
  (one JSON Lines file, $EXPORT_SIZE, not a file per document) took $T_EXPORT s.
- git alone = \`git init && git add -A && git commit -q\` (first; \`gc.auto\` off, or \`git
  commit\` starts a background \`gc\`) and \`git add -A && git commit -q\` (second).
- docfs output, first: \`$SNAP1_OUT\`; second: \`$SNAP2_OUT\`.
- Checked: both snapshot trees hold $C_SNAP1 / $C_SNAP2 entries ($NFMT documents +
  \`.indexes.json\`, \`.attrs.json\`), \`git diff --name-only main~1 main\` lists $D_SNAP; the plain commits hold
  $C_GIT1 / $C_GIT2 files, \`git diff --name-only HEAD~1 HEAD\` lists $D_GIT; the documents'
  blob ids are the same in both routes, in both commits: $SAME_BLOBS.

| goal | result |
|---|---|
| second snapshot under 10% of the first ($(pct "$T_SNAP2" "$T_SNAP1")) | $GOAL_RATIO |
| first snapshot faster than export + git ($T_SNAP1 s vs $T_ROUTE1 s) | $GOAL_FIRST |

Whole run, with the untimed import and change (not the cleanup): $T_TOTAL s.
EOF

if [ "$FAILED" -ne 0 ]; then
	echo
	echo "**docfs misbehaved during this run** (wrong counts or errors, see the PROBLEM lines on stderr); the figures above are not valid."
	echo "bench: docfs misbehaved or counts were wrong (see PROBLEM lines above)" >&2
	exit 1
fi
