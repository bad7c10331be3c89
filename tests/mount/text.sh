#!/usr/bin/env bash
# text.sh - text indexes and $text through the mount: a text index created by writing
# .indexes/<name> (shown as MongoDB stores it), the manual's $text examples as query/ paths
# with {$meta: "textScore"} in the projection and the sort (the manual's scores checked
# with jq), explain's TEXT_MATCH / TEXT_OR / IXSCAN shape, $text under $or (FETCH over OR),
# entries kept by writes (docfs check), a bad $text failing with EINVAL and its message in
# /.docfs/errors, {$meta: "textScore"} in aggregation stages after the $text $match, and
# stop words following each document's language (language_override).
. "$(dirname "$0")/lib.sh"
mount_docfs
C=$MNT/shop/articles
mkdir -p "$C" "$MNT/shop/other"
cat > "$C/.insert" <<'DOCS'
{"_id": 1, "subject": "coffee", "author": "xyz", "views": 50}
{"_id": 2, "subject": "Coffee Shopping", "author": "efg", "views": 5}
{"_id": 3, "subject": "Baking a cake", "author": "abc", "views": 90}
{"_id": 4, "subject": "baking", "author": "xyz", "views": 100}
{"_id": 5, "subject": "Café Con Leche", "author": "abc", "views": 200}
{"_id": 6, "subject": "Сырники", "author": "jkl", "views": 80}
{"_id": 7, "subject": "coffee and cream", "author": "efg", "views": 10}
{"_id": 8, "subject": "Cafe con Leche", "author": "xyz", "views": 10}
DOCS

step "a text index from .indexes/<name>"
echo '{"key": {"subject": "text"}}' > "$C/.indexes/subject_text"
expect_eq "$(jq -c '[.key, .weights, .default_language, .language_override, .textIndexVersion]' "$C/.indexes/subject_text")" \
	'[{"_fts":"text","_ftsx":1},{"subject":1},"english","language",3]' "the spec as MongoDB shows it"
T=$(mktemp -d)
echo '{"key": {"author": "text"}}' > "$T/spec"
expect_fail "a second text index" cp "$T/spec" "$C/.indexes/author_text"
rm -rf "$T"
tail -n1 "$MNT/.docfs/errors" | grep -q "only one text index per collection allowed" || fail "no clear error for a second text index"

ids() { jq -s -c '[.[]._id]' "$C/query/$1"; }

step "the manual's \$text examples"
expect_eq "$(ids '{$text:{$search:"coffee"}}')" '[1,2,7]' "coffee"
expect_eq "$(ids '{$text:{$search:"bake coffee cake"}}')" '[1,2,3,4,7]' "bake coffee cake"
expect_eq "$(ids '{$text:{$search:"\"coffee shop\""}}')" '[2]' '"coffee shop"'
expect_eq "$(ids '{$text:{$search:"coffee -shop"}}')" '[1,7]' "coffee -shop"
expect_eq "$(ids '{$text:{$search:"leche",$language:"es"}}')" '[5,8]' "leche in Spanish"

step "textScore in projection and sort"
Q='{$text:{$search:"coffee"}}?projection={score:{$meta:"textScore"}}&sort={score:{$meta:"textScore"}}'
R=$(cat "$C/query/$Q")
expect_eq "$(jq -s -c '[.[]._id]' <<< "$R")" '[1,2,7]' "sorted by score, highest first (ties by _id)"
expect_eq "$(jq -s -c '[.[].score]' <<< "$R")" '[1,0.75,0.75]' "MongoDB's scores (stem 'coffe' is not the raw 'coffee': no 1.1)"
expect_eq "$(jq -s -c '.[0] | keys_unsorted' <<< "$R")" '["_id","subject","author","views","score"]' "score appended"

