// unified.js - runs MongoDB's unified-format CRUD spec tests (the JSON files of
// ../shared/third_party/specs/crud-unified/, read at run time) through the Node.js driver
// against a running server: `node unified.js URI SPECDIR [MIN_PASS_PERCENT]`. It starts
// nothing itself (tests/wire/unified.sh starts `docfs serve` and stops it).
//
// What it runs: every test whose runOnRequirements a standalone 7.0 server without auth or
// CSFLE meets, and that needs no fail point, no session or transaction, no client-side
// bulkWrite. What it checks: expectResult and expectError of each operation (an operation
// with neither must succeed) and the collections' documents in `outcome`, with the unified
// format's matching rules. What it does not check: expectEvents (command monitoring shows
// what the driver sent, not what the server did); a test whose only assertions are events is
// skipped and counted as such.
//
// Prints one PASS/FAIL/SKIP line per test, the skips per reason, and a closing line
// "unified: N passed, N failed, N skipped"; exits 1 when the passed share of the runnable
// tests is under MIN_PASS_PERCENT (default 100).
'use strict';
const fs = require('fs');
const path = require('path');
const { MongoClient, MongoServerError, BSON, Long, Int32, Double } = require('mongodb');
const EJSON = BSON.EJSON;

const SERVER_VERSION = [7, 0, 0];
const SKIP_OPS = {
	failPoint: 'fail points',
	targetedFailPoint: 'fail points',
	startTransaction: 'sessions and transactions',
	commitTransaction: 'sessions and transactions',
	abortTransaction: 'sessions and transactions',
	withTransaction: 'sessions and transactions',
	endSession: 'sessions and transactions',
	clientBulkWrite: 'client-side bulkWrite',
};

function versionParts(s) {
	const p = String(s).split('.').map(Number);
	while (p.length < 3)
		p.push(0);
	return p;
}

function versionCmp(a, b) {
	for (let i = 0; i < 3; i++)
		if (a[i] !== b[i])
			return a[i] < b[i] ? -1 : 1;
	return 0;
}

// Why one runOnRequirement is not met by a standalone 7.0 (null when it is).
function requirementUnmet(r) {
	if (r.minServerVersion && versionCmp(SERVER_VERSION, versionParts(r.minServerVersion)) < 0)
		return 'server version (needs >= ' + r.minServerVersion + ')';
	if (r.maxServerVersion && versionCmp(SERVER_VERSION, versionParts(r.maxServerVersion)) > 0)
		return 'server version (needs <= ' + r.maxServerVersion + ')';
	if (r.topologies && !r.topologies.includes('single'))
		return 'topology (' + r.topologies.join(', ') + ')';
	if (r.serverless === 'require')
		return 'serverless';
	if (r.auth === true)
		return 'auth';
	if (r.csfle)
		return 'csfle';
	if (r.serverParameters)
		return 'server parameters';
	return null;
}

// Why a list of runOnRequirements (any one suffices) is not met, or null.
function requirementsUnmet(list) {
	if (!list || list.length === 0)
		return null;
	let why = null;
	for (const r of list) {
		const w = requirementUnmet(r);
		if (!w)
			return null;
		why = why || w;
	}
	return why;
}

// Tests that the Node.js driver itself cannot pass, whatever the server: file -> description
// pattern and why.
const DRIVER_SKIPS = [
	['create-null-ids', /via (insertOne|insertMany|bulkWrite)$/,
	 'Node driver: replaces a null _id by a new ObjectId before sending (lib/utils.js)'],
];

function skipReason(fname, file, test) {
	if (test.skipReason)
		return 'skipReason in the spec';
	for (const [f, re, why] of DRIVER_SKIPS)
		if (fname === f && re.test(test.description))
			return why;
	const why = requirementsUnmet(file.runOnRequirements) || requirementsUnmet(test.runOnRequirements);
	if (why)
		return why;
	for (const e of file.createEntities || [])
		if (e.session)
			return 'sessions and transactions';
	let asserts = !!test.outcome;
	for (const op of test.operations) {
		if (SKIP_OPS[op.name])
			return SKIP_OPS[op.name];
		if (op.arguments && op.arguments.session)
			return 'sessions and transactions';
		if (op.expectResult !== undefined || op.expectError)
			asserts = true;
	}
	if (!asserts && test.expectEvents)
		return 'expectEvents only (events are not checked)';
	return null;
}

