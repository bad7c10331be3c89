#!/usr/bin/env bash
# aggregate.sh - pipelines through aggregate/ paths with real tools: shell-literal pipelines,
# %XX escapes, formats, saved pipelines (.queries/ and @name, checked when saved), $out
# writing a collection atomically, errors (EINVAL with the reason in /.docfs/errors),
# explain/ of a pipeline (the $cursor's index scan, counters, $out never run, @name),
# aggregate/ listing empty, and docfs aggregate using the same engine.
. "$(dirname "$0")/lib.sh"
mount_docfs
C=$MNT/shop/orders
mkdir -p "$C"
cat > "$C/.insert" <<'DOCS'
{"_id": 1, "city": "Beijing", "qty": 2, "price": 10.5, "at": {"$date": "2026-12-01T10:15:00Z"}}
{"_id": 2, "city": "Beijing", "qty": 1, "price": 4.0, "at": {"$date": "2026-12-01T10:15:30Z"}}
{"_id": 3, "city": "ShenZhen", "qty": 5, "price": 2.0, "at": {"$date": "2026-12-01T11:00:00Z"}}
{"_id": 4, "city": null, "qty": 1, "price": 1.0, "at": {"$date": "2026-12-02T09:00:00Z"}}
{"_id": 5, "qty": 3, "price": 3.0, "at": {"$date": "2026-12-02T09:30:00Z"}}
DOCS

step "a \$group pipeline in shell-literal syntax, JSON Lines out"
expect_eq "$(cat "$C/aggregate/[{\$group: {_id: '\$city', n: {\$sum: 1}, qty: {\$sum: '\$qty'}}}, {\$sort: {_id: 1}}]")" \
'{"_id": null, "n": 2, "qty": 4}
{"_id": "Beijing", "n": 2, "qty": 3}
{"_id": "ShenZhen", "n": 1, "qty": 5}' "group by city (null and missing together)"
expect_eq "$(cat "$C/aggregate/[{\$match: {qty: {\$gte: 2}}}, {\$project: {_id: 0, total: {\$multiply: ['\$qty', '\$price']}}}]")" \
'{"total": 21.0}
{"total": 10.0}
{"total": 9.0}' "match + project with an expression"
expect_eq "$(cat "$C/aggregate/[{\$group: {_id: {d: {\$dayOfMonth: '\$at'}, h: {\$hour: '\$at'}}, n: {\$sum: 1}}}, {\$sort: {n: -1, _id: 1}}, {\$limit: 1}]")" \
'{"_id": {"d": 1, "h": 10}, "n": 2}' "date parts in UTC"
expect_eq "$(cat "$C/aggregate/[{\$count: 'n'}]?format=json" | jq -c .)" '[{"n":5}]' "format=json"
expect_eq "$(ls -A "$C/aggregate" | wc -l)" "0" "aggregate/ lists empty"

step "saved pipelines: .queries/<name> and aggregate/@name"
echo '[{"$group": {"_id": null, "qty": {"$sum": "$qty"}}}]' > "$C/.queries/total"
expect_eq "$(cat "$C/aggregate/@total")" '{"_id": null, "qty": 12}' "saved pipeline"
echo '{"pipeline": [{"$match": {"_id": 3}}, {"$project": {"city": 1}}]}' > "$C/.queries/three"
expect_eq "$(cat "$C/aggregate/@three")" '{"_id": 3, "city": "ShenZhen"}' "saved as a command"
if /usr/bin/printf '%s' '[{"$grup": {}}]' > "$C/.queries/bad" 2>/dev/null; then
	fail "a bad saved pipeline was accepted"
fi
tail -n1 "$MNT/.docfs/errors" | grep -q 'grup' || fail "bad saved pipeline: $(tail -n1 "$MNT/.docfs/errors")"
if cat "$C/query/@total" > /dev/null 2>&1; then fail "query/@pipeline ran"; fi
tail -n1 "$MNT/.docfs/errors" | grep -q 'aggregate/@total' || fail "query/@pipeline message: $(tail -n1 "$MNT/.docfs/errors")"

step "\$out writes a collection at once; the result file is empty"
expect_eq "$(cat "$C/aggregate/[{\$group: {_id: '\$city', qty: {\$sum: '\$qty'}}}, {\$out: 'by_city'}]" | wc -c)" "0" "\$out result"
expect_eq "$(cat "$MNT/shop/by_city/query/{}?count=1")" "3" "\$out wrote 3 documents"
expect_eq "$(jq -c .qty "$MNT/shop/by_city/Beijing.json")" "3" "a \$out document as a file"

step "errors: EINVAL at open and the reason in /.docfs/errors"
for p in "[{\$grup: {}}]" "{\$match: {}}" "[{\$group: {n: 1}}]" "[{\$project: {a: '\$\$nope'}}]"; do
	if cat "$C/aggregate/$p" > /dev/null 2> "$T/err"; then fail "pipeline '$p' ran"; fi
	grep -q "Invalid argument" "$T/err" || fail "pipeline '$p': $(cat "$T/err")"
