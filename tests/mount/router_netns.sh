#!/usr/bin/env bash
# router_netns.sh - `docfs router` over three shards on three "hosts": each shard is a docfs
# mount inside its own network namespace (a veth pair to the router's side, its own sshd),
# and the router reaches it only through an sshfs mount of it. What router.sh checks on
# local shard mounts, a subset here across the network: the zones and splits, .insert split
# by owner (per-shard counts read through sshfs), targeted explains, merged finds compared
# with a plain mount, a document read and sed -i, a migration; a shard's refusals (a
# unique index) reaching the router's caller as they do on local shards; then one shard's
# link goes down: what needs it fails with EIO naming it, within sshfs's keepalive
# timeout, while queries targeting the others still work.
#
# The shard's docfs and its sshd are started by one `ip netns exec`, so they share a mount
# namespace of their own: the shard's mount is not visible on the router's side at all, and
# the router cannot reach it but through sshfs. Skips (77) where the machine cannot make
# network namespaces or veth pairs, or has no sshd or sshfs.
. "$(dirname "$0")/lib.sh"

skip() {
	echo "SKIP: $*"
	exit 77
}
for tool in ip:iproute2 nsenter:util-linux ssh:openssh-client ssh-keygen:openssh-client \
	sshfs:sshfs /usr/sbin/sshd:openssh-server; do
	command -v "${tool%%:*}" > /dev/null 2>&1 || skip "${tool%%:*} not found (Debian package ${tool##*:})"
done

