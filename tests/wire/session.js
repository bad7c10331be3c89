// session.js - a mongosh session against docfs (tests/wire/mongosh.sh compares what it
// prints with session.golden): inserts, a find, the explain walkthrough (COLLSCAN, then
// createIndex and IXSCAN with its counters, then a covered query), aggregate, updates,
// deletes, findOneAndUpdate, distinct, indexes, stats, the profiler, errors, currentOp and
// a change stream.
db = db.getSiblingDB('book');
db.products.drop();
const cats = ['books', 'games', 'music'];
const docs = [];
for (let i = 1; i <= 12; i++) {
  docs.push({ _id: i, name: 'p' + i, price: i * 5, category: cats[i % 3] });
}
printjson(db.products.insertMany(docs));
print('count', db.products.countDocuments(), db.products.estimatedDocumentCount());
printjson(db.products.find({ price: { $gt: 40 } }, { _id: 0, name: 1, price: 1 }).sort({ price: -1 }).toArray());

let e = db.products.find({ price: { $gt: 40 } }).explain('executionStats');
print('before', e.queryPlanner.winningPlan.stage, e.executionStats.nReturned,
  e.executionStats.totalKeysExamined, e.executionStats.totalDocsExamined);
print('createIndex', db.products.createIndex({ price: 1 }));
e = db.products.find({ price: { $gt: 40 } }).explain('executionStats');
print('after', e.queryPlanner.winningPlan.stage, e.queryPlanner.winningPlan.inputStage.stage,
  e.executionStats.nReturned, e.executionStats.totalKeysExamined,
  e.executionStats.totalDocsExamined);
e = db.products.find({ price: { $gt: 40 } }, { _id: 0, price: 1 }).explain('executionStats');
print('covered', e.queryPlanner.winningPlan.stage, e.queryPlanner.winningPlan.inputStage.stage,
  e.executionStats.totalDocsExamined);

printjson(db.products.aggregate([
  { $group: { _id: '$category', total: { $sum: '$price' }, n: { $sum: 1 } } },
  { $sort: { _id: 1 } }]).toArray());
printjson(db.products.updateMany({ category: 'books' }, { $inc: { price: 1 } }));
printjson(db.products.updateOne({ _id: 100 }, { $set: { name: 'new' } }, { upsert: true }));
printjson(db.products.replaceOne({ _id: 2 }, { name: 'p2b', price: 11 }));
printjson(db.products.deleteOne({ _id: 3 }));
printjson(db.products.deleteMany({ price: { $gte: 55 } }));
printjson(db.products.findOneAndUpdate({ _id: 1 }, { $set: { sold: true } },
  { returnDocument: 'after' }));
printjson(db.products.distinct('category'));
printjson(db.products.getIndexes().map((i) => i.name));
printjson(db.products.find().sort({ _id: 1 }).batchSize(2).toArray().map((d) => d._id));
const s = db.products.stats();
print('stats', s.ns, s.count, s.nindexes);
print('dbstats', db.stats().collections);
print('collections', db.getCollectionNames().join(','));

db.setProfilingLevel(2);
db.products.find({ _id: 4 }).toArray();
db.setProfilingLevel(0);
print('profiled', db.system.profile.countDocuments({ op: 'query', 'command.filter._id': 4 }));

try {
  db.products.insertOne({ _id: 1 });
} catch (err) {
  print('error', err.code, err.errmsg);
}
try {
  db.runCommand({ noSuchCommand: 1 });
} catch (err) {
  print('error', err.code, err.codeName);
}
try {
  db.products.find({ price: { $bogus: 1 } }).toArray();
} catch (err) {
  print('error', err.code, err.codeName);
}
try {
  rs.status();
} catch (err) {
  print('error', err.code, err.codeName);
}
print('currentOp', db.currentOp().inprog.some((o) => o.command && o.command.aggregate === 1));
const w = db.products.watch();
db.products.insertOne({ _id: 200, name: 'watched' });
const ev = w.tryNext();
print('watch', ev.operationType, ev.documentKey._id, ev.fullDocument.name);
w.close();

db.products.drop();
print('dropped', db.getCollectionNames().length);