done
tail -n1 "$MNT/.docfs/errors" | grep -q "aggregate" || fail "message: $(tail -n1 "$MNT/.docfs/errors")"

step "explain/ of a pipeline: the \$match in the \$cursor stage uses an index"
echo '{key: {city: 1}}' > "$C/.indexes/city_1"
P="[{\$match: {city: 'Beijing'}}, {\$group: {_id: '\$city', n: {\$sum: 1}}}, {\$out: 'never'}]"
expect_eq "$(jq -r '.stages[0]["$cursor"].queryPlanner.winningPlan.inputStage.stage' "$C/explain/$P")" \
	"IXSCAN" "\$cursor plan"
expect_eq "$(jq -c '[.stages[] | keys_unsorted[0]]' "$C/explain/$P")" '["$cursor","$group","$out"]' \
	"stages"
expect_eq "$(jq -c '[.stages[0].nReturned, .stages[1].nReturned, .stages[0]["$cursor"].executionStats.totalKeysExamined]' \
	"$C/explain/$P?verbosity=executionStats")" '[2,1,2]' "executionStats per stage"
[ -e "$MNT/shop/never" ] && fail "explaining a \$out pipeline wrote its target"
expect_eq "$(cat "$C/explain/$P?format=tree")" '$out "never"
  $group {"_id": "$city", "n": {"$sum": 1}}
    $cursor
      FETCH
        IXSCAN city_1 {city: 1} city: ["Beijing", "Beijing"]' "format=tree"
P="[{\$match: {city: 'Beijing'}}, {\$count: 'n'}]"
expect_eq "$(jq -c '[.stages[0]["$cursor"].queryPlanner.winningPlan.stage, .stages[0]["$cursor"].executionStats.totalDocsExamined]' \
	"$C/explain/$P?verbosity=executionStats")" '["COUNT_SCAN",0]' "\$match + \$count counts index keys"
expect_eq "$(jq -r .n "$C/aggregate/$P")" "$(cat "$C/query/{city: 'Beijing'}?count=1")" "\$match + \$count"
echo '[{"$match": {"qty": {"$gt": 1}}}, {"$count": "n"}]' > "$C/.queries/big"
expect_eq "$(jq -c '[.stages[1]["$count"], .stages[1].nReturned]' "$C/explain/@big?verbosity=executionStats&format=json")" \
	'["n",1]' "explain/@saved pipeline"
echo '[{"$match": {"city": "Beijing"}}, {"$sort": {"qty": -1}}, {"$limit": 1}]' > "$C/.queries/top"
expect_eq "$(jq -c '.queryPlanner.winningPlan | [.stage, .limitAmount]' "$C/explain/@top")" '["SORT",1]' \
	"a pipeline the find runs whole: the find's explain"
expect_eq "$(jq -r .command.aggregate "$C/explain/@top")" "orders" "... with the aggregate command"
expect_eq "$(jq -r .queryPlanner.winningPlan.stage "$C/explain/{qty: 1}")" "COLLSCAN" "a find still explains"
for p in "[{\$grup: {}}]" "[{\$match: {}}]?limit=2" "[{\$match: {}}]?verbosity=all"; do
	if cat "$C/explain/$p" > /dev/null 2> "$T/err"; then fail "explain of '$p' worked"; fi
	grep -q "Invalid argument" "$T/err" || fail "explain '$p': $(cat "$T/err")"
done
tail -n1 "$MNT/.docfs/errors" | grep -q "explain '.*verbosity must be" ||
	fail "explain message: $(tail -n1 "$MNT/.docfs/errors")"
if cat "$C/explain/[{\$grup: {}}]" > /dev/null 2>&1; then fail "explain of \$grup worked"; fi
tail -n1 "$MNT/.docfs/errors" | grep -q "unrecognized pipeline stage name: '\$grup'" ||
	fail "explain message: $(tail -n1 "$MNT/.docfs/errors")"
expect_eq "$("$DOCFS" explain "$STORE" shop.orders "[{\$match: {city: 'Beijing'}}, {\$count: 'n'}]?format=json" |
	jq -r '.stages[0]["$cursor"].queryPlanner.winningPlan | [.stage, .indexName] | join(" ")')" "COUNT_SCAN city_1" "docfs explain of a pipeline"

step "docfs aggregate"
expect_eq "$("$DOCFS" aggregate "$STORE" shop.orders '[{$match: {city: "Beijing"}}, {$count: "n"}]')" '{"n": 2}' "docfs aggregate"
expect_eq "$("$DOCFS" aggregate "$STORE" shop.orders @total)" '{"_id": null, "qty": 12}' "docfs aggregate @name"
if "$DOCFS" aggregate "$STORE" shop.orders '[{$nope: 1}]' > /dev/null 2> "$T/err"; then
	fail "docfs aggregate of a bad pipeline exited 0"
fi
grep -q "docfs aggregate:" "$T/err" || fail "docfs aggregate error: $(cat "$T/err")"
echo "ok"
