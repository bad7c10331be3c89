#!/usr/bin/env bash
# index.sh - indexes and explain through the mount and the command line: .indexes/ files
# created by echo, cp, tee and docfs index, read back as spec + stats (entries, multikey),
# _id_ there by name (not listed), dropped by rm; bad specs, unique builds over duplicates, parallel
# arrays, rm _id_, a name that differs from the file name and editors' names all fail and
# leave nothing behind; queries return the same results with and without indexes; explain/
# shows COLLSCAN before and IXSCAN after, executionStats, format=tree, hint by name, key
# pattern and $natural, a bad hint; unique indexes refuse duplicates written through the
# mount and .insert; indexes survive a remount; the TTL sweeper (-o ttl_s=1) deletes expired
# documents and the mount stops showing them; a large build logs its progress.
. "$(dirname "$0")/lib.sh"
mount_docfs ttl_s=1

C=$MNT/shop/items
IX=$C/.indexes
ERRORS=$MNT/.docfs/errors

# listing DIR : the names in DIR on one line
listing() {
	ls -AU "$1" | tr '\n' ' '
}

# last_error : the newest line of /.docfs/errors
last_error() {
	tail -n 1 "$ERRORS"
}

# expect_errno WHAT TEXT command... : the command fails and its error output holds TEXT
expect_errno() {
	local what=$1 text=$2 out
	shift 2
	if out=$("$@" 2>&1); then
		fail "$what: succeeded but should have failed"
	fi
	case "$out" in
	*"$text"*) ;;
	*) fail "$what: expected '$text', got: $out" ;;
	esac
}

# stages FILE : the stages of the winning plan of an explain, outermost first
stages() {
	jq -r '[.queryPlanner.winningPlan | .. | objects | .stage? // empty] | join(" ")' "$1"
}

step "documents"
mkdir -p "$C"
cat > "$C/.insert" <<'DOCS'
{"_id": 1, "name": "lamp", "price": 12, "cat": "home", "tags": "light"}
{"_id": 2, "name": "desk", "price": 150, "cat": "home", "tags": "wood"}
{"_id": 3, "name": "pen", "price": 2, "cat": "office", "tags": "ink"}
{"_id": 4, "name": "chair", "price": 80, "cat": "home"}
{"_id": 5, "name": "ink", "price": 7.5, "cat": "office", "tags": "ink"}
{"_id": 6, "name": "mug", "price": {"$numberLong": "7"}, "cat": "kitchen", "tags": null}
{"_id": 7, "name": "pan", "price": 25, "cat": "kitchen", "tags": "steel"}
{"_id": 8, "name": "sofa", "cat": "home", "tags": "cloth"}
DOCS
expect_eq "$(ls "$C" | grep -c '\.json$')" "8" "documents"

step ".indexes/ lists nothing at first: _id_ is there by name (every collection has it)"
expect_eq "$(listing "$IX")" "" "ls .indexes"
expect_eq "$(jq -c .key "$IX/_id_")" '{"_id":1}' "_id_ key"
expect_eq "$(jq -r .name "$IX/_id_")" "_id_" "_id_ name"
expect_eq "$(jq .stats.entries "$IX/_id_")" "8" "_id_ entries"

# The queries compared with and without indexes, and their results before any index.
QUERIES=(
	'{price: {$gt: 10}}'
	'{price: {$gte: 7, $lte: 25}}?sort={price: -1}'
	'{cat: "home"}?sort={price: 1}&projection={name: 1, _id: 0}'
	'{cat: {$in: ["home", "kitchen"]}, price: {$lt: 100}}'
	'{name: {$regex: "^p"}}'
	'{tags: "ink"}'
	'{tags: null}'
	'{price: {$exists: false}}'
	'{}?sort={cat: 1, price: -1}&skip=2&limit=3'
	'{$or: [{cat: "office"}, {price: {$gt: 100}}]}'
)
results() {
	local i=0 q
	for q in "${QUERIES[@]}"; do
		cat "$C/query/$q" > "$T/r.$1.$i" || fail "query '$q' ($1)"
		i=$((i + 1))
	done
}
results noindex

