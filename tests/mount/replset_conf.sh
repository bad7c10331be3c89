#!/usr/bin/env bash
# replset_conf.sh - a replica set's configuration kept in ZooKeeper (no member runs here:
# replset.sh runs them): `docfs rs ZK SET` initiate, conf, status, reconfig, add and
# remove print MongoDB's shapes with its defaults; a malformed configuration (duplicate
# _ids, two members on one address, priority over 1000, more than 7 voters, an unknown tag
# in a write concern mode, ...) is refused with mongod's message and code and changes
# nothing; a reconfig adding two voters at once is refused; the version grows by one per
# change. Starts its own ZooKeeper (Debian's package) on a free port and stops it.
. "$(dirname "$0")/lib.sh"
zk_cleanup() {
	local rc=$?
	zk_stop
	cleanup "$rc"
}
trap zk_cleanup EXIT
zk_start
rs() { "$DOCFS" rs "$ZK" "$@"; }

# refused CONF MESSAGE: rs.initiate(CONF) fails with MESSAGE and exit status 1, nothing stored
refused() {
	local out
	if out=$(rs rs0 initiate "$1" 2> "$T/err"); then fail "accepted: $1"; fi
	grep -qF -- "$2" <<< "$(jq -r .errmsg <<< "$out")" || fail "$1: expected '$2' in: $out"
	jq -e '.ok == 0 and (.code | type) == "number"' <<< "$out" > /dev/null || fail "not MongoDB's error shape: $out"
	grep -qF -- "$2" "$T/err" || fail "$1: the message is not on stderr: $(cat "$T/err")"
	rs rs0 conf > /dev/null 2>&1 && fail "$1: a refused initiate stored a configuration"
	return 0
}
step "malformed configurations are refused with mongod's messages and store nothing"
refused '{_id: "rs0", members: [{_id: 0, host: "a:1"}, {_id: 0, host: "b:1"}]}' \
	"Found two member configurations with same _id field, members.0._id == members.1._id == 0"
refused '{_id: "rs0", members: [{_id: 0, host: "a:1"}, {_id: 1, host: "a:1"}]}' \
	"Found two member configurations with same host field, members.0.host == members.1.host == a:1"
refused '{_id: "rs0", members: [{_id: 0, host: "a:1", priority: 1001}]}' \
	"members.0.priority is 1001: it must be between 0 and 1000 inclusive"
refused "{_id: 'rs0', members: [$(for i in $(seq 0 7); do printf '{_id: %d, host: "h%d:1"},' "$i" "$i"; done)]}" \
	"Replica set configuration contains 8 voting members, but must be at least 1 and no more than 7"
refused '{_id: "rs0", members: [{_id: 0, host: "a:1", tags: {dc: "east"}}], settings: {getLastErrorModes: {multiDC: {rack: 2}}}}' \
	'No member of the set has tag key "rack", which write concern mode "multiDC" counts'
refused '{_id: "rs1", members: [{_id: 0, host: "a:1"}]}' "Attempting to use a configuration for set rs1 in set rs0"
refused '{_id: "rs0", members: [{_id: 0, host: "a:1", priority: 0}]}' \
	"at least one non-arbiter member with priority > 0"
refused '{_id: "rs0", members: [{_id: 0, host: "a:1", hidden: true}]}' "priority must be 0 when hidden=true"
refused '{_id: "rs0", members: [{_id: 0, host: "a:1", bogus: 1}]}' "Unexpected field bogus in replica set member configuration"
refused '{_id: "rs0", members: []}' "must have at least one member"
refused '{_id: "rs0", protocolVersion: 0, members: [{_id: 0, host: "a:1"}]}' "Only protocolVersion 1 is supported"

step "initiate: the book's three members with tags; rs.conf() shows MongoDB's defaults"
out=$(rs rs0 initiate '{_id: "rs0", members: [
	{_id: 0, host: "127.0.0.1:27017", tags: {dc: "east"}},
	{_id: 1, host: "127.0.0.1:27018", tags: {dc: "east"}},
	{_id: 2, host: "127.0.0.1:27019", priority: 0, hidden: true, secondaryDelaySecs: 3600, tags: {dc: "west"}}],
	settings: {getLastErrorModes: {MultipleDC: {dc: 2}}}}') || fail "initiate: $out"
expect_eq "$(jq -c . <<< "$out")" '{"ok":1}' "initiate's reply"
expect_eq "$(rs rs0 initiate '{_id: "rs0", members: [{_id: 0, host: "x:1"}]}' 2> /dev/null | jq -c '[.ok, .code, .codeName]')" \
	'[0,23,"AlreadyInitialized"]' "a second initiate"