// --- matching (the unified format's "Evaluating Matches") ---

class Mismatch extends Error {}

function isNumeric(v) {
	return typeof v === 'number' || typeof v === 'bigint' || v instanceof Long ||
	       v instanceof Int32 || v instanceof Double;
}

function numValue(v) {
	if (typeof v === 'number')
		return v;
	if (typeof v === 'bigint')
		return Number(v);
	if (v instanceof Long)
		return v.toNumber();
	return v.valueOf();
}

// A document: a plain object or a driver result object (BulkWriteResult, whose counts are
// getters); not a BSON value, a Date, a RegExp or bytes.
function isDocument(v) {
	return v !== null && typeof v === 'object' && !Array.isArray(v) && !v._bsontype &&
	       !(v instanceof Date) && !(v instanceof RegExp) && !ArrayBuffer.isView(v);
}

function show(v) {
	try {
		return EJSON.stringify(v, { relaxed: true });
	} catch (e) {
		return String(v);
	}
}

// The BSON type names of $$type that the driver's decoded value can be. The driver decodes
// int32, int64 (when it fits) and double all as JS numbers, so an integral number may be any
// of the three and a fractional one only a double.
function typeNames(v) {
	if (v === undefined)
		return [];
	if (v === null)
		return ['null'];
	if (typeof v === 'string')
		return ['string'];
	if (typeof v === 'boolean')
		return ['bool'];
	if (typeof v === 'number')
		return Number.isInteger(v) ? ['int', 'long', 'double'] : ['double'];
	if (typeof v === 'bigint' || v instanceof Long)
		return ['long'];
	if (Array.isArray(v))
		return ['array'];
	if (v instanceof Date)
		return ['date'];
	if (v instanceof RegExp)
		return ['regex'];
	switch (v._bsontype) {
	case 'ObjectId': return ['objectId'];
	case 'Binary': return ['binData'];
	case 'Decimal128': return ['decimal'];
	case 'Timestamp': return ['timestamp'];
	case 'Int32': return ['int'];
	case 'Double': return ['double'];
	case 'BSONRegExp': return ['regex'];
	case 'MinKey': return ['minKey'];
	case 'MaxKey': return ['maxKey'];
	case 'Code': return ['javascript'];
	case 'BSONSymbol': return ['symbol'];
	default: return isDocument(v) ? ['object'] : [];
	}
}

function specialOperator(v) {
	if (!isDocument(v))
		return null;
	const keys = Object.keys(v);
	return keys.length === 1 && keys[0].startsWith('$$') ? keys[0] : null;
}

// Throws a Mismatch naming the path when actual does not match expected.
function match(expected, actual, root, where) {
	const op = specialOperator(expected);
	if (op) {
		const arg = expected[op];
		switch (op) {
		case '$$exists':
			if ((actual !== undefined) !== arg)
				throw new Mismatch(where + ': ' + (arg ? 'missing' : 'present: ' + show(actual)));
			return;
		case '$$type': {
			const want = Array.isArray(arg) ? arg : [arg];
			const have = typeNames(actual);
			if (!want.some((t) => have.includes(t)))
				throw new Mismatch(where + ': type ' + (have.join('/') || 'missing') +
						   ', not ' + want.join(' or '));
			return;
		}
		case '$$unsetOrMatches':
			if (actual === undefined)
				return;
			return match(arg, actual, root, where);
		case '$$matchAsDocument':
			return match(arg, EJSON.parse(actual), false, where);
		case '$$matchAsRoot':
			return match(arg, actual, true, where);
		case '$$lte':
			if (!isNumeric(actual) || numValue(actual) > numValue(arg))
				throw new Mismatch(where + ': ' + show(actual) + ' > ' + show(arg));
			return;
		default:
			throw new Mismatch(where + ': unsupported operator ' + op);
		}
	}
	if (isDocument(expected)) {
		if (!isDocument(actual))
			throw new Mismatch(where + ': expected a document, got ' + show(actual));
		for (const key of Object.keys(expected)) {
			const value = expected[key];
			const sub = where + '.' + key;
			const sop = specialOperator(value);
			const present = key in actual && actual[key] !== undefined;
			if (sop === '$$exists' || sop === '$$unsetOrMatches' || (sop === '$$type' && !present)) {
				match(value, present ? actual[key] : undefined, false, sub);
				continue;
			}
			if (!present)
				throw new Mismatch(sub + ': missing (expected ' + show(value) + ')');
			match(value, actual[key], false, sub);
		}
		if (!root)
			for (const key of Object.keys(actual))
				if (!(key in expected) && actual[key] !== undefined)
					throw new Mismatch(where + ': unexpected field ' + key + ': ' +
							   show(actual[key]));
		return;
	}
	if (Array.isArray(expected)) {
		if (!Array.isArray(actual))
			throw new Mismatch(where + ': expected an array, got ' + show(actual));
		if (actual.length !== expected.length)
			throw new Mismatch(where + ': ' + actual.length + ' elements, expected ' +
					   expected.length + ': ' + show(actual));
		expected.forEach((v, i) => match(v, actual[i], false, where + '[' + i + ']'));
		return;
	}
	if (isNumeric(expected) && isNumeric(actual)) {
		if (numValue(expected) !== numValue(actual))
			throw new Mismatch(where + ': ' + show(actual) + ', expected ' + show(expected));
		return;
	}
	const a = show(actual);
	const e = show(expected);
	if (a !== e || typeof actual !== typeof expected)
		throw new Mismatch(where + ': ' + a + ', expected ' + e);
}