step "explain before any index: a collection scan"
cat "$C/explain/{price: {\$gt: 10}}" > "$T/x" || fail "explain"
expect_eq "$(stages "$T/x")" "COLLSCAN" "winning plan without an index"
expect_eq "$(jq -r .queryPlanner.namespace "$T/x")" "shop.items" "namespace"

step "create indexes by echo, cp, tee and docfs index"
echo '{"key": {"price": 1}}' > "$IX/price_1"
echo '{key: {cat: 1, price: -1}}' > "$T/spec.json"
cp "$T/spec.json" "$IX/by_cat"
echo "{key: {name: 1}, unique: true}" | tee "$IX/name_u" > /dev/null
expect_eq "$("$DOCFS" index "$STORE" shop.items create '{tags: 1}')" "tags_1" "docfs index create prints the name"
expect_eq "$(listing "$IX")" "price_1 by_cat name_u tags_1 " "ls .indexes: by creation"
expect_eq "$(jq -c .key "$IX/price_1")" '{"price":1}' "price_1 key"
expect_eq "$(jq -r .name "$IX/price_1")" "price_1" "price_1 name"
expect_eq "$(jq -c .key "$IX/by_cat")" '{"cat":1,"price":-1}' "by_cat key"
expect_eq "$(jq -r .name "$IX/by_cat")" "by_cat" "the file name is the index name"
expect_eq "$(jq -r .unique "$IX/name_u")" "true" "name_u unique"
for ix in price_1 by_cat name_u tags_1; do
	expect_eq "$(jq .stats.entries "$IX/$ix")" "8" "$ix entries = documents"
	expect_eq "$(jq .stats.multikey "$IX/$ix")" "false" "$ix multikey"
done
jq -e '.stats.bytes > 0 and .stats.buildMillis >= 0 and (.stats.created."$date" | type == "string")' \
	"$IX/price_1" > /dev/null || fail "price_1 stats: $(jq -c .stats "$IX/price_1")"

step "an index file is exact and fresh: size after open, never a cached old version"
exec 3< "$IX/price_1"
size=$(stat -L -c %s /dev/fd/3)
body=$(cat <&3)
exec 3<&-
expect_eq "$size" "$(( ${#body} + 1 ))" "size of an open index file"
echo '{"_id": 9, "name": "rack", "price": 40, "cat": "home", "tags": ["metal", "wood"]}' > "$C/9.json"
expect_eq "$(jq .stats.entries "$IX/price_1")" "9" "price_1 entries after an insert"
expect_eq "$(jq .stats.entries "$IX/tags_1")" "10" "tags_1 entries: one per array element"
expect_eq "$(jq .stats.multikey "$IX/tags_1")" "true" "tags_1 multikey after inserting an array"
expect_eq "$(jq .stats.multikey "$IX/price_1")" "false" "price_1 stays not multikey"

step "queries return the same results with indexes"
rm "$C/9.json"
results indexed
for i in "${!QUERIES[@]}"; do
	# The order of results without a sort is not fixed: compare them sorted.
	expect_eq "$(sort "$T/r.indexed.$i")" "$(sort "$T/r.noindex.$i")" "query '${QUERIES[$i]}' with indexes"
	case "${QUERIES[$i]}" in
	*sort=*) cmp -s "$T/r.indexed.$i" "$T/r.noindex.$i" || fail "sorted query '${QUERIES[$i]}' order" ;;
	esac
done

