#!/usr/bin/env bash
# stattop.sh - `docfs stat` and `docfs top` against a real mount while a writer inserts and
# a reader queries: the grid's header and columns, rows that count the work done between
# samples, -n, --json read by jq (mongostat's keys, mongotop's totals), --noheaders, and
# the refusals (bad interval, unknown option, a path that is no mount).
. "$(dirname "$0")/lib.sh"
mount_docfs
C=$MNT/shop/c
mkdir -p "$C"
echo '{"_id": 0, "a": 1}' > "$C/.insert"

# load SECONDS START: inserts 50 documents (_id from START on) and runs a query, every
# 0.1 s, for SECONDS.
load() {
	local end=$((SECONDS + $1)) i=$2
	while [ "$SECONDS" -lt "$end" ]; do
		seq "$i" $((i + 49)) | sed 's/.*/{"_id": &, "a": &}/' > "$C/.insert"
		cat "$C/query/{a: {\$gt: 10}}?limit=1" > /dev/null
		i=$((i + 50))
		sleep 0.1
	done
}

# under_load SECONDS START OUT ARGS...: runs docfs ARGS into OUT while load runs.
under_load() {
	local secs=$1 start=$2 out=$3 pid
	shift 3
	load "$secs" "$start" &
	pid=$!
	"$DOCFS" "$@" > "$out" || fail "docfs $* exited $?"
	wait "$pid"
}

step "docfs stat -n 3: a header, then rows that count the inserts and queries made"
under_load 5 1 "$T/stat" stat -n 3 "$MNT"
cat "$T/stat"
expect_eq "$(wc -l < "$T/stat")" "4" "lines of docfs stat -n 3 (a header and three rows)"
expect_eq "$(head -1 "$T/stat" | tr -s ' ' | sed 's/^ //')" \
	"insert query update delete getmore command vsize res qrw arw net_in net_out conn time" \
	"the header"
# Each row: 14 columns plus the time's three words (Dec 6 22:38:12.123).
awk 'NR > 1 && NF != 16 { print "row " NR ": " NF " fields"; exit 1 }' "$T/stat" ||
	fail "a row of docfs stat has the wrong number of columns"
# At 10 inserts of 50 a second, a one-second row shows hundreds of inserts.
awk 'NR > 1 && $1 != "*0" && $1 + 0 >= 100 { ok = 1 } END { exit !ok }' "$T/stat" ||
	fail "no row counted the inserts: $(cat "$T/stat")"
awk 'NR > 1 && $2 != "*0" && $2 + 0 >= 1 { ok = 1 } END { exit !ok }' "$T/stat" ||
	fail "no row counted the queries"
awk 'NR > 1 && $3 != "*0" { exit 1 }' "$T/stat" || fail "updates counted where none ran"
awk 'NR > 1 && $13 + 0 < 1 { exit 1 }' "$T/stat" || fail "conn below 1 (the sample's own open)"

step "docfs stat --json: one object a line, mongostat's keys as strings"
under_load 3 100000 "$T/json" stat --json -n 2 "$MNT"
head -1 "$T/json"
expect_eq "$(wc -l < "$T/json")" "2" "lines of docfs stat --json -n 2"
expect_eq "$(jq -c '.[] | keys' "$T/json" | sort -u)" \
	'["arw","command","conn","delete","getmore","insert","net_in","net_out","qrw","query","res","time","update","vsize"]' \
	"mongostat's JSON keys"
expect_eq "$(jq -r '.[] | [.[]] | map(type) | unique | join(",")' "$T/json" | sort -u)" "string" \
	"every value a string"
expect_eq "$(jq -s '[.[] | .[] | .insert | select(. != "*0") | tonumber] | max >= 100' "$T/json")" "true" \
	"inserts per second in the JSON rows"
expect_eq "$(jq -r '.[].time | test("^[0-9]{2}:[0-9]{2}:[0-9]{2}$")' "$T/json" | sort -u)" "true" \
	"the time as 15:04:05"

step "docfs stat --noheaders --humanReadable=false: rows only, sizes in bytes"
"$DOCFS" stat --noheaders --humanReadable=false -n 1 "$MNT" > "$T/raw" || fail "exited $?"
expect_eq "$(wc -l < "$T/raw")" "1" "one row, no header"
awk '{ exit !($7 ~ /^[0-9]+$/ && $7 > 1000000) }' "$T/raw" || fail "vsize not in bytes: $(cat "$T/raw")"

step "docfs top -n 2: the busiest collection first, times in ms"
under_load 4 200000 "$T/top" top -n 2 "$MNT"
cat "$T/top"
expect_eq "$(head -1 "$T/top")" "connected to: $MNT" "the first line"
expect_eq "$(grep -c '^ *ns *total *read *write' "$T/top")" "2" "a header per block"
grep -Eq '^ *shop\.c +[0-9]+ms +[0-9]+ms +[0-9]+ms$' "$T/top" || fail "no line for shop.c"
awk '/^ *ns /{getline; print $1}' "$T/top" | grep -qx 'shop.c' || fail "shop.c is not the busiest"

step "docfs top --json: totals per namespace with ms and counts"
under_load 3 300000 "$T/topj" top --json -n 1 "$MNT"
expect_eq "$(jq -r '.totals["shop.c"] | (.total.count > 0) and (.write.count > 0) and (.read.count > 0)' "$T/topj")" \
	"true" "reads and writes of shop.c counted"
expect_eq "$(jq -r '.time | test("Z$")' "$T/topj")" "true" "a UTC time"

step "refusals: a bad interval, an unknown option, no mount"
expect_fail_msg() { # EXPECTED-MESSAGE COMMAND...
	local want=$1
	shift
	if "$@" > "$T/out" 2> "$T/err"; then
		fail "$* succeeded"
	fi
	grep -qF "$want" "$T/err" || fail "$*: said '$(cat "$T/err")', not '$want'"
	[ ! -s "$T/out" ] || fail "$*: printed rows before failing"
}
expect_fail_msg "sleep interval must be at least 1 second" "$DOCFS" stat "$MNT" 0
expect_fail_msg "the interval must be a whole number of seconds, not 'x'" "$DOCFS" stat "$MNT" x
expect_fail_msg "sleep interval must be greater than 0" "$DOCFS" top "$MNT" 0
expect_fail_msg "unknown option '--bogus'" "$DOCFS" stat --bogus "$MNT"
expect_fail_msg "is '$T' a docfs mount?" "$DOCFS" stat -n 1 "$T"
expect_fail_msg "is '$T' a docfs mount?" "$DOCFS" top -n 1 "$T"

echo "OK"