step "explain"
E=$(cat "$C/explain/{\$text:{\$search:\"coffee -shop\"}}?verbosity=executionStats")
expect_eq "$(jq -r '[.queryPlanner.winningPlan | .. | objects | .stage? // empty] | join(" ")' <<< "$E")" "TEXT_MATCH TEXT_OR IXSCAN" "the stages"
expect_eq "$(jq -c '.queryPlanner.winningPlan.parsedTextQuery' <<< "$E")" '{"terms":["coffe"],"negatedTerms":["shop"],"phrases":[],"negatedPhrases":[]}' "parsedTextQuery"
expect_eq "$(jq -c '.queryPlanner.winningPlan.inputStage.inputStage | [.keyPattern, .isMultiKey, .direction, .indexBounds]' <<< "$E")" '[{"_fts":"text","_ftsx":1},true,"backward",{}]' "the term scan"
expect_eq "$(jq -c '.executionStats | [.nReturned, .executionStages.docsRejected]' <<< "$E")" '[2,1]' "counters"

step "\$text under \$or: every other clause indexed"
echo '{"key": {"views": 1}}' > "$C/.indexes/views_1"
R=$(cat "$C/query/{\$or:[{\$text:{\$search:\"coffee\"}},{views:{\$gt:95}}]}?projection={score:{\$meta:\"textScore\"}}")
expect_eq "$(jq -s -c '[.[] | [._id, (if has("score") then .score else "none" end)]]' <<< "$R")" '[[1,1],[2,0.75],[7,0.75],[4,"none"],[5,"none"]]' \
	"the text branch first with MongoDB's scores, the views branch without a score"
R=$(cat "$C/query/{\$or:[{views:{\$lt:20}},{\$text:{\$search:\"coffee\"}}]}?projection={score:{\$meta:\"textScore\"}}&sort={score:{\$meta:\"textScore\"}}")
expect_eq "$(jq -s -c '[.[] | [._id, .score]]' <<< "$R")" '[[1,1],[2,0.75],[7,0.75],[8,null]]' \
	"a document both find keeps its score; sorted by score, the one without last"