step "explain after: an index scan; executionStats; format=tree"
q='{price: {$gt: 10}}'
cat "$C/explain/$q" > "$T/x" || fail "explain"
case " $(stages "$T/x") " in
*" IXSCAN "*) ;;
*) fail "winning plan with price_1: $(stages "$T/x")" ;;
esac
expect_eq "$(jq -r '[.queryPlanner.winningPlan | .. | objects | select(.stage? == "IXSCAN") | .indexName] | first' "$T/x")" \
	"price_1" "the index of the winning plan"
jq -e 'has("executionStats") | not' "$T/x" > /dev/null || fail "queryPlanner verbosity ran the plan"
cat "$C/explain/$q?verbosity=executionStats" > "$T/x" || fail "explain executionStats"
expect_eq "$(jq .executionStats.nReturned "$T/x")" "$(cat "$C/query/$q" | wc -l)" "nReturned = wc -l of the query"
expect_eq "$(jq .executionStats.executionSuccess "$T/x")" "true" "executionSuccess"
jq -e '.executionStats.totalKeysExamined >= 4 and .executionStats.totalDocsExamined >= 4' "$T/x" > /dev/null ||
	fail "keys and documents examined: $(jq -c '.executionStats | del(.executionStages, .allPlansExecution)' "$T/x")"
cat "$C/explain/$q?verbosity=allPlansExecution" | jq -e '.executionStats.allPlansExecution | type == "array"' > /dev/null ||
	fail "allPlansExecution"
cat "$C/explain/$q?format=json" > "$T/x1" || fail "format=json"
expect_eq "$(wc -l < "$T/x1")" "1" "format=json is one line"
expect_eq "$(jq -c .queryPlanner.winningPlan "$T/x1")" "$(jq -c .queryPlanner.winningPlan "$T/x")" "format=json plan"
cat "$C/explain/$q?format=tree" > "$T/tree" || fail "format=tree"
grep -q "IXSCAN" "$T/tree" || fail "format=tree has no IXSCAN: $(cat "$T/tree")"
grep -q "FETCH" "$T/tree" || fail "format=tree has no FETCH: $(cat "$T/tree")"
jq . "$T/tree" > /dev/null 2>&1 && fail "format=tree is JSON"
exec 3< "$C/explain/$q"
size=$(stat -L -c %s /dev/fd/3)
body=$(cat <&3)
exec 3<&-
expect_eq "$size" "$(( ${#body} + 1 ))" "size of an open explain"
expect_eq "$(ls -A "$C/explain" | wc -l)" "0" "explain/ lists empty"

step "hint by name, by key pattern, \$natural; a bad hint fails"
q='{cat: "home", price: {$gt: 10}}'
cat "$C/explain/$q?hint=by_cat" > "$T/x" || fail "hint=by_cat"
expect_eq "$(jq -r '[.queryPlanner.winningPlan | .. | objects | select(.stage? == "IXSCAN") | .indexName] | first' "$T/x")" \
	"by_cat" "hint by name"
cat "$C/explain/$q?hint={price: 1}" > "$T/x" || fail "hint={price: 1}"
expect_eq "$(jq -r '[.queryPlanner.winningPlan | .. | objects | select(.stage? == "IXSCAN") | .indexName] | first' "$T/x")" \
	"price_1" "hint by key pattern"
cat "$C/explain/$q?hint={\$natural: 1}" > "$T/x" || fail "hint=\$natural"
expect_eq "$(stages "$T/x")" "COLLSCAN" "hint \$natural"
expect_eq "$(cat "$C/query/$q?hint=by_cat" | sort)" "$(cat "$C/query/$q?hint={\$natural: 1}" | sort)" \
	"the same results whatever the hint"
expect_errno "hint of a missing index" "Invalid argument" cat "$C/query/$q?hint=nosuch"
last_error | grep -q "nosuch" || fail "bad hint message: $(last_error)"
expect_errno "hint of a missing key pattern" "Invalid argument" cat "$C/explain/$q?hint={nosuch: 1}"
expect_errno "verbosity on query/" "Invalid argument" cat "$C/query/$q?verbosity=executionStats"
expect_errno "a bad verbosity" "Invalid argument" cat "$C/explain/$q?verbosity=loud"
expect_errno "distinct on explain/" "Invalid argument" cat "$C/explain/$q?distinct=cat"
expect_eq "$(jq -c '[.queryPlanner.winningPlan.stage, .command.count]' "$C/explain/$q?count=1")" \
	'["COUNT","items"]' "explain of a count"