// --- entities and operations ---

function driverOptions(args, drop) {
	const o = {};
	for (const [k, v] of Object.entries(args || {})) {
		if (drop.includes(k))
			continue;
		if (k === 'returnDocument')
			o[k] = String(v).toLowerCase();
		else
			o[k] = v;
	}
	return o;
}

async function makeEntities(uri, file) {
	const ents = new Map();
	const clients = [];
	for (const e of file.createEntities || []) {
		if (e.client) {
			const opts = Object.assign({ serverSelectionTimeoutMS: 10000 }, e.client.uriOptions || {});
			const c = new MongoClient(uri, opts);
			clients.push(c);
			await c.connect();
			ents.set(e.client.id, c);
		} else if (e.database) {
			const c = ents.get(e.database.client);
			ents.set(e.database.id, c.db(e.database.databaseName, e.database.databaseOptions || {}));
		} else if (e.collection) {
			const db = ents.get(e.collection.database);
			ents.set(e.collection.id, db.collection(e.collection.collectionName,
								e.collection.collectionOptions || {}));
		} else {
			throw new Error('unsupported entity ' + Object.keys(e)[0]);
		}
	}
	return { ents, clients };
}

async function loadInitialData(client, file) {
	for (const d of file.initialData || []) {
		const db = client.db(d.databaseName);
		await db.collection(d.collectionName).drop().catch((e) => {
			if (!(e instanceof MongoServerError && e.code === 26))
				throw e;
		});
		if (d.createOptions || d.documents.length === 0)
			await db.createCollection(d.collectionName, d.createOptions || {});
		if (d.documents.length > 0)
			await db.collection(d.collectionName).insertMany(d.documents);
	}
}

// Runs one operation on its object; returns what the driver returned.
async function runOperation(ents, op) {
	const target = ents.get(op.object);
	if (!target)
		throw new Error('unknown entity ' + op.object);
	const a = op.arguments || {};
	const o = (...drop) => driverOptions(a, drop);
	switch (op.name) {
	case 'insertOne': return target.insertOne(a.document, o('document'));
	case 'insertMany': return target.insertMany(a.documents, o('documents'));
	case 'updateOne': return target.updateOne(a.filter, a.update, o('filter', 'update'));
	case 'updateMany': return target.updateMany(a.filter, a.update, o('filter', 'update'));
	case 'replaceOne':
		return target.replaceOne(a.filter, a.replacement, o('filter', 'replacement'));
	case 'deleteOne': return target.deleteOne(a.filter, o('filter'));
	case 'deleteMany': return target.deleteMany(a.filter, o('filter'));
	case 'find': return target.find(a.filter, o('filter')).toArray();
	case 'findOne': return target.findOne(a.filter, o('filter'));
	case 'countDocuments': return target.countDocuments(a.filter, o('filter'));
	case 'count': return target.count(a.filter, o('filter'));
	case 'estimatedDocumentCount': return target.estimatedDocumentCount(o());
	case 'distinct': return target.distinct(a.fieldName, a.filter, o('fieldName', 'filter'));
	case 'aggregate': return target.aggregate(a.pipeline, o('pipeline')).toArray();
	case 'findOneAndUpdate':
		return target.findOneAndUpdate(a.filter, a.update, o('filter', 'update'));
	case 'findOneAndReplace':
		return target.findOneAndReplace(a.filter, a.replacement, o('filter', 'replacement'));
	case 'findOneAndDelete': return target.findOneAndDelete(a.filter, o('filter'));
	case 'bulkWrite': return target.bulkWrite(a.requests, o('requests'));
	case 'createIndex': return target.createIndex(a.keys, o('keys'));
	case 'dropIndex': return target.dropIndex(a.name, o('name'));
	case 'listIndexes': return target.listIndexes(o()).toArray();
	case 'createCollection': return target.createCollection(a.collection, o('collection'));
	case 'dropCollection': return target.dropCollection(a.collection, o('collection'));
	case 'modifyCollection':
		return target.command(Object.assign({ collMod: a.collection }, o('collection')));
	case 'runCommand': return target.command(a.command, o('command', 'commandName'));
	default: throw new Error('the runner has no operation ' + op.name);
	}
}