conf=$(rs rs0 conf) || fail "conf: $conf"
expect_eq "$(jq -c '[._id, .version, .protocolVersion, .writeConcernMajorityJournalDefault, (.members | length)]' <<< "$conf")" \
	'["rs0",1,1,true,3]' "rs.conf() header"
expect_eq "$(jq -c '.members[1] | [.arbiterOnly, .buildIndexes, .hidden, .priority, .secondaryDelaySecs."$numberLong", .votes, .tags.dc]' <<< "$conf")" \
	'[false,true,false,1,"0",1,"east"]' "a member's defaults"
expect_eq "$(jq -c '.members[2] | [.hidden, .priority, .secondaryDelaySecs."$numberLong"]' <<< "$conf")" '[true,0,"3600"]' "the delayed member"
expect_eq "$(jq -c '.settings | [.chainingAllowed, .heartbeatIntervalMillis, .electionTimeoutMillis, .getLastErrorModes.MultipleDC.dc, .getLastErrorDefaults.w]' <<< "$conf")" \
	'[true,2000,10000,2,1]' "settings with defaults"
setid=$(jq -c '.settings.replicaSetId' <<< "$conf")
[ "$setid" != null ] || fail "no replicaSetId: $conf"

expect_eq "$(rs rs0 status | jq -c '[.set, [.members[].stateStr], [.members[].health], .ok]')" \
	'["rs0",["DOWN","DOWN","DOWN"],[0,0,0],1]' "rs.status() with no member running"

step "add and remove: one voter at a time, the version grows by one each"
rs rs0 add 127.0.0.1:27020 > /dev/null || fail "rs.add"
conf=$(rs rs0 conf)
expect_eq "$(jq -c '[.version, .members[3]._id, .members[3].host, .settings.replicaSetId == '"$setid"']' <<< "$conf")" \
	'[2,3,"127.0.0.1:27020",true]' "after rs.add"
out=$(rs rs0 add 127.0.0.1:27020 2> /dev/null) && fail "adding the same host twice"
grep -q "Found two member configurations with same host field" <<< "$out" || fail "the same host twice: $out"
rs rs0 add '{host: "127.0.0.1:27021", priority: 0, votes: 0}' > /dev/null || fail "rs.add of a non-voting member"
rs rs0 remove 127.0.0.1:27020 > /dev/null || fail "rs.remove"
expect_eq "$(rs rs0 conf | jq -c '[.version, [.members[].host]]')" \
	'[4,["127.0.0.1:27017","127.0.0.1:27018","127.0.0.1:27019","127.0.0.1:27021"]]' "after rs.remove"
out=$(rs rs0 remove 127.0.0.1:9 2> /dev/null) && fail "removing a host that is not there"
grep -q "couldn't find 127.0.0.1:9" <<< "$out" || fail "remove of an unknown host: $out"

step "reconfig: two voters added at once is refused; a version given is replaced by the next"
two=$(rs rs0 conf | jq -c '.members += [{_id: 8, host: "n8:1"}, {_id: 9, host: "n9:1"}]')
out=$(rs rs0 reconfig "$two" 2> /dev/null) && fail "a reconfig adding two voters"
expect_eq "$(jq -c '[.code, .codeName]' <<< "$out")" '[103,"NewReplicaSetConfigurationIncompatible"]' "two voters at once"
expect_eq "$(rs rs0 conf | jq -c .version)" "4" "the refused reconfig changed nothing"
one=$(rs rs0 conf | jq -c '.version = 99 | .members[0].priority = 2')
rs rs0 reconfig "$one" > /dev/null || fail "reconfig"
expect_eq "$(rs rs0 conf | jq -c '[.version, .members[0].priority]')" '[5,2]' "reconfig bumps the version by one"
other=$(rs rs0 conf | jq -c '.settings.replicaSetId = {"$oid": "000000000000000000000000"}')
rs rs0 reconfig "$other" > /dev/null 2>&1 || true
expect_eq "$(rs rs0 conf | jq -c '.settings.replicaSetId == '"$setid"'')" "true" "replicaSetId stays the set's"

step "bad command lines"
expect_fail "an unknown verb" rs rs0 frobnicate
expect_fail "initiate without a configuration" rs rs0 initiate
out=$("$DOCFS" rs 127.0.0.1:1 rs0 conf 2>&1) && fail "a ZooKeeper that is not there"
grep -q "did not answer" <<< "$out" || fail "no ZooKeeper: $out"
echo ok
