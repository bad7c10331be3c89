// mongos_session.js - the seed scenario's commands, verbatim, through `docfs router -o
// listen=` in mongosh (mongos.sh runs it; mongos.golden is what it prints). SHARDS names the
// three shard mounts; the shards are added by name (sh.addShard would name them shard0000..).
const shards = process.env.SHARDS.split(',');
print(db.hello().msg);
try { sh.addShard('/nonexistent/docfs-shard'); } catch (e) { print('sh.addShard refused: ' + e.codeName + ': ' + e.message); }
shards.forEach((s, i) => print('added ' + db.adminCommand({addShard: s, name: 'shard0' + (i + 1)}).shardAdded));

// the seed scenario
db.getSiblingDB('test').getCollection('users').createIndex({'user.age':1})
sh.setBalancerState(false)
print('balancer enabled: ' + sh.getBalancerState())
sh.addShardTag('shard01','junior')
sh.addShardTag('shard02','middle')
sh.addShardTag('shard03','senior')
sh.addTagRange('test.users', {'user.age': MinKey}, {'user.age': 20}, 'junior')
sh.addTagRange('test.users', {'user.age': 21}, {'user.age': 40}, 'middle')
sh.addTagRange('test.users', {'user.age': 41}, {'user.age': MaxKey}, 'senior')
sh.enableSharding('test')
sh.shardCollection('test.users', {'user.age': 1})
sh.setBalancerState(true)
print('balancer enabled: ' + sh.getBalancerState())

const users = [];
for (let i = 0; i < 100; i++) users.push({_id: i, user: {name: 'u' + i, age: i}});
print('inserted ' + Object.keys(db.getSiblingDB('test').users.insertMany(users).insertedIds).length);
const ex = db.getSiblingDB('test').getCollection('users').find({'user.age': {$gt: 25}}).explain();
print('explain {user.age: {$gt: 25}}: ' + ex.queryPlanner.winningPlan.stage + ' on ' +
      ex.queryPlanner.winningPlan.shards.map(s => s.shardName).join(', '));
print('countDocuments: ' + db.getSiblingDB('test').users.countDocuments({'user.age': {$gt: 25}}));
print(sh.status());

// the other helpers, the balancer stopped so that nothing moves on its own meanwhile
sh.stopBalancer();
print('balancer enabled: ' + sh.getBalancerState());
print('splitAt: ' + sh.splitAt('test.users', {'user.age': 60}).ok);
const mv = sh.moveChunk('test.users', {'user.age': 20}, 'shard03');
print('moveChunk: ' + mv.ok + ' ' + JSON.stringify(mv.migration));
try { sh.moveChunk('test.users', {'user.age': 30}, 'shard01'); } catch (e) { print('moveChunk out of its zone: ' + e.codeName + ': ' + e.message); }
sh.addShardToZone('shard03', 'veteran');
sh.updateZoneKeyRange('test.users', {'user.age': 41}, {'user.age': MaxKey}, null);
sh.updateZoneKeyRange('test.users', {'user.age': 41}, {'user.age': 90}, 'senior');
sh.updateZoneKeyRange('test.users', {'user.age': 90}, {'user.age': MaxKey}, 'veteran');
try { sh.updateZoneKeyRange('test.users', {'user.age': 95}, {'user.age': 99}, 'junior'); } catch (e) { print('overlapping range: ' + e.codeName); }
try { sh.shardCollection('test.users', {'user.age': 1}); } catch (e) { print('shardCollection again: ' + e.codeName); }
try { db.getSiblingDB('test').users.drop(); } catch (e) { print('drop: ' + e.codeName + ': ' + e.message); }
const ex2 = db.getSiblingDB('test').users.find({'user.age': 20}).explain();
print('explain {user.age: 20}: ' + ex2.queryPlanner.winningPlan.stage + ' on ' +
      ex2.queryPlanner.winningPlan.shards.map(s => s.shardName).join(', '));
print('user 20 is ' + JSON.stringify(db.getSiblingDB('test').users.findOne({'user.age': 20})));
print(EJSON.stringify(db.getSiblingDB('config').chunks.find({ns: 'test.users'}, {_id: 0, min: 1, max: 1, shard: 1}).sort({min: 1}).toArray()));
print(EJSON.stringify(db.getSiblingDB('config').tags.find({}, {_id: 0, tag: 1, min: 1}).sort({min: 1}).toArray()));
print(JSON.stringify(db.adminCommand({listShards: 1}).shards.map(s => [s._id, s.tags])));
print(JSON.stringify(db.getMongo().getDBNames()));