// The documents of an iterable result (find, aggregate, listIndexes) are each a root-level
// document; every other result is one root-level value.
const CURSOR_OPS = ['find', 'aggregate', 'listIndexes', 'listCollections', 'listDatabases'];

function matchResult(op, result, where) {
	if (!CURSOR_OPS.includes(op.name) || !Array.isArray(op.expectResult))
		return match(op.expectResult, result, true, where);
	if (!Array.isArray(result) || result.length !== op.expectResult.length)
		throw new Mismatch(where + ': ' + show(result) + ', expected ' + show(op.expectResult));
	op.expectResult.forEach((v, i) => match(v, result[i], true, where + '[' + i + ']'));
}

function checkError(exp, err, where) {
	if (exp.isClientError !== undefined) {
		const client = !(err instanceof MongoServerError);
		if (client !== exp.isClientError)
			throw new Mismatch(where + ': isClientError ' + client + ': ' + err.message);
	}
	if (exp.errorContains !== undefined &&
	    !String(err.message).toLowerCase().includes(exp.errorContains.toLowerCase()))
		throw new Mismatch(where + ': message "' + err.message + '" lacks "' + exp.errorContains + '"');
	if (exp.errorCode !== undefined && err.code !== exp.errorCode)
		throw new Mismatch(where + ': code ' + err.code + ', expected ' + exp.errorCode + ': ' + err.message);
	if (exp.errorCodeName !== undefined &&
	    String(err.codeName).toLowerCase() !== exp.errorCodeName.toLowerCase())
		throw new Mismatch(where + ': codeName ' + err.codeName + ', expected ' + exp.errorCodeName);
	for (const l of exp.errorLabelsContain || [])
		if (!err.hasErrorLabel || !err.hasErrorLabel(l))
			throw new Mismatch(where + ': no error label ' + l);
	for (const l of exp.errorLabelsOmit || [])
		if (err.hasErrorLabel && err.hasErrorLabel(l))
			throw new Mismatch(where + ': error label ' + l);
	if (exp.errorResponse !== undefined)
		match(exp.errorResponse, err.errorResponse, true, where + ' errorResponse');
	if (exp.expectResult !== undefined)
		match(exp.expectResult, err.result, true, where + ' partial result');
}

async function runTest(uri, file, test) {
	const { ents, clients } = await makeEntities(uri, file);
	try {
		if (clients.length === 0)
			throw new Error('no client entity');
		await loadInitialData(clients[0], file);
		for (const [i, op] of test.operations.entries()) {
			const where = 'operation ' + i + ' (' + op.name + ')';
			let result, error;
			try {
				result = await runOperation(ents, op);
			} catch (e) {
				if (e instanceof Mismatch)
					throw e;
				error = e;
			}
			if (op.ignoreResultAndError)
				continue;
			if (op.expectError) {
				if (!error)
					throw new Mismatch(where + ': no error, result ' + show(result));
				checkError(op.expectError, error, where);
				continue;
			}
			if (error)
				throw new Mismatch(where + ': ' + (error.code !== undefined ? 'code ' + error.code + ': ' : '') +
						   error.message);
			if (op.expectResult !== undefined)
				matchResult(op, result, where);
		}
		for (const c of test.outcome || []) {
			const docs = await clients[0].db(c.databaseName).collection(c.collectionName)
				.find({}, { sort: { _id: 1 } }).toArray();
			match(c.documents, docs, false, 'outcome ' + c.databaseName + '.' + c.collectionName);
		}
	} finally {
		for (const c of clients)
			await c.close();
	}
}