R=$T/router
CFG=$T/config
SFX=${T##*.}          # mktemp's random suffix: names unique to this run
NS=() HV=() NV=() HA=() NA=() SHARD_PID=()
names=(A B C)
mkdir -p "$R"

# netns_cleanup: the EXIT trap, in dependency order: the router, the sshfs mounts (the
# router's view of the shards), the shards' docfs mounts (unmounted inside their mount
# namespace), their sshds and sessions, the namespaces, the veth pairs, then lib.sh's
# cleanup (the plain mount, sanitizer reports, the temp dir).
netns_cleanup() {
	local rc=$? pids i p
	trap - EXIT
	touch "$T/stop"
	kill $(jobs -p) 2> /dev/null || true
	wait 2> /dev/null || true
	pids=$(pgrep -f -- "docfs router .*$R\$" || true)
	if mountpoint -q "$R"; then
		fusermount3 -u "$R" 2> /dev/null || { sleep 1; fusermount3 -u "$R" 2> /dev/null; } ||
			fusermount3 -uz "$R" || true
	fi
	for p in $pids; do wait_gone "$p" || true; done
	for i in 0 1 2; do
		pids=$(pgrep -f -- "^sshfs root@[^ ]*:$T/m$i $T/remote$i " || true)
		if mountpoint -q "$T/remote$i"; then
			timeout 10 fusermount3 -u "$T/remote$i" 2> /dev/null ||
				fusermount3 -uz "$T/remote$i" || true
		fi
		for p in $pids; do wait_gone "$p" || kill -9 "$p" 2> /dev/null || true; done
	done
	for i in "${!NS[@]}"; do
		p=${SHARD_PID[$i]:-}
		if [ -n "$p" ] && kill -0 "$p" 2> /dev/null; then
			nsenter -t "$p" -m fusermount3 -u "$T/m$i" 2> /dev/null ||
				{ sleep 1; nsenter -t "$p" -m fusermount3 -u "$T/m$i" 2> /dev/null; } ||
				nsenter -t "$p" -m fusermount3 -uz "$T/m$i" 2> /dev/null || true
			wait_gone "$p" || { echo "shard $i's docfs did not exit: killed" >&2; kill -9 "$p" 2> /dev/null || true; }
		fi
		# whatever still runs in the namespace is this test's: its sshd and sessions
		pids=$(ip netns pids "${NS[$i]}" 2> /dev/null || true)
		[ -z "$pids" ] || kill $pids 2> /dev/null || true
		for p in $pids; do wait_gone "$p" || kill -9 "$p" 2> /dev/null || true; done
		ip netns del "${NS[$i]}" 2> /dev/null || true
		# the namespace may live on a while (a socket of a dead link): its veth goes now
		! ip link show "${HV[$i]}" > /dev/null 2>&1 || ip link del "${HV[$i]}" 2> /dev/null || true
	done
	cleanup "$rc"
}
trap netns_cleanup EXIT
trap 'exit 143' TERM INT HUP # so that a timeout's kill still cleans up

step "three network namespaces with a veth pair each"
# 10.213.Y.0/24, Y random and not in use here: shard i is 10.213.Y.(4i+2), its host side
# 10.213.Y.(4i+1), /30 each. No default route inside: the shards answer only the router.
for _ in $(seq 1 20); do
	Y=$((RANDOM % 250 + 3))
	ip -4 -o addr show | grep -q " 10\.213\.$Y\." || ip -4 route show | grep -q "^10\.213\.$Y\." || break
done
for i in 0 1 2; do
	NS[$i]=docfs-$SFX-$i
	HV[$i]=dfs$SFX${i}h
	NV[$i]=dfs$SFX${i}n
	HA[$i]=10.213.$Y.$((4 * i + 1))
	NA[$i]=10.213.$Y.$((4 * i + 2))
	out=$(ip netns add "${NS[$i]}" 2>&1) || { unset "NS[$i]"; skip "ip netns add failed: $out"; }
	out=$(ip link add "${HV[$i]}" type veth peer name "${NV[$i]}" netns "${NS[$i]}" 2>&1) ||
		skip "no veth pair: $out"
	ip addr add "${HA[$i]}/30" dev "${HV[$i]}"
	ip link set "${HV[$i]}" up
	ip -n "${NS[$i]}" addr add "${NA[$i]}/30" dev "${NV[$i]}"
	ip -n "${NS[$i]}" link set lo up
	ip -n "${NS[$i]}" link set "${NV[$i]}" up
	# nothing is sent anywhere but into this test's own namespaces
	ip route get "${NA[$i]}" | grep -q " dev ${HV[$i]} " ||
		fail "${NA[$i]} is not routed to ${HV[$i]}: $(ip route get "${NA[$i]}")"
done

step "in each namespace: a docfs shard and an sshd"
ssh-keygen -q -t ed25519 -N '' -C docfs-test -f "$T/client_key"
cp "$T/client_key.pub" "$T/authorized_keys"
ssh-keygen -q -t ed25519 -N '' -C docfs-test -f "$T/host_key"
mkdir -p /run/sshd # privilege separation's empty directory
for i in 0 1 2; do
	mkdir -p "$T/s$i" "$T/m$i" "$T/remote$i"
	cat > "$T/sshd$i.conf" << EOF
ListenAddress ${NA[$i]}
Port 22
HostKey $T/host_key
AuthorizedKeysFile $T/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PidFile $T/sshd$i.pid
Subsystem sftp internal-sftp
LogLevel VERBOSE
EOF
	/usr/sbin/sshd -t -f "$T/sshd$i.conf" > "$T/sshd$i.check" 2>&1 ||
		skip "sshd refuses its configuration: $(cat "$T/sshd$i.check")"
	ip netns exec "${NS[$i]}" sh -c '"$1" mount -o "log=$2,notify_ms=100" "$3" "$4" &&
		exec /usr/sbin/sshd -f "$5" -E "$6"' sh \
		"$DOCFS" "$T/log$i" "$T/s$i" "$T/m$i" "$T/sshd$i.conf" "$T/sshd$i.log" 2> "$T/start$i.err" ||
		fail "shard $i did not start: $(cat "$T/start$i.err") $(cat "$T/sshd$i.log" 2> /dev/null)"
	SHARD_PID[$i]=$(pgrep -f -- "docfs mount .*$T/s$i $T/m$i\$" | head -n1 || true)
	[ -n "${SHARD_PID[$i]}" ] || fail "shard $i's docfs is not running: $(cat "$T/log$i" 2> /dev/null)"
	wait_file "$T/sshd$i.pid" || skip "sshd did not start in ${NS[$i]}: $(cat "$T/sshd$i.log")"
done
# the shards' mounts are not on this side: only sshfs reaches them
for i in 0 1 2; do
	! mountpoint -q "$T/m$i" || fail "shard $i's mount is visible outside its namespace"
done

step "sshfs mounts of the shards on the router's side"
SSH_OPTS=(-F /dev/null -o IdentityFile="$T/client_key" -o IdentitiesOnly=yes -o BatchMode=yes
	-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=5)
for i in 0 1 2; do
	ok_ssh=
	for _ in $(seq 1 50); do
		if timeout 10 ssh "${SSH_OPTS[@]}" "root@${NA[$i]}" true 2> "$T/ssh$i.err"; then
			ok_ssh=1
			break
		fi
		sleep 0.2
	done
	[ -n "$ok_ssh" ] || fail "ssh to shard $i (${NA[$i]}): $(cat "$T/ssh$i.err") $(tail -n5 "$T/sshd$i.log")"
	# No caching on the router's side (each read goes to the shard's docfs): dir_cache=no and
	# zero kernel timeouts; direct_io, since a docfs file's size is not known before it is
	# read (a query's .stats is 0 bytes in a stat); keepalives so a dead link fails in ~4 s
	# (sshfs then exits: no reconnect).
	timeout 30 sshfs "root@${NA[$i]}:$T/m$i" "$T/remote$i" -F /dev/null \
		-o "IdentityFile=$T/client_key,IdentitiesOnly=yes,BatchMode=yes,StrictHostKeyChecking=no" \
		-o "UserKnownHostsFile=/dev/null,LogLevel=ERROR,ConnectTimeout=5" \
		-o "ServerAliveInterval=1,ServerAliveCountMax=3" \
		-o "dir_cache=no,entry_timeout=0,attr_timeout=0,negative_timeout=0,direct_io" \
		2> "$T/sshfs$i.err" || fail "sshfs of shard $i: $(cat "$T/sshfs$i.err")"
	[ -d "$T/remote$i/.docfs" ] || fail "no docfs through sshfs at $T/remote$i: $(ls -a "$T/remote$i")"
done

for i in 0 1 2; do
	"$DOCFS" cluster "$CFG" "{addShard: '$T/remote$i', name: '${names[$i]}'}" > /dev/null ||
		fail "addShard ${names[$i]}"
done
# the balancer stays off: this test moves chunks itself, and a balancer round in between
# (under load the steps take longer than its 10 s) moved test.log's other chunk away from A
# and took the migration slot of the test's own moveChunks (117)
"$DOCFS" cluster "$CFG" '{balancerStop: 1}' > /dev/null || fail "balancerStop"
"$DOCFS" router -o "log=$T/rlog" "$CFG" "$R" || fail "docfs router did not start"
mountpoint -q "$R" || fail "the router is not mounted"

# cmd COMMAND, ok COMMAND: through the router's /.cluster/command (lib.sh)
cmd() { cluster_cmd "$R" "$1"; }
ok() { cluster_ok "$R" "$1"; }
rerr() {
	tail -n1 "$R/.docfs/errors"
}
# count DIR FILTER: the count of FILTER in DIR/test/users (a router or a shard through sshfs)
count() {
	timeout 30 cat "$1/query/$2?count=1"
}

step "a sharded collection with zones, splits and empty chunks moved"
mkdir "$R/test" "$R/test/users"
for i in 0 1 2; do [ -d "$T/remote$i/test/users" ] || fail "mkdir did not reach shard $i"; done
ok '{enableSharding: "test", primaryShard: "A"}'
ok '{addShardToZone: "A", zone: "junior"}'
ok '{addShardToZone: "B", zone: "middle"}'
ok '{addShardToZone: "C", zone: "senior"}'
ok '{shardCollection: "test.users", key: {"user.age": 1}}'
ok '{updateZoneKeyRange: "test.users", min: {"user.age": MinKey}, max: {"user.age": 21}, zone: "junior"}'
ok '{updateZoneKeyRange: "test.users", min: {"user.age": 21}, max: {"user.age": 41}, zone: "middle"}'
ok '{updateZoneKeyRange: "test.users", min: {"user.age": 41}, max: {"user.age": MaxKey}, zone: "senior"}'
ok '{split: "test.users", middle: {"user.age": 21}}'
ok '{split: "test.users", middle: {"user.age": 41}}'
ok '{moveChunk: "test.users", find: {user: {age: 30}}, to: "B"}'
ok '{moveChunk: "test.users", find: {user: {age: 50}}, to: "C"}'
expect_eq "$(wc -l < "$R/.cluster/chunks")" "3" "three chunks in /.cluster/chunks"
grep -q "\"host\": \"$T/remote2\"" "$R/.cluster/shards" || fail "C is not the sshfs path: $(cat "$R/.cluster/shards")"

step ".insert through the router goes to the shard owning each key"
python3 -c '
import json
for i in range(1000):
    print(json.dumps({"_id": i, "name": "u%d" % i, "user": {"age": i % 100, "city": "c%d" % (i % 7)}}))
' > "$T/users.jsonl"
timeout 60 cp "$T/users.jsonl" "$R/test/users/.insert" || fail "insert through the router: $(rerr)"
expect_eq "$(count "$T/remote0/test/users" '{}')" "210" "shard A (through sshfs) holds ages 0-20"
expect_eq "$(count "$T/remote1/test/users" '{}')" "200" "shard B (through sshfs) holds ages 21-40"
expect_eq "$(count "$T/remote2/test/users" '{}')" "590" "shard C (through sshfs) holds ages 41-99"
expect_eq "$(ls "$R/test/users" | grep -c '\.json$')" "1000" "the router lists every document once"
expect_eq "$(count "$R/test/users" '{}')" "1000" "count through the router"
if /usr/bin/printf '{"_id": 5, "user": {"age": 5}}\n' > "$R/test/users/.insert" 2> /dev/null; then
	fail "an insert of an existing _id was accepted"
fi
rerr | grep -q "shard 'A'" || fail "the duplicate's error does not name shard A: $(rerr)"

# the same documents on a plain mount: the oracle of every merged answer
mount_docfs
mkdir -p "$MNT/test/users"
cp "$T/users.jsonl" "$MNT/test/users/.insert"

step "explain shows the shards a filter targets"
ex() { timeout 30 jq -c "[.queryPlanner.winningPlan.stage, [.queryPlanner.winningPlan.shards[].shardName]]" "$R/test/users/explain/$1"; }
expect_eq "$(ex '{"user.age": {$gt: 25}}')" '["SHARD_MERGE",["B","C"]]' "{\$gt: 25}: two shards"
expect_eq "$(ex '{"user.age": {$gt: 18}}')" '["SHARD_MERGE",["A","B","C"]]' "{\$gt: 18}: all three"
expect_eq "$(ex '{"user.age": 30}')" '["SINGLE_SHARD",["B"]]' "an equality: one shard"
expect_eq "$(ex '{"user.age": {$in: [5, 50]}}?sort={_id: 1}')" '["SHARD_MERGE_SORT",["A","C"]]' "\$in with a sort"
jq -e ".queryPlanner.winningPlan.shards[0].connectionString == \"$T/remote1\"" \
	"$R/test/users/explain/{\"user.age\": 30}" > /dev/null ||
	fail "the explain does not name B's sshfs path: $(cat "$R/test/users/explain/{\"user.age\": 30}")"

step "merged finds equal the plain mount's"
same() {
	local a b
	a=$(timeout 30 cat "$R/test/users/query/$1") || fail "router: $1: $(rerr)"
	b=$(cat "$MNT/test/users/query/$1") || fail "plain: $1"
	[ "$a" == "$b" ] || fail "$1: the router's answer differs from the plain mount's:
$(diff <(echo "$a") <(echo "$b") | head -20)"
}
same '{"user.age": {$gte: 15}}?sort={"user.age": -1, _id: 1}&skip=7&limit=25&projection={name: 1, "user.age": 1}'
same '{"user.age": {$lt: 60}}?sort={name: 1}&limit=10'
same '{"user.city": "c3"}?sort={_id: -1}&format=json'
same '{"user.age": {$gt: 90}}?sort={_id: 1}&format=ids'
same '{"user.age": {$in: [3, 33, 63]}}?count=1'
same '{"user.age": {$gt: 10}}?distinct=user.city'
same '{"user.age": 30}?sort={_id: 1}'

step "documents through the router: a read, sed -i"
expect_eq "$(timeout 30 jq -c '[.name, .user.age]' "$R/test/users/42.json")" '["u42",42]' "a document read through the router"
timeout 30 sed -i 's/"u42"/"forty-two"/' "$R/test/users/42.json" || fail "sed -i through the router: $(rerr)"
expect_eq "$(jq -r .name "$T/remote2/test/users/42.json")" "forty-two" "sed -i wrote the document on C"
expect_eq "$(jq -r .name "$R/test/users/42.json")" "forty-two" "the router reads the new version"
expect_eq "$(ls "$T/remote0/test/users" "$T/remote1/test/users" | grep -c '^42.json$')" "0" "and nowhere else"
if /usr/bin/printf '{"name": "moved", "user": {"age": 5}}' > "$R/test/users/42.json" 2> /dev/null; then
	fail "a write that changes the shard key was accepted"
fi
expect_eq "$(jq -r .name "$R/test/users/42.json")" "forty-two" "the refused write changed nothing"

step "a migration: moveChunk of a populated chunk"
mkdir "$R/test/log"
ok '{shardCollection: "test.log", key: {k: 1}}'
ok '{split: "test.log", middle: {k: 500}}'
python3 -c '
import json
for i in range(1000):
    print(json.dumps({"_id": "seed%d" % i, "k": i}))
' > "$R/test/log/.insert"
expect_eq "$(count "$T/remote0/test/log" '{}')" "1000" "both chunks on A before the move"
out=$(cmd '{moveChunk: "test.log", find: {k: 700}, to: "B"}')
grep -q '"ok": 1.0' <<< "$out" || fail "moveChunk to B: $out"
echo "   moveChunk to B: $(jq -c '[.millis, .migration]' <<< "$out")"
jq -e '.migration.cloned == 500 and .migration.deletedFromDonor == 500' <<< "$out" > /dev/null ||
	fail "moveChunk moved the wrong number: $out"
expect_eq "$(count "$T/remote0/test/log" '{}')" "500" "A (through sshfs) kept k < 500"
expect_eq "$(count "$T/remote0/test/log" '{k: {$gte: 500}}')" "0" "A kept no orphans"
expect_eq "$(count "$T/remote1/test/log" '{k: {$gte: 500}}')" "500" "B (through sshfs) holds k >= 500"
expect_eq "$(count "$R/test/log" '{}')" "1000" "the router counts every document once"
grep -q '"shard": "B"' "$R/.cluster/chunks" || fail "no chunk of test.log on B: $(cat "$R/.cluster/chunks")"

step "a shard's refusal reaches the router's caller, as on local shards"
# sshfs drops the status of an SFTP close, and a shard commits a document file or a
# .bulk at its close: what each check needs is in its message. A wrong answer here is
# noted and the test goes on (the link-down checks below do not depend on it), failing
# at the end with every one.
REFUSALS=()
refused() {
	echo "FAIL (noted): $*" >&2
	REFUSALS+=("$*")
}
echo '{key: {name: 1}, unique: true}' > "$R/test/users/.indexes/name_u" ||
	fail "a unique index through the router: $(rerr)"
for i in 0 1 2; do [ -e "$T/remote$i/test/users/.indexes/name_u" ] || fail "no index name_u on shard $i"; done
# 42.json and 43.json are both on C: the shard refuses a second "u43"
if /usr/bin/printf '{"name": "u43", "user": {"age": 42}}' > "$R/test/users/42.json" 2> "$T/w.err"; then
	refused "a document write that C refuses (E11000 on name_u) succeeded through the router;" \
		"C's /.docfs/errors: $(tail -n1 "$T/remote2/.docfs/errors"); the router's: $(rerr)"
elif ! rerr | grep -q "shard 'C'.*E11000"; then
	refused "the refused document write's error does not carry C's E11000: $(rerr)"
fi
expect_eq "$(jq -r .name "$T/remote2/test/users/42.json")" "forty-two" "the refused write changed nothing"
if /usr/bin/printf '{"_id": 5000, "name": "u43", "user": {"age": 43}}\n' > "$R/test/users/.insert" 2> /dev/null; then
	fail "an insert that C refuses (E11000 on name_u) was accepted"
fi
rerr | grep -q "shard 'C'" || fail "the refused insert's error does not name C: $(rerr)"
rerr | grep -q "E11000" || refused "the refused insert's error does not carry C's E11000: $(rerr)"
expect_eq "$(count "$R/test/users" '{}')" "1000" "the refused insert wrote nothing"
# a migration whose destination refuses the copy (a unique index on B's own mount only)
# must fail and keep the donor's documents
mkdir "$R/test/mig"
ok '{shardCollection: "test.mig", key: {k: 1}}'
ok '{split: "test.mig", middle: {k: 500}}'
python3 -c '
import json
for i in range(1000):
    print(json.dumps({"_id": "m%d" % i, "k": i, "u": 1}))
' > "$R/test/mig/.insert"
# with an fsync: sshfs runs the close (where B builds the index) after echo's returned
python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"{key: {u: 1}, unique: true}")
os.fsync(fd)
os.close(fd)
' "$T/remote1/test/mig/.indexes/u_1" || fail "an index on B"
out=$(cmd '{moveChunk: "test.mig", find: {k: 700}, to: "B"}') || true
if ! grep -q '"ok": 0.0' <<< "$out"; then
	refused "a moveChunk whose copy B refused (E11000 in B's /.docfs/errors:" \
		"$(tail -n1 "$T/remote1/.docfs/errors")) replied: $(jq -c . <<< "$out");" \
		"documents left: A $(count "$T/remote0/test/mig" '{}'), B $(count "$T/remote1/test/mig" '{}')," \
		"the router $(count "$R/test/mig" '{}') of 1000"