expect_eq "$(jq -r .executionStats.executionStages.nCounted "$C/explain/$q?count=1&verbosity=executionStats")" \
	"$(cat "$C/query/$q?count=1")" "nCounted is the count"
expect_errno "explain results are read-only" "Operation not permitted" cp "$T/spec.json" "$C/explain/{}"
echo '{"filter": {"cat": "home"}, "sort": {"price": 1}, "hint": "price_1"}' > "$C/.queries/homes"
cat "$C/explain/@homes" > "$T/x" || fail "explain/@homes"
expect_eq "$(jq -r '[.queryPlanner.winningPlan | .. | objects | select(.stage? == "IXSCAN") | .indexName] | first' "$T/x")" \
	"price_1" "a saved query's hint"
expect_eq "$(cat "$C/query/@homes" | jq -c ._id | tr '\n' ' ')" "8 1 4 2 " "query/@homes (missing sorts first)"
rm "$C/.queries/homes"

step "hashed, sparse and partial indexes: entries, plans, the same results"
K=$MNT/shop/kinds
mkdir "$K"
cat > "$K/.insert" <<'DOCS'
{"_id": 1, "h": "a", "s": 1, "p": 5}
{"_id": 2, "h": "b", "p": 50}
{"_id": 3, "h": "a", "s": null}
{"_id": 4, "h": 4, "p": 70}
{"_id": 5, "h": 4.0, "s": [2, 3], "p": 15}
DOCS
KQ=('{h: "a"}' '{h: 4}' '{s: {$gte: 1}}' '{s: null}' '{p: {$gt: 20}}' '{p: {$gt: 1}}' '{p: {$gt: 12}, h: 4}')
for i in "${!KQ[@]}"; do cat "$K/query/${KQ[$i]}" | sort > "$T/k.before.$i"; done
echo '{key: {h: "hashed"}}' > "$K/.indexes/h_hashed"
echo '{key: {s: 1}, sparse: true}' > "$K/.indexes/s_sparse"
echo '{key: {p: 1}, partialFilterExpression: {p: {$gt: 10}}}' > "$K/.indexes/p_part"
expect_eq "$(listing "$K/.indexes")" "h_hashed s_sparse p_part " "ls .indexes of shop.kinds"
expect_eq "$(jq .stats.entries "$K/.indexes/h_hashed")" "5" "hashed entries"
expect_eq "$(jq .stats.entries "$K/.indexes/s_sparse")" "4" "sparse entries (no document without s; one per element)"
expect_eq "$(jq .stats.entries "$K/.indexes/p_part")" "3" "partial entries (p > 10 only)"
expect_eq "$(jq -c .partialFilterExpression "$K/.indexes/p_part")" '{"p":{"$gt":10}}' "partial filter shown"
for i in "${!KQ[@]}"; do
	expect_eq "$(cat "$K/query/${KQ[$i]}" | sort)" "$(cat "$T/k.before.$i")" "query '${KQ[$i]}' with indexes"
done
cat "$K/explain/{h: 4}?format=tree" > "$T/tree" || fail "explain {h: 4}"
grep -q "IXSCAN h_hashed" "$T/tree" || fail "hashed equality does not use h_hashed: $(cat "$T/tree")"
cat "$K/explain/{p: {\$gt: 20}}?format=tree" > "$T/tree" || fail "explain {p: {\$gt: 20}}"
grep -q "IXSCAN p_part" "$T/tree" || fail "a filter within the partial filter does not use p_part: $(cat "$T/tree")"
cat "$K/explain/{p: {\$gt: 1}}?format=tree" > "$T/tree" || fail "explain {p: {\$gt: 1}}"
grep -q "p_part" "$T/tree" && fail "a filter wider than the partial filter uses p_part: $(cat "$T/tree")"

