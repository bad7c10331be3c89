#!/usr/bin/env bash
# wire.sh - the wire protocol served by the mounting daemon itself (-o listen=): a document
# written with PyMongo is a file at once, a file written with echo or edited with sed -i is
# what the next PyMongo find returns, .changes shows the wire's writes and a wire watch()
# sees a file written in the mount, a query/ file and a wire find agree, the daemon's
# counters count wire operations; the mount stays responsive while a wire client writes;
# `docfs serve` in another process on the same store is seen by the mount; a non-loopback
# listen address is refused without noauth; the listeners end with the mount.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
$PY -c 'import pymongo' 2>/dev/null || { echo "SKIP: no python3-pymongo"; exit 77; }
SOCK=$T/wire.sock
PORT=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URI="mongodb://$(echo "$SOCK" | sed 's|/|%2F|g')"

# pym [URI] CODE: runs CODE with db = the "shop" database of a client of URI (default:
# the mount's socket); what it prints is the output.
pym() {
	local uri=$URI
	if [ $# -gt 1 ]; then uri=$1; shift; fi
	$PY - "$uri" "$1" <<'PYEOF'
import sys, json, pymongo
cl = pymongo.MongoClient(sys.argv[1], serverSelectionTimeoutMS=5000)
db = cl.shop
exec(sys.argv[2])
PYEOF
}

step "refused: a non-loopback address without noauth"
out=$("$DOCFS" mount -o "listen=0.0.0.0:$PORT" "$STORE" "$MNT" 2>&1) && fail "mounted: $out"
case $out in *"without authentication"*) ;; *) fail "refusal says: $out" ;; esac
mountpoint -q "$MNT" && fail "mounted after the refusal"

mount_docfs "listen=$SOCK,listen=127.0.0.1:$PORT"
[ -S "$SOCK" ] || fail "no socket at $SOCK"
C=$MNT/shop/items

step "a document written with PyMongo is a file"
pym 'db.items.insert_one({"_id": 1, "name": "pen", "qty": 2})'
expect_eq "$(jq -c . "$C/1.json")" '{"_id":1,"name":"pen","qty":2}' "the file of a wire insert"
pym 'db.items.insert_many([{"_id": i, "n": i} for i in range(10, 20)])'
expect_eq "$(ls "$C" | grep -c '^1[0-9].json$')" 10 "insert_many's files"

step "a file written with echo, then sed -i, is what the next find returns"
echo '{"_id": 2, "name": "ink", "qty": 5}' > "$C/2.json"
expect_eq "$(pym 'print(db.items.find_one({"_id": 2})["name"])')" "ink" "find after echo"
sed -i 's/"ink"/"blue ink"/' "$C/2.json"
expect_eq "$(pym 'print(db.items.find_one({"_id": 2})["name"])')" "blue ink" "find after sed -i"
rm "$C/2.json"
expect_eq "$(pym 'print(db.items.find_one({"_id": 2}))')" "None" "find after rm"

step "updates and deletes through the wire, read through files"
pym 'db.items.update_one({"_id": 1}, {"$inc": {"qty": 3}})'
expect_eq "$(jq .qty "$C/1.json")" 5 "the file after a wire update"
pym 'db.items.delete_many({"n": {"$gte": 15}})'
expect_eq "$(ls "$C" | grep -c '^1[0-9].json$')" 5 "files after a wire delete_many"

step ".changes shows the wire's writes"
expect_eq "$(jq -r .operationType "$C/.changes" | tr '\n' ' ')" \
	"insert insert insert insert insert insert insert insert insert insert insert insert replace delete update delete delete delete delete delete " \
	"the events"

step "a wire change stream sees a file written in the mount"
out=$(pym "import threading
with db.items.watch(max_await_time_ms=200) as cs:
    threading.Timer(0.3, lambda: open('$C/watched.json', 'w').write('{\"_id\": \"watched\", \"v\": 7}')).start()
    ev = cs.next()
    print(ev['operationType'], ev['documentKey']['_id'], ev['fullDocument']['v'])")
expect_eq "$out" "insert watched 7" "watch() of a file write"
rm "$C/watched.json"

step "a query/ file and a wire find agree"
q=$(jq -c '._id' "$C/query/{n: {\$gte: 11}}?sort={n: -1}" | tr '\n' ' ')
w=$(pym 'print(" ".join(str(d["_id"]) for d in db.items.find({"n": {"$gte": 11}}).sort("n", -1)) + " ")')
expect_eq "$w" "$q" "query/ vs find"
pym 'db.items.create_index("n")'
[ -e "$C/.indexes/n_1" ] || fail "the wire's index has no .indexes file"
expect_eq "$(jq -r '.queryPlanner.winningPlan.inputStage.stage' "$C/explain/{n: 12}")" IXSCAN \
	"explain/ uses the wire's index"

step "the daemon's counters count wire operations"
before=$(jq '.opcounters.insert' "$MNT/.docfs/serverStatus")
pym 'db.items.insert_many([{"k": i} for i in range(7)])'
after=$(jq '.opcounters.insert' "$MNT/.docfs/serverStatus")
expect_eq "$((after - before))" 7 "opcounters.insert"

step "the TCP listener serves the same store"
expect_eq "$(pym "mongodb://127.0.0.1:$PORT" 'print(db.items.count_documents({}))')" \
	"$(ls "$C" | grep -c '\.json$')" "count over TCP vs files"

step "the mount answers while a wire client writes"
pym 'db.bulk.insert_many([{"i": i, "pad": "x" * 200} for i in range(20000)])' &
writer=$!
for _ in $(seq 1 20); do
	ls "$C" > /dev/null || fail "ls during wire writes"
	cat "$C/1.json" > /dev/null || fail "cat during wire writes"
done
wait $writer || fail "the wire writer failed"
expect_eq "$(cat "$MNT/shop/bulk/query/{}?count=1")" 20000 "the wire's bulk insert"

step "docfs serve in another process: its writes reach the mount"
SOCK2=$T/serve.sock
"$DOCFS" serve "$STORE" --listen "$SOCK2" --log "$T/serve.log" > "$T/serve.out" &
serve=$!
trap 'kill $serve 2>/dev/null; cleanup' EXIT
wait_file "$SOCK2" || fail "docfs serve did not start: $(cat "$T/serve.log")"
URI2="mongodb://$(echo "$SOCK2" | sed 's|/|%2F|g')"
pym "$URI2" 'db.items.insert_one({"_id": "from-serve", "v": 1})'
for _ in $(seq 1 50); do [ -e "$C/from-serve.json" ] && break; sleep 0.1; done
expect_eq "$(jq .v "$C/from-serve.json")" 1 "serve's write seen in the mount"
echo '{"_id": "from-mount", "v": 2}' > "$C/from-mount.json"
expect_eq "$(pym "$URI2" 'print(db.items.find_one({"_id": "from-mount"})["v"])')" 2 \
	"the mount's write seen by serve"
kill $serve
wait $serve || true
trap cleanup EXIT

step "the listeners end with the mount"
fusermount3 -u "$MNT"
for _ in $(seq 1 100); do [ -e "$SOCK" ] || break; sleep 0.1; done
[ -e "$SOCK" ] && fail "the socket outlived the mount"
$PY -c "import socket; socket.create_connection(('127.0.0.1', $PORT), timeout=2)" 2>/dev/null &&
	fail "the TCP port outlived the mount"
"$DOCFS" check "$STORE" > /dev/null || fail "docfs check"
echo "wire.sh: ok"
