#!/usr/bin/env bash
# spill.sh - bounded memory for queries: with tiny limits (sort_mem, result_mem mount
# options) a sort spills to temporary runs and merges them, a large result is served from a
# temporary file, and both give exactly what the in-memory paths give.
. "$(dirname "$0")/lib.sh"
mount_docfs "sort_mem=65536,result_mem=4096"
C=$MNT/test/spill
mkdir -p "$C"
python3 - > "$T/docs.jsonl" <<'PY'
import json, random
r = random.Random(7)
for i in range(3000):
    d = {"_id": i, "k": r.randrange(500), "pad": "x" * r.randrange(100)}
    if i % 7 == 0:
        d["k"] = [r.randrange(500), r.randrange(500)]
    if i % 11 == 0:
        del d["k"]
    print(json.dumps(d))
PY
cat "$T/docs.jsonl" > "$C/.insert"

# MongoDB's order for this data: missing (null) first, arrays by their smallest element
# ascending, ties by _id.
expected_asc=$(jq -s -r 'map({id: ._id, key: (if .k == null then -1 elif (.k|type) == "array" then (.k|min) else .k end)})
	| sort_by(.key, .id) | .[].id' "$T/docs.jsonl" | tr '\n' ' ')
expected_desc=$(jq -s -r 'map({id: ._id, key: (if .k == null then -1 elif (.k|type) == "array" then (.k|max) else .k end)})
	| sort_by(-.key, .id) | .[].id' "$T/docs.jsonl" | tr '\n' ' ')

step "a sort over many spilled runs gives MongoDB's order"
expect_eq "$(jq -r ._id "$C/query/{}?sort={k: 1}" | tr '\n' ' ')" "$expected_asc" "sort k ascending"
expect_eq "$(jq -r ._id "$C/query/{}?sort={k: -1}" | tr '\n' ' ')" "$expected_desc" "sort k descending"

step "sort with skip and limit (top-k) agrees with the full sort"
expect_eq "$(jq -r ._id "$C/query/{}?sort={k: 1}&skip=100&limit=50" | tr '\n' ' ')" \
	"$(echo "$expected_asc" | tr ' ' '\n' | sed -n '101,150p' | tr '\n' ' ')" "skip 100 limit 50"

step "a result larger than result_mem is read back whole"
f="$C/query/{}?sort={_id: 1}"
expect_eq "$(jq -c . "$f" | md5sum)" "$(jq -c . "$T/docs.jsonl" | md5sum)" "large result content"
exec 3< "$f"
expect_eq "$(stat -L -c %s /dev/fd/3)" "$(wc -c < "$f")" "size of a spilled result"
# The limits are the mount's (they were once parsed and then ignored): the open result is
# an unlinked temporary file of the daemon, and a $group over 3,000 documents spills.
ls -l "/proc/$(daemon_pid)/fd" | grep -q '(deleted)' ||
	fail "no temporary file held by the daemon for a result over result_mem"
exec 3<&-
expect_eq "$(jq -c '.stages[] | select(has("$group")) | .usedDisk' \
	"$C/explain/"'[{$group: {_id: "$_id", n: {$sum: 1}}}]?verbosity=executionStats')" \
	"true" "usedDisk of a \$group past sort_mem"
echo ok
