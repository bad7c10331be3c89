#!/usr/bin/env bash
# layers.sh - the rooms of fs/ keep to their layer (HACKING.md): only fs/fuse/ and the
# router's own mount (fs/router/mount.c) include FUSE headers; nothing in fs/wire/ includes
# FUSE, SQLite or libgit2 headers; the FUSE side and the path files include wire/ nowhere
# but where the listener starts (fs/fuse/mount.c) and the command line (fs/cli/cli.c); and
# fs/ has no loose .c files left outside its rooms.
set -euo pipefail
cd "$(dirname "$0")/../.."
bad=$(grep -nE '^#include *[<"](fuse|linux/fuse|sqlite3|git2)' fs/wire/*.[ch] || true)
[ -z "$bad" ] || { echo "FAIL: fs/wire/ includes what it must not:"; echo "$bad"; exit 1; }
bad=$(grep -rlE '^#include *[<"](fuse|linux/fuse)' fs | grep -vE '^fs/(fuse/[a-z_]+\.c|router/mount\.c)$' || true)
[ -z "$bad" ] || { echo "FAIL: FUSE headers outside fs/fuse/: $bad"; exit 1; }
bad=$(grep -lE '^#include *"(wire/)?wire\.h"' fs/fuse/*.c fs/paths/*.c fs/ops/*.c fs/cli/*.c |
	grep -vE '^fs/(fuse/mount|cli/cli)\.c$' || true)
[ -z "$bad" ] || { echo "FAIL: FUSE-side files include wire.h: $bad"; exit 1; }
loose=$(ls fs/*.c 2> /dev/null || true)
[ -z "$loose" ] || { echo "FAIL: .c files loose in fs/ (give them a room): $loose"; exit 1; }
n=$(ls fs/*/*.[ch] | wc -l)
echo "layers.sh: $n files in the rooms of fs/ keep to their layers"
