#!/usr/bin/env bash
# pjdfstest.sh - a fixed subset of pjdfstest (issue 28), run with prove as root in a
# subdirectory of a collection on an allow_other mount (the issue's case (a): every name
# there is a scratch entry, so POSIX applies fully). Every assertion of every chosen file
# must pass, each file must run its whole plan (a file that pjdfstest skips on this system
# prints a plan of 1 and would pass unseen), the directory must be empty afterwards (each
# file removes what it made) and `docfs check` sound. pjdfstest is built at test time from
# its source (../shared/third_party/pjdfstest, or PJDFSTEST_SRC) in the test's temporary
# directory. The whole suite and case (b) are in tests/bench/pjdfstest.sh; README
# "pjdfstest" says which files run where and why.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" -eq 0 ] || { echo "SKIP: pjdfstest changes uid itself: run as root"; exit 77; }
for tool in autoreconf make cc prove; do
	command -v "$tool" > /dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done
SRC=${PJDFSTEST_SRC:-$(cd "$(dirname "$0")/../.." && pwd)/../shared/third_party/pjdfstest}
[ -f "$SRC/pjdfstest.c" ] || SRC=/work/shared/third_party/pjdfstest
[ -f "$SRC/pjdfstest.c" ] || { echo "SKIP: no pjdfstest source (set PJDFSTEST_SRC)"; exit 77; }

# The subset: the files that check what docfs implements itself (creating each kind of
# entry, times, link counts, rename's rules, permission checks for another uid,
# truncation, open-then-unlink), cheap enough for the test command (about 20 s of
# CPU and 15 s of pjdfstest's own sleeps). Left to the bench: the files that check the
# kernel's path walk (ENAMETOOLONG, ENOTDIR, ELOOP, EFAULT...), the long loops over every
# file type and uid (chmod/00, chown/00, link/00, rename/00, rename/09-10, unlink/00,
# unlink/11, open/06), open/25 (a 2 GiB file), and EEXIST, O_EXCL and the sticky bit
# (mkdir/10, open/22, rmdir/11), which tests/mount/posix.sh and scratch_dirs.sh check.
FILES=${PJD_FILES:-"chmod/12.t ftruncate/00.t truncate/00.t link/10.t mkdir/00.t mkfifo/00.t
	mknod/11.t open/00.t open/26.t rename/20.t rename/21.t rename/23.t rename/24.t rmdir/00.t
	rmdir/06.t symlink/00.t unlink/14.t utimensat/00.t utimensat/02.t utimensat/04.t
	utimensat/06.t utimensat/07.t utimensat/08.t"}
# PJD_FILES (other files, to try one) is not for the test command.

step "build pjdfstest from $SRC"
t0=$SECONDS
cp -r "$SRC" "$T/pjd"
(cd "$T/pjd" && autoreconf -ifs && ./configure && make pjdfstest) > "$T/pjd-build.log" 2>&1 ||
	fail "building pjdfstest: $(tail -n 20 "$T/pjd-build.log")"
echo "  built in $((SECONDS - t0)) s"

chmod 755 "$T" # pjdfstest's other uids must reach the mount point
mount_docfs allow_other
DIR=$MNT/db/c/sub
mkdir -p "$DIR"
chmod 777 "$MNT/db/c" "$DIR"

step "prove: $(echo $FILES | wc -w) files in a collection's subdirectory"
paths=()
for f in $FILES; do paths+=("$T/pjd/tests/$f"); done
rc=0
(cd "$DIR" && prove -v "${paths[@]}") > "$T/prove.out" 2>&1 || rc=$?
if [ "$rc" -ne 0 ]; then
	grep -E "^$T/pjd/tests/|^not ok" "$T/prove.out" | grep -B1 "^not ok" >&2 || true
	grep -A40 "^Test Summary Report" "$T/prove.out" >&2 || tail -n 20 "$T/prove.out" >&2
	fail "prove exited $rc"
fi
grep -q "^Result: PASS" "$T/prove.out" || fail "prove did not pass: $(tail -n 5 "$T/prove.out")"
# Each file's first plan line ("1..N") must be one the file itself prints: pjdfstest's
# quick_exit (an operation it thinks unsupported) prints 1..1 and one "ok".
for f in $FILES; do
	got=$(awk -v f="$T/pjd/tests/$f " 'index($0, f) == 1 { on = 1; next }
		on && /^1\.\.[0-9]+$/ { print substr($0, 4); exit }' "$T/prove.out")
	grep -qx "[[:space:]]*echo \"1\.\.$got\"" "$T/pjd/tests/$f" ||
		fail "$f ran a plan of '$got' tests, not its own (skipped?)"
done
total=$(sed -n 's/.*Tests=\([0-9]*\).*/\1/p' "$T/prove.out" | tail -n1)
sed -n 's/^Files=/  Files=/p' "$T/prove.out"
[ -n "${PJD_FILES:-}" ] || [ "$total" -gt 400 ] || fail "only $total assertions ran"
expect_eq "$(ls -A "$DIR" | head -n 5)" "" "what pjdfstest left in the directory"
unmount_docfs
"$DOCFS" check "$STORE" > "$T/check.out" 2>&1 || fail "docfs check: $(cat "$T/check.out")"
echo "ok: $total pjdfstest assertions pass"