step "bad index files fail at close and leave nothing behind"
before=$(listing "$IX")
n0=$(wc -l < "$ERRORS")
echo '{key: {price: "up"}}' > "$T/bad"
expect_errno "a bad key pattern" "Invalid argument" cp "$T/bad" "$IX/bad"
expect_eq "$(listing "$IX")" "$before" "ls .indexes after a bad key pattern"
echo '{key: {price: 1}, colour: "red"}' > "$T/bad"
expect_errno "an unknown option" "Invalid argument" cp "$T/bad" "$IX/bad"
expect_errno "not JSON" "Invalid argument" sh -c "/bin/echo '{key: ' > '$IX/bad'"
echo '{key: {cat: 1}, unique: true}' > "$T/bad"
expect_errno "a unique index over duplicates" "File exists" cp "$T/bad" "$IX/cat_u"
last_error | grep -q 'home' || fail "the duplicate key is not in the message: $(last_error)"
expect_eq "$(listing "$IX")" "$before" "ls .indexes after a failed unique build"
echo '{"_id": 20, "tags": ["a", "b"], "sizes": [1, 2]}' > "$C/20.json"
echo '{key: {tags: 1, sizes: 1}}' > "$T/bad"
expect_errno "two array fields" "Invalid argument" cp "$T/bad" "$IX/tags_sizes"
last_error | grep -q 'parallel arrays' || fail "parallel arrays message: $(last_error)"
rm "$C/20.json"
echo '{key: {price: 1}, name: "other"}' > "$T/bad"
expect_errno "a name that differs from the file name" "Invalid argument" cp "$T/bad" "$IX/mine"
last_error | grep -q "'other'" || fail "name mismatch message: $(last_error)"
# A hidden name (rsync's ".by_cat.XXXXXX", vim's swap file) is a temporary file, not an index.
cp "$T/spec.json" "$IX/.by_cat.swp" || fail "a temporary file in .indexes/"
cmp -s "$T/spec.json" "$IX/.by_cat.swp" || fail "the temporary file's bytes"
"$DOCFS" index "$STORE" shop.items list | grep -q by_cat.swp && fail "a temporary file became an index"
rm "$IX/.by_cat.swp" || fail "rm of a temporary file in .indexes/"
expect_errno "vim's 4913 probe" "Invalid argument" sh -c "echo > '$IX/4913'"
expect_errno "a backup name" "Invalid argument" cp "$T/spec.json" "$IX/by_cat~"
expect_errno "mkdir in .indexes" "Invalid argument" mkdir "$IX/d"
expect_errno "rename an index" "Operation not permitted" mv "$IX/by_cat" "$IX/by_cat2"
expect_errno "rm _id_" "Operation not permitted" rm "$IX/_id_"
expect_errno "the same name, another definition" "File exists" cp "$T/spec.json" "$IX/price_1"
expect_eq "$(listing "$IX")" "$before" "ls .indexes after the failures"
[ "$(wc -l < "$ERRORS")" -gt "$n0" ] || fail "no messages in /.docfs/errors"
"$DOCFS" check "$STORE" > /dev/null || fail "docfs check after the failures"

step "writing an index file back is idempotent: cat, rm, cp recreates the same index"
cp "$IX/by_cat" "$T/by_cat.json"
cp "$T/by_cat.json" "$IX/by_cat" || fail "writing the same spec again"
rm "$IX/by_cat"
expect_errno "cat of a dropped index" "No such file" cat "$IX/by_cat"
cp "$T/by_cat.json" "$IX/by_cat" || fail "recreating by_cat from what it showed"
expect_eq "$(jq -c 'del(.stats)' "$IX/by_cat")" "$(jq -c 'del(.stats)' "$T/by_cat.json")" "recreated spec"
expect_eq "$(listing "$IX")" "price_1 name_u tags_1 by_cat " "ls after recreating by_cat"

