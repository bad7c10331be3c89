/*
 * cred.c - who may read a document: the kernel's permission rule applied to a document's
 * mode, owner and group, the calling thread's caller, and what a transaction begun for it
 * may see of a collection. It does not run queries (the query layer's scans ask it) and
 * does not know where a caller comes from (fs/ sets it from each request).
 *
 * Design notes
 * 1. A document readable by every class (mode & 0444 == 0444) is readable by everyone, so
 *    a collection with no other document hides nothing from a reader, and a scan then
 *    asks nothing per document. The partial index docs_private (db.c) holds exactly the
 *    other documents, so knowing that is one probe, and counting what a caller may not
 *    see reads only them.
 * 2. A caller that needs to write (update/, delete/) may be refused any document it does
 *    not own with a write bit for it, which the partial index does not say: its
 *    collections are always asked per document.
 * 3. A transaction copies the thread's caller when it begins: the caller in force when the
 *    work started is the one it answers for, whatever the thread does next.
 */
#include "store_int.h"

#include <string.h>
#include <unistd.h>

static _Thread_local bool tls_has_cred;
static _Thread_local int tls_need;
static _Thread_local struct store_cred tls_cred;

bool store_cred_allows(const struct store_cred *c, int need, uint32_t mode, uint32_t uid,
		       uint32_t gid)
{
	uint32_t bits;
	bool member = false;

	if (c->uid == 0)
		return true;
	if (c->uid == uid) {
		bits = (mode >> 6) & 7;
	} else {
		member = c->gid == gid;
		for (int i = 0; !member && i < c->ngroups; i++)
			member = c->groups[i] == gid;
		bits = member ? (mode >> 3) & 7 : mode & 7;
	}
	return ((uint32_t)need & ~bits) == 0;
}

void store_thread_cred_set(const struct store_cred *c, int need)
{
	tls_has_cred = c != NULL;
	if (c) {
		tls_cred = *c;
		if (tls_cred.ngroups > STORE_CRED_GROUPS)
			tls_cred.ngroups = STORE_CRED_GROUPS;
		if (tls_cred.ngroups < 0)
			tls_cred.ngroups = 0;
	}
	tls_need = need ? need : STORE_MAY_READ;
}

/* Called by store_txn_begin (note 3). */
void store__txn_take_cred(struct store_txn *t)
{
	t->has_cred = tls_has_cred && tls_cred.uid != 0;
	if (!t->has_cred)
		return;
	t->cred = tls_cred;
	t->cred_need = tls_need;
}

bool store_txn_may(struct store_txn *t, int need, uint32_t mode, uint32_t uid, uint32_t gid)
{
	return !t->has_cred || store_cred_allows(&t->cred, need, mode, uid, gid);
}

void store_txn_owner(struct store_txn *t, uint32_t *uid, uint32_t *gid)
{
	*uid = t->has_cred ? t->cred.uid : (uint32_t)getuid();
	*gid = t->has_cred ? t->cred.gid : (uint32_t)getgid();
}

bool store_txn_allows(struct store_txn *t, uint32_t mode, uint32_t uid, uint32_t gid)
{
	return !t->has_cred || store_cred_allows(&t->cred, t->cred_need, mode, uid, gid);
}

int store_txn_sees_all(struct store_txn *t, int64_t coll, bool *all, struct dfs_err *err)
{
	sqlite3_stmt *st;
	int rc;

	*all = true;
	if (!t->has_cred)
		return 0;
	for (int i = 0; i < 4; i++)
		if (t->cred_coll[i] == coll) {
			*all = t->cred_all[i];
			return 0;
		}
	if (t->cred_need & STORE_MAY_WRITE) {
		*all = false; /* note 2 */
	} else {
		if (!(st = store__stmt(t, ST_COLL_PRIVATE, err)))
			return err ? err->code : DFS_EIO;
		sqlite3_bind_int64(st, 1, coll);
		rc = sqlite3_step(st);
		sqlite3_reset(st);
		if (rc != SQLITE_ROW && rc != SQLITE_DONE)
			return store__sqlerr(t, rc, "read permissions", err);
		*all = rc == SQLITE_DONE;
	}
	t->cred_coll[t->cred_next] = coll;
	t->cred_all[t->cred_next] = *all;
	t->cred_next = (t->cred_next + 1) % 4;
	return 0;
}

int store_doc_allowed(struct store_txn *t, int64_t id, bool *ok, struct dfs_err *err)
{
	sqlite3_stmt *st;
	int rc;

	*ok = true;
	if (!t->has_cred)
		return 0;
	if (!(st = store__stmt(t, ST_DOC_PERM, err)))
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*ok = store_txn_allows(t, (uint32_t)sqlite3_column_int64(st, 0),
				       (uint32_t)sqlite3_column_int64(st, 1),
				       (uint32_t)sqlite3_column_int64(st, 2));
	else
		*ok = false;
	sqlite3_reset(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "read permissions", err);
	return 0;
}

int store_coll_hidden_count(struct store_txn *t, int64_t coll, int64_t *n, struct dfs_err *err)
{
	sqlite3_stmt *st;
	bool all;
	int rc;

	*n = 0;
	if ((rc = store_txn_sees_all(t, coll, &all, err)) || all)
		return rc;
	/* A writer may be refused any document (note 2): count them all. */
	if (t->cred_need & STORE_MAY_WRITE)
		st = store__stmt(t, ST_COLL_PERM_LIST, err);
	else
		st = store__stmt(t, ST_COLL_PRIVATE_LIST, err);
	if (!st)
		return err ? err->code : DFS_EIO;
	sqlite3_bind_int64(st, 1, coll);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		if (!store_txn_allows(t, (uint32_t)sqlite3_column_int64(st, 0),
				      (uint32_t)sqlite3_column_int64(st, 1),
				      (uint32_t)sqlite3_column_int64(st, 2)))
			(*n)++;
	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return store__sqlerr(t, rc, "read permissions", err);
	return 0;
}