else
	grep -q "shard 'B'.*E11000" <<< "$out" || refused "the failed moveChunk does not say B refused: $out"
	expect_eq "$(count "$R/test/mig" '{}')" "1000" "the failed migration lost nothing"
	expect_eq "$(count "$T/remote0/test/mig" '{}')" "1000" "the donor A kept the chunk"
fi

step "a shard whose link goes down: EIO naming it, the other shards still answer"
ip -n "${NS[2]}" link set dev "${NV[2]}" down
start=$SECONDS
# the first query targeting C waits for sshfs's keepalives to give up; meanwhile the
# router answers queries targeting the other shards
(
	rc=0
	timeout 30 cat "$R/test/users/query/{\"user.age\": 50}" > "$T/c.out" 2> "$T/c.err" || rc=$?
	echo "$rc $((SECONDS - start))" > "$T/c.done"
) &
sleep 0.5
expect_eq "$(count "$R/test/users" '{"user.age": 30}')" "10" "a query targeting B while C's link is down"
[ ! -e "$T/c.done" ] || fail "the query targeting C did not wait for sshfs (ended first: $(cat "$T/c.done"))"
wait
read -r rc took < "$T/c.done"
[ "$rc" -ne 0 ] || fail "a query targeting the unreachable shard C succeeded: $(head -c 200 "$T/c.out")"
[ "$rc" -ne 124 ] || fail "the query targeting C hung (killed by timeout after 30 s)"
echo "   the query targeting C failed after $took s: $(cat "$T/c.err")"
grep -q "Input/output error" "$T/c.err" || fail "the query targeting C failed without EIO: $(cat "$T/c.err")"
rerr | grep -q "shard 'C' ($T/remote2)" || fail "no message naming shard C: $(rerr)"
echo "   the router's error: $(rerr)"
expect_eq "$(count "$R/test/users" '{"user.age": 30}')" "10" "a query targeting B only"
expect_eq "$(count "$R/test/users" '{"user.age": {$lt: 41}}')" "410" "a query targeting A and B"
# sshfs (no reconnect) exits once its keepalives gave up; the empty directory left where
# it was mounted is no shard, and nothing may be written there
for _ in $(seq 1 100); do
	mountpoint -q "$T/remote2" || break
	sleep 0.1
done
! mountpoint -q "$T/remote2" || fail "C's sshfs is still mounted 10 s after its link went down"
if timeout 30 cat "$R/test/users/query/{\"user.age\": {\$gt: 45}}" > /dev/null 2>&1; then
	fail "a second query targeting C succeeded"
fi
rerr | grep -q "shard 'C' ($T/remote2) is unreachable" || fail "no 'unreachable' naming shard C: $(rerr)"
if /usr/bin/printf '{"_id": 7000, "user": {"age": 77}}\n' > "$R/test/users/.insert" 2> /dev/null; then
	fail "an insert for the unreachable shard C was accepted"
fi
expect_eq "$(find "$T/remote2" -mindepth 1 | wc -l)" "0" "nothing written into C's dead mount point"
[ "${#REFUSALS[@]}" -eq 0 ] || fail "${#REFUSALS[@]} refusal(s) of a shard did not reach the router's caller (above)"
echo ok
