#!/usr/bin/env bash
# examples/nginx-logs/walkthrough.sh - web-server analytics on a docfs mount: generate an
# nginx access log, load it as one event document per request, report on it with aggregate/
# pipelines, and keep the pre-aggregated design (one document per resource per day, counted
# with $inc upserts through .bulk). Uses a throwaway store.
# Usage: examples/nginx-logs/walkthrough.sh [path/to/docfs] [N lines, default 20000]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DOCFS=${1:-$HERE/../../build/docfs}
N=${2:-20000}
W=$(mktemp -d)
mkdir -p "$W/store" "$W/mnt"
trap 'cd /; fusermount3 -u "$W/mnt" 2>/dev/null || fusermount3 -uz "$W/mnt" 2>/dev/null; mountpoint -q "$W/mnt" || rm -rf "$W"' EXIT
python3 "$HERE/gen-access-log.py" "$N" 1 > "$W/access.log"
"$DOCFS" mount "$W/store" "$W/mnt"
cd "$W/mnt"
export HERE W
run() { echo; echo "\$ $*"; bash -c "$*" || echo "(exit status $?)"; }

echo "== the log ($N requests)"
run 'head -n 3 "$W/access.log"'

echo; echo "== events: one document per request"
run 'mkdir -p web/events && awk -f "$HERE/log2events.awk" "$W/access.log" > web/events/.insert && ls web/events | grep -c json'
run 'cat "web/events/query/{}?limit=1&projection={_id: 0}"'
run 'echo "{\"key\": {\"time\": 1}}" > web/events/.indexes/time_1'

echo; echo "== requests per minute: the five busiest minutes"
cat > web/events/.queries/per_minute <<'PIPE'
[{"$group": {"_id": {"year": {"$year": "$time"}, "month": {"$month": "$time"},
                     "day": {"$dayOfMonth": "$time"}, "hour": {"$hour": "$time"},
                     "minute": {"$minute": "$time"}},
             "requests": {"$sum": 1}}},
 {"$sort": {"requests": -1, "_id": 1}},
 {"$limit": 5}]
PIPE
run 'cat web/events/aggregate/@per_minute'

echo; echo "== throughput per resource: requests, requests per second, mean time, bytes"
cat > web/events/.queries/throughput <<'PIPE'
[{"$group": {"_id": "$resource", "requests": {"$sum": 1},
             "time": {"$sum": "$request_time"}, "bytes": {"$sum": "$request_length"}}},
 {"$project": {"requests": 1, "bytes": 1,
               "per_second": {"$divide": ["$requests", 86400]},
               "mean_ms": {"$multiply": [{"$divide": ["$time", "$requests"]}, 1000]}}},
 {"$sort": {"requests": -1}}]
PIPE
run 'cat web/events/aggregate/@throughput'

echo; echo "== server errors by resource (a leading \$match goes through the planner)"
run "cat 'web/events/aggregate/[{\$match: {status: {\$gte: 500}}}, {\$sortByCount: \"\$resource\"}]'"

echo; echo "== the pre-aggregated design: one document per resource per day, \$inc upserts"
run 'mkdir web/daily && awk -f "$HERE/log2upserts.awk" "$W/access.log" > "$W/ops.jsonl" && wc -l < "$W/ops.jsonl"'
run 'exec 3<>"web/daily/.bulk?atomic=true"; cat "$W/ops.jsonl" >&3; jq -c "{matchedCount, modifiedCount, upsertedCount}" <&3'
run "cat 'web/daily/query/{resource: \"%2Fapi%2Fitems\"}?projection={_id: 0, resource: 1, day: 1, daily: 1}'"
run "cat 'web/daily/query/{resource: \"%2Fapi%2Fitems\"}' | jq -c '.minute | to_entries | max_by(.value)'"
run "cat 'web/daily/aggregate/[{\$group: {_id: null, requests: {\$sum: \"\$daily\"}}}]'"
echo; echo "(the events and the daily documents agree: both count $N requests)"