// The matcher checked on cases whose answer is known, so that a matcher accepting too much
// cannot pass the spec tests by itself: [expected, actual, root, matches].
function selfTest() {
	const cases = [
		[{ x: 1 }, { x: 1, y: 1 }, true, true],
		[{ x: { y: 1 } }, { x: { y: 1, z: 1 } }, true, false],
		[{ x: 1, y: 1 }, { x: 1 }, true, false],
		[{ x: 1 }, { x: 1.0 }, false, true],
		[{ x: 1 }, { x: 1.5 }, false, false],
		[{ x: 1 }, { x: '1' }, false, false],
		[{ x: { $$unsetOrMatches: 2 } }, {}, false, true],
		[{ x: { $$unsetOrMatches: 2 } }, { x: 3 }, false, false],
		[{ x: { $$exists: false } }, { x: null }, true, false],
		[{ x: { $$exists: true } }, { x: 0 }, true, true],
		[{ x: { $$type: 'string' } }, { x: 5 }, true, false],
		[{ x: { $$type: ['int', 'long'] } }, { x: 5 }, true, true],
		[[1, 2], [1, 2, 3], false, false],
		[{ d: new Date(0) }, { d: new Date(1) }, true, false],
		[{ o: new (require('mongodb').ObjectId)('000000000000000000000001') },
		 { o: new (require('mongodb').ObjectId)('000000000000000000000002') }, true, false],
	];
	cases.forEach(([e, a, root, want], i) => {
		let got = true;
		try {
			match(e, a, root, 'case ' + i);
		} catch (err) {
			if (!(err instanceof Mismatch))
				throw err;
			got = false;
		}
		if (got !== want)
			throw new Error('matcher self-test case ' + i + ' (' + show(e) + ' vs ' + show(a) +
					') gave ' + got);
	});
}

async function main() {
	selfTest();
	const [uri, dir, minArg] = process.argv.slice(2);
	if (!uri || !dir) {
		console.error('usage: node unified.js URI SPECDIR [MIN_PASS_PERCENT]');
		process.exit(2);
	}
	const min = minArg === undefined ? 100 : Number(minArg);
	const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
	let pass = 0, fail = 0, skip = 0;
	const skips = new Map();
	const failures = [];
	for (const f of files) {
		const file = EJSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'), { relaxed: true });
		for (const test of file.tests) {
			const name = path.basename(f, '.json') + ': ' + test.description;
			const why = skipReason(path.basename(f, '.json'), file, test);
			if (why) {
				skip++;
				skips.set(why.replace(/ \(.*/, ''), (skips.get(why.replace(/ \(.*/, '')) || 0) + 1);
				console.log('SKIP ' + name + ' [' + why + ']');
				continue;
			}
			try {
				await runTest(uri, file, test);
				pass++;
				console.log('PASS ' + name);
			} catch (e) {
				fail++;
				failures.push(name);
				console.log('FAIL ' + name + '\n     ' + (e instanceof Mismatch ? '' : 'runner: ') + e.message);
			}
		}
	}
	console.log('\nskipped by reason:');
	for (const [k, v] of [...skips.entries()].sort((x, y) => y[1] - x[1]))
		console.log('  ' + v + '  ' + k);
	const rate = pass + fail ? (100 * pass) / (pass + fail) : 0;
	console.log(files.length + ' files, ' + (pass + fail + skip) + ' tests; ' + (pass + fail) +
		    ' runnable, ' + rate.toFixed(1) + '% passed (minimum ' + min + '%)');
	console.log('unified: ' + pass + ' passed, ' + fail + ' failed, ' + skip + ' skipped');
	process.exit(pass + fail > 0 && rate >= min ? 0 : 1);
}

main().catch((e) => {
	console.error('unified.js: ' + (e.stack || e));
	process.exit(1);
});
