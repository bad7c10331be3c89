#!/usr/bin/env bash
# layers.sh - the wire protocol front end keeps to its layer: nothing in fs/wire/ includes a
# FUSE header (or a header that does: fuse*.h, linux/fuse.h), SQLite or libgit2, and no
# FUSE file includes wire/ except mount.c (which starts the listener with the mount).
set -euo pipefail
cd "$(dirname "$0")/../.."
bad=$(grep -nE '^#include *[<"](fuse|linux/fuse|sqlite3|git2)' fs/wire/*.[ch] || true)
[ -z "$bad" ] || { echo "FAIL: fs/wire/ includes what it must not:"; echo "$bad"; exit 1; }
bad=$(grep -lE '^#include *"(wire/)?wire\.h"' fs/*.c | grep -vE '^fs/(mount|cli)\.c$' || true)
[ -z "$bad" ] || { echo "FAIL: FUSE-side files include wire.h: $bad"; exit 1; }
n=$(ls fs/wire/*.[ch] | wc -l)
echo "layers.sh: $n files of fs/wire/ keep to their layer"
