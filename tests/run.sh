#!/usr/bin/env bash
# tests/run.sh - the test command: installs what is missing (Debian packages), builds docfs
# twice (a normal build and one with AddressSanitizer + UndefinedBehaviorSanitizer at -O1), and runs
# every test suite (unit, mount) in both. The last line is the overall summary.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential pkg-config meson ninja-build libfuse3-dev fuse3 liburing-dev libbson-dev libpcre2-dev
	libsqlite3-dev libgit2-dev libstemmer-dev check sqlite3 jq vim perl python3 bindfs strace rsync
	openssh-server sshfs fio autoconf automake python3-pymongo libmongoc-dev stress-ng git
	zookeeper libzookeeper-mt-dev libssl-dev openssl libicu-dev)
missing=()
for p in "${packages[@]}"; do
	dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "== installing: ${missing[*]}"
	if [ "$(id -u)" -ne 0 ]; then
		echo "tests/run.sh: missing packages (${missing[*]}); run as root or install them" >&2
		exit 1
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The independent oracle of the differential query tests: mingo, from the npm registry.
if ! command -v node >/dev/null 2>&1; then
	echo "== installing nodejs and npm"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
if [ ! -d tests/query/diff/node_modules/mingo ]; then
	echo "== installing mingo (npm ci)"
	npm ci --prefix tests/query/diff --no-audit --no-fund --loglevel=error >/dev/null
fi
# mongosh for the wire protocol's transcript test (tests/wire/mongosh.sh),
# and the Node.js driver for the unified CRUD spec runner (tests/wire/unified.sh).
if [ ! -x tests/wire/node_modules/.bin/mongosh ] || [ ! -f tests/wire/node_modules/mongodb/package.json ]; then
	echo "== installing mongosh and the mongodb driver (npm ci)"
	npm ci --prefix tests/wire --no-audit --no-fund --loglevel=error >/dev/null
fi

# libmongoc (linked for the replica-set members) makes /dev/shm/mongoc-PID counters when any
# docfs starts, and a daemon the tests kill -9 leaves its file behind; a later process given
# the same pid then prints "Falling back to malloc for counters" on stderr, which a test that
# compares a command's exact error output reads as a failure (a clean-clone run failed so in
# mount-index). The counters are libmongoc's own statistics: off for the tests.
export MONGOC_DISABLE_SHM=1

total_ok=0
total_fail=0
run_suite() { # build-dir, extra meson setup args...
	local dir=$1
	shift
	if [ ! -f "$dir/build.ninja" ]; then
		meson setup "$dir" "$@" >/dev/null
	fi
	ninja -C "$dir" >/dev/null
	local log=$dir/meson-logs/testlog.txt
	local rc=0
	meson test -C "$dir" --print-errorlogs --num-processes 2 || rc=$?
	local ok fail
	ok=$(grep -E '^Ok: ' "$dir/meson-logs/testlog.txt" | tail -n1 | awk '{print $2}')
	fail=$(grep -E '^Fail: ' "$dir/meson-logs/testlog.txt" | tail -n1 | awk '{print $2}')
	total_ok=$((total_ok + ${ok:-0}))
	total_fail=$((total_fail + ${fail:-0}))
	if [ "$rc" -ne 0 ] && [ "${fail:-0}" -eq 0 ]; then
		total_fail=$((total_fail + 1))
	fi
	: "$log"
}

echo "== build and test (debugoptimized)"
run_suite build
echo "== build and test (address,undefined sanitizers)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	run_suite build-asan -Db_sanitize=address,undefined -Db_lundef=false -Doptimization=1 -Ddebug=true

echo "tests/run.sh: Ok: $total_ok Fail: $total_fail"
[ "$total_fail" -eq 0 ]