step "unique indexes refuse duplicates written through the mount"
cp "$C/1.json" "$T/1.before"
expect_errno "a new document with a taken name" "File exists" sh -c "/bin/echo '{\"name\": \"desk\"}' > '$C/30.json'"
last_error | grep -q 'desk' || fail "duplicate message: $(last_error)"
# The name of a refused new document goes away when its file is released, which the kernel
# does just after close returns.
for _ in $(seq 1 20); do
	[ -e "$C/30.json" ] || break
	sleep 0.1
done
[ ! -e "$C/30.json" ] || fail "30.json exists after the refused write"
expect_errno "changing a document to a taken name" "File exists" sh -c "/bin/echo '{\"name\": \"pen\"}' > '$C/1.json'"
cmp -s "$C/1.json" "$T/1.before" || fail "1.json changed: $(cat "$C/1.json")"
expect_errno ".insert stops at the duplicate" "File exists" \
	sh -c "printf '%s\n' '{\"_id\": 31, \"name\": \"stool\"}' '{\"_id\": 32, \"name\": \"mug\"}' '{\"_id\": 33, \"name\": \"vase\"}' | cat > '$C/.insert'"
[ -e "$C/31.json" ] || fail "the document before the duplicate was not kept"
[ ! -e "$C/32.json" ] || fail "the duplicate was inserted"
[ ! -e "$C/33.json" ] || fail "a document after the duplicate was inserted"
rm "$C/31.json"
expect_eq "$(ls "$C" | grep -c '\.json$')" "8" "documents after the refused writes"

step "docfs index list, drop and errors; docfs explain"
"$DOCFS" index "$STORE" shop.items list > "$T/list" || fail "docfs index list"
expect_eq "$(jq -r .name "$T/list" | tr '\n' ' ')" "_id_ price_1 name_u tags_1 by_cat " "docfs index list names"
expect_eq "$(jq -c .stats.entries "$T/list" | sort -u)" "8" "docfs index list entries"
"$DOCFS" index "$STORE" shop.items create '{key: {cat: 1}, sparse: true}' --name cat_sparse > /dev/null ||
	fail "docfs index create --name"
expect_eq "$(jq .sparse "$IX/cat_sparse")" "true" "cat_sparse through the mount"
"$DOCFS" index "$STORE" shop.items drop cat_sparse || fail "docfs index drop"
[ ! -e "$IX/cat_sparse" ] || fail "cat_sparse still in the mount after docfs index drop"
for args in "shop.items drop _id_" "shop.items drop nosuch" "shop.items create {price:'x'}" \
	"shop.items create {key:{a:1},name:'n'} --name m" "shop.items frob" "shop.nosuch list" "shop.items"; do
	rc=0
	# shellcheck disable=SC2086
	"$DOCFS" index "$STORE" $args > "$T/out" 2> "$T/err" || rc=$?
	expect_eq "$rc" "1" "docfs index $args: exit status"
	[ -s "$T/err" ] || fail "docfs index $args: no message"
	[ ! -s "$T/out" ] || fail "docfs index $args: wrote to stdout"
done
grep -qE '^  index ' <<<"$("$DOCFS" --help)" || fail "--help does not list index"
grep -qE '^  explain ' <<<"$("$DOCFS" --help)" || fail "--help does not list explain"
grep -q 'ttl_s=' <<<"$("$DOCFS" --help)" || fail "--help does not document ttl_s"
"$DOCFS" explain "$STORE" shop.items '{price: {$gt: 10}}?verbosity=executionStats' > "$T/x" || fail "docfs explain"
expect_eq "$(jq .executionStats.nReturned "$T/x")" "$(cat "$C/query/{price: {\$gt: 10}}" | wc -l)" "docfs explain nReturned"
rc=0
"$DOCFS" explain "$STORE" shop.items '{price: {$bad: 1}}' > /dev/null 2>&1 || rc=$?
expect_eq "$rc" "1" "docfs explain of a bad filter"

