#!/usr/bin/env bash
# stats.sh - .stats files: a collection's collStats and a database's dbStats as jq reads
# them, checked against what the mount lists and SQLite holds (count, BSON bytes, indexes),
# ?scale=N, a capped collection's limits, refreshed at every open, and the refusals.
. "$(dirname "$0")/lib.sh"
mount_docfs
C=$MNT/shop/items
mkdir -p "$C" "$MNT/shop/other"
for i in $(seq 1 40); do echo "{\"_id\": $i, \"name\": \"item $i\", \"qty\": $i}"; done > "$C/.insert"
echo '{"key": {"qty": 1}}' > "$C/.indexes/qty_1"
echo '{"x": 1}' > "$MNT/shop/other/a.json"

step "collStats"
S=$(cat "$C/.stats")
expect_eq "$(jq -r .ns <<< "$S")" "shop.items" "ns"
expect_eq "$(jq .count <<< "$S")" "$(ls "$C" | grep -c '\.json$')" "count is what ls lists"
bytes=$(sqlite3 "$STORE/shop.db" "SELECT sum(length(bson)) FROM docs d JOIN colls c ON d.coll = c.id WHERE c.name = 'items'")
expect_eq "$(jq .size <<< "$S")" "$bytes" "size is the BSON bytes SQLite holds"
expect_eq "$(jq '.avgObjSize == (.size / .count | floor)' <<< "$S")" "true" "avgObjSize"
expect_eq "$(jq -c '.indexSizes | keys' <<< "$S")" "$( (echo _id_; ls "$C/.indexes") | jq -R . | jq -sc 'sort')" "indexSizes names the indexes"
expect_eq "$(jq '.nindexes == (.indexSizes | length) and .totalIndexSize == ([.indexSizes[]] | add) and .totalSize == .size + .totalIndexSize and .capped == false and .ok == 1' <<< "$S")" "true" "totals"
expect_eq "$(jq '.size' "$C/.stats?scale=1024")" "$(( bytes / 1024 ))" "scale=1024"
expect_eq "$(jq '.scaleFactor' "$C/.stats?scale=2.9")" "2" "a fractional scale is truncated"
echo '{"_id": 99, "big": "'"$(head -c 5000 /dev/zero | tr '\0' x)"'"}' > "$C/99.json"
expect_eq "$(jq .count "$C/.stats")" "41" "read again at each open"
expect_fail "scale=0" cat "$C/.stats?scale=0"
tail -n1 "$MNT/.docfs/errors" | grep -q "scale must be a number >= 1" || fail "no clear error for scale=0"
expect_fail "an unknown option" cat "$C/.stats?bogus=1"
expect_fail "writing .stats" sh -c "echo '{}' > '$C/.stats'"
if ls -a "$C" | grep -qx .stats; then fail ".stats is listed: cp -r would copy figures"; fi
[ -e "$C/.stats" ] || fail ".stats is not there by name"

step "a capped collection shows its limits"
"$DOCFS" capped "$STORE" shop.log 8192 5 > /dev/null || fail "docfs capped"
expect_eq "$(jq -c '[.capped, .max, .maxSize]' "$MNT/shop/log/.stats")" '[true,5,8192]' "capped, max, maxSize"

step "dbStats"
D=$(cat "$MNT/shop/.stats")
expect_eq "$(jq -r .db <<< "$D")" "shop" "db"
expect_eq "$(jq .collections <<< "$D")" "$(ls "$MNT/shop" | wc -l)" "collections is what ls lists"
expect_eq "$(jq .objects <<< "$D")" "$(( $(jq .count "$C/.stats") + $(jq .count "$MNT/shop/other/.stats") + $(jq .count "$MNT/shop/log/.stats") ))" "objects add up"
expect_eq "$(jq .dataSize <<< "$D")" "$(( $(jq .size "$C/.stats") + $(jq .size "$MNT/shop/other/.stats") + $(jq .size "$MNT/shop/log/.stats") ))" "dataSize adds up"
expect_eq "$(jq .indexes <<< "$D")" "4" "indexes: _id_ of each collection and qty_1"
expect_eq "$(jq '.storageSize >= .dataSize and .fsTotalSize >= .fsUsedSize and .ok == 1' <<< "$D")" "true" "storage figures"
if ls -A "$MNT/shop" | grep -q stats; then fail "a database lists .stats: ls -A lists collections"; fi
expect_fail "mkdir .stats" mkdir "$MNT/shop/.stats"
echo "stats.sh: ok"