expect_eq "$(cat "$C/query/{\$or:[{\$text:{\$search:\"coffee\"}},{views:{\$gt:95}}]}?count=1")" '5' "a count"
expect_eq "$(cat "$C/explain/{\$or:[{\$text:{\$search:\"coffee\"}},{views:{\$gt:95}}]}?format=tree" | sed 's/\([^ ]\)  .*/\1/')" \
	"$(printf 'FETCH\n  OR\n    TEXT_MATCH\n      TEXT_OR\n        IXSCAN subject_text {_fts: "text", _ftsx: 1}\n    IXSCAN views_1 {views: 1} views: (95, inf.0]')" \
	"explain: FETCH over OR of the text plan and the IXSCAN"
expect_fail "an unindexed clause" cat "$C/query/{\$or:[{\$text:{\$search:\"coffee\"}},{author:\"xyz\"}]}"
tail -n1 "$MNT/.docfs/errors" | grep -q "Failed to produce a solution for TEXT under OR - other non-TEXT clauses under OR have to be indexed as well" ||
	fail "no MongoDB error for an unindexed clause"
rm "$C/.indexes/views_1"

step "writes keep the entries"
echo '{"_id": 9, "subject": "iced coffee"}' > "$C/9.json"
expect_eq "$(ids '{$text:{$search:"coffee"}}')" '[1,2,7,9]' "an insert"
rm "$C/1.json"
echo '{"_id": 7, "subject": "tea"}' > "$C/7.json"
expect_eq "$(ids '{$text:{$search:"coffee"}}')" '[2,9]' "a delete and a replace"
"$DOCFS" check "$STORE" > /dev/null || fail "docfs check"

step "bad \$text queries"
expect_fail "\$text in \$nor" cat "$C/query/{\$nor:[{\$text:{\$search:\"x\"}}]}"
tail -n1 "$MNT/.docfs/errors" | grep -q "text expression not allowed in nor" || fail "no clear error for \$nor"
err=$(cat "$MNT/shop/other/query/{\$text:{\$search:\"x\"}}" 2>&1) && fail "\$text without a text index succeeded"
case "$err" in *"Invalid argument"*) ;; *) fail "expected EINVAL, got: $err" ;; esac
tail -n1 "$MNT/.docfs/errors" | grep -q "text index required for \$text query" || fail "no clear error without a text index"

step "aggregate: \$text in the first \$match only"
expect_eq "$(cat "$C/aggregate/[{\$match:{\$text:{\$search:\"coffee\"}}},{\$count:\"n\"}]")" '{"n": 2}' "a leading \$match"
expect_fail "a later \$match" cat "$C/aggregate/[{\$sort:{_id:1}},{\$match:{\$text:{\$search:\"coffee\"}}}]"
tail -n1 "$MNT/.docfs/errors" | grep -q "only allowed as the first pipeline stage" || fail "no clear error for a later \$match"
step "aggregate: {\$meta: \"textScore\"} after the \$text \$match (the manual's \$meta example)"
K=$MNT/shop/cakes
mkdir -p "$K"
cat > "$K/.insert" <<'DOCS'
{"_id": 1, "title": "cakes and ale"}
{"_id": 2, "title": "more cakes"}
{"_id": 3, "title": "bread"}
{"_id": 4, "title": "some cakes"}
{"_id": 5, "title": "two cakes to go"}
{"_id": 6, "title": "pie"}
DOCS
echo '{"key": {"title": "text"}}' > "$K/.indexes/title_text"
expect_eq "$(jq -s -c 'map([._id, .count])' "$K/aggregate/[{\$match:{\$text:{\$search:\"cake\"}}},{\$group:{_id:{\$meta:\"textScore\"},count:{\$sum:1}}}]")" \
	'[[0.6666666666666666,1],[0.75,1],[1,2]]' "\$group by the score: the manual's groups"
R=$(cat "$K/aggregate/[{\$match:{\$text:{\$search:\"cake\"}}},{\$project:{score:{\$meta:\"textScore\"}}}]")
expect_eq "$(jq -s -c 'map([._id, .score])' <<< "$R")" '[[1,0.75],[2,1],[4,1],[5,0.6666666666666666]]' \
	"\$project: the manual's scores (an inclusion of _id and the score)"
expect_eq "$(jq -s -c 'map(keys_unsorted)' "$K/aggregate/[{\$match:{\$text:{\$search:\"ale\"}}},{\$addFields:{score:{\$meta:\"textScore\"}}}]")" \
	'[["_id","title","score"]]' "\$addFields appends it"
expect_eq "$(jq -s -c 'map(._id)' "$K/aggregate/[{\$match:{\$text:{\$search:\"cake\"}}},{\$project:{title:1}},{\$sort:{score:{\$meta:\"textScore\"}}}]")" \
	'[2,4,1,5]' "\$sort by {\$meta} after a \$project: highest first, ties by _id"
expect_eq "$(jq -s -c 'map([._id, .s])' "$K/aggregate/[{\$match:{\$text:{\$search:\"cake\"}}},{\$addFields:{s:{\$meta:\"textScore\"}}},{\$sort:{s:1}},{\$project:{s:1}}]")" \
	'[[5,0.6666666666666666],[1,0.75],[2,1],[4,1]]' "\$sort on a field holding the score"
expect_fail "{\$meta: \"textScore\"} without a \$text \$match" cat "$K/aggregate/[{\$match:{title:\"pie\"}},{\$project:{s:{\$meta:\"textScore\"}}}]"
tail -n1 "$MNT/.docfs/errors" | grep -q "query requires text score metadata, but it is not available" ||
	fail "no MongoDB error for textScore without \$text: $(tail -n1 "$MNT/.docfs/errors")"
step "stop words by the document's language"
M=$MNT/shop/menu
mkdir -p "$M"
cat > "$M/.insert" <<'DOCS'
{"_id": 1, "dish": "la leche de la vaca", "language": "spanish"}
{"_id": 2, "dish": "le lait de la vache", "language": "fr"}
{"_id": 3, "dish": "la leche de la vaca"}
DOCS
echo '{"key": {"dish": "text"}}' > "$M/.indexes/dish_text"
expect_eq "$(jq -s -c '[.[]._id]' "$M/query/{\$text:{\$search:\"la\"}}")" '[3]' "'la' is a stop word in Spanish and French, not in English"
R=$(cat "$M/query/{\$text:{\$search:\"leche\",\$language:\"es\"}}?projection={score:{\$meta:\"textScore\"}}&sort={_id:1}")
expect_eq "$(jq -s -c '[.[] | [._id, .score]]' <<< "$R")" '[[1,0.75],[3,0.6]]' "numTokens counts no stop words: 2 in Spanish, 5 in English"
"$DOCFS" check "$STORE" > /dev/null || fail "docfs check"
echo "text.sh: ok"