step "indexes survive a remount"
for ix in _id_ price_1 name_u tags_1 by_cat; do cat "$IX/$ix"; done > "$T/before"
unmount_docfs
mount_docfs ttl_s=1
expect_eq "$(listing "$IX")" "price_1 name_u tags_1 by_cat " "ls .indexes after the remount"
for ix in _id_ price_1 name_u tags_1 by_cat; do cat "$IX/$ix"; done > "$T/after"
cmp -s "$T/before" "$T/after" || fail "index files differ after the remount: $(diff "$T/before" "$T/after" | head -n 5)"
case " $(cat "$C/explain/{price: {\$gt: 10}}" > "$T/x" && stages "$T/x") " in
*" IXSCAN "*) ;;
*) fail "no index scan after the remount" ;;
esac
"$DOCFS" check "$STORE" > /dev/null || fail "docfs check"

step "indexed queries see every write, here and by another mount (the document cache)"
# A repeated indexed query fetches its documents from the daemon's document cache
# (store/dcache.c); every write, through this mount or by another process, must show.
QI='{price: {$gte: 80}}?sort={price: 1}&projection={name: 1, price: 1}'
case " $(cat "$C/explain/$QI" > "$T/x" && stages "$T/x") " in
*" FETCH "*"IXSCAN "*) ;;
*) fail "'$QI' does not fetch over an index scan: $(stages "$T/x")" ;;
esac
want='{"_id":4,"name":"chair","price":80} {"_id":2,"name":"desk","price":150}'
expect_eq "$(jq -c . "$C/query/$QI" | tr '\n' ' ')" "$want " "indexed query, first run"
expect_eq "$(jq -c . "$C/query/$QI" | tr '\n' ' ')" "$want " "indexed query, from the cache"
# Without a projection a result copies each document's rendering from the cache, kept
# there by the first run (dcache.c note 5): byte for byte the unindexed plan's rendering.
QT='{price: {$gte: 10}}'
same_as_unindexed() { # WHAT: the indexed and unindexed results of QT hold the same lines
	local f
	for f in "" "?format=json"; do # (a JSON array's commas follow the order: cut off)
		sed 's/},$/}/' "$C/query/$QT$f" | sort > "$T/ix"
		sed 's/},$/}/' "$C/query/$QT${f:-?}${f:+&}hint={\$natural: 1}" | sort > "$T/nat"
		[ -s "$T/ix" ] || fail "no result for $QT$f ($1)"
		cmp -s "$T/ix" "$T/nat" || fail "$QT$f differs from its unindexed plan ($1): $(diff "$T/ix" "$T/nat" | head -n 4)"
	done
	# the JSON array holds the JSON Lines in their order, commas between
	{ printf '[\n'; sed '$!s/$/,/' "$C/query/$QT"; printf ']\n'; } > "$T/arr"
	cmp -s "$T/arr" "$C/query/$QT?format=json" ||
		fail "$QT?format=json is not the array of its JSON Lines ($1): $(diff "$T/arr" "$C/query/$QT?format=json" | head -n 4)"
}
same_as_unindexed "first run"
same_as_unindexed "from the cache"
sed -i 's/"desk"/"big desk"/' "$C/2.json"
expect_eq "$(jq -c . "$C/query/$QI" | tr '\n' ' ')" '{"_id":4,"name":"chair","price":80} {"_id":2,"name":"big desk","price":150} ' "after sed -i here"
same_as_unindexed "after sed -i here"
grep -q '"big desk"' "$C/query/$QT" || fail "$QT does not show the sed -i"
M2=$T/mnt2
mkdir -p "$M2"
trap 'rc=$?; fusermount3 -u "$M2" 2>/dev/null || true; cleanup $rc' EXIT
"$DOCFS" mount -o "log=$T/log2${MOUNT_OPTS:+,$MOUNT_OPTS}" "$STORE" "$M2"
jq -c '.name = "chair2"' "$M2/shop/items/4.json" > "$T/4.json" && cp "$T/4.json" "$M2/shop/items/4.json"
rm "$M2/shop/items/2.json"
fusermount3 -u "$M2"
expect_eq "$(jq -c . "$C/query/$QI" | tr '\n' ' ')" '{"_id":4,"name":"chair2","price":80} ' "after writes by the other mount"
same_as_unindexed "after writes by the other mount"
grep -q '"chair2"' "$C/query/$QT" || fail "$QT does not show the other mount's write"
! grep -q '"big desk"' "$C/query/$QT" || fail "$QT still shows the document the other mount removed"
expect_eq "$("$DOCFS" mount -o doc_cache=-1 "$STORE" "$M2" 2>&1 || true)" "docfs mount: doc_cache needs a number of bytes (0: no document cache)" "a bad doc_cache"

step "TTL: expired documents vanish from the mount within a few seconds, newer ones stay"
E=$MNT/shop/events
mkdir "$E"
ls "$E" > /dev/null # cached by the kernel before the sweep
echo '{key: {at: 1}, expireAfterSeconds: 60}' > "$E/.indexes/at_1"
old=$(date -u -d '-1 hour' +%Y-%m-%dT%H:%M:%S.000Z)
recent=$(date -u -d '-10 seconds' +%Y-%m-%dT%H:%M:%S.000Z)
{
	printf '{"_id": "old%d", "at": {"$date": "%s"}}\n' 1 "$old" 2 "$old" 3 "$old"
	printf '{"_id": "recent", "at": {"$date": "%s"}}\n' "$recent"
	printf '{"_id": "future", "at": {"$date": "2099-01-01T00:00:00.000Z"}}\n'
	printf '{"_id": "notadate", "at": "2000-01-01"}\n'
	printf '{"_id": "oldarray", "at": [{"$date": "2099-01-01T00:00:00.000Z"}, {"$date": "%s"}]}\n' "$old"
} > "$E/.insert"
cat "$E/old1.json" > /dev/null 2>&1 || true # cached by the kernel, unless swept already
for _ in $(seq 1 300); do
	[ "$(ls "$E" | grep -c '\.json$')" = 3 ] && break
	sleep 0.1
done
expect_eq "$(ls "$E" | grep '\.json$' | sort | tr '\n' ' ')" "future.json notadate.json recent.json " \
	"documents left after the TTL sweep"
[ ! -e "$E/old1.json" ] || fail "old1.json still there"
expect_errno "cat of an expired document" "No such file" cat "$E/old1.json"
grep -q "ttl: deleted" "$T/log" || fail "no TTL line in the log"

step "a large build logs its progress"
"$DOCFS" generate '{"n": {"$inc": {"start": 0}}, "g": {"$number": [0, 100]}}' -n 150000 |
	"$DOCFS" import "$STORE" shop.big 2> /dev/null || fail "import of 150,000 documents"
echo '{key: {g: 1}}' > "$MNT/shop/big/.indexes/g_1"
expect_eq "$(jq .stats.entries "$MNT/shop/big/.indexes/g_1")" "150000" "g_1 entries"
grep -qE "index 'g_1' of shop.big: 1[0-9]{5} of 150000 documents indexed" "$T/log" ||
	fail "no progress line in the log: $(grep "g_1" "$T/log")"
grep -q "index 'g_1' of shop.big: built" "$T/log" || fail "no 'built' line in the log"
"$DOCFS" check "$STORE" > /dev/null || fail "docfs check at the end"
echo ok
