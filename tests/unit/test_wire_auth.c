/*
 * test_wire_auth.c - unit tests of the wire protocol's authentication (fs/wire/scram.c,
 * auth.c): SCRAM-SHA-256 against RFC 7677's example conversation (user "user", password
 * "pencil"), a wrong proof, a replayed or mismatched nonce, malformed client messages,
 * base64, and users kept in a temporary store (create, duplicate, bad role, bad password,
 * drop), then unauthenticated and role-checked commands through the dispatch.
 */
#include "wire.h"
#include "fs_int.h"
#include "query.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* RFC 7677, section 3 */
#define CFIRST "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
#define SNONCE "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
#define SALT "W22ZaJ0SNY7soEsUEjb6gQ=="
#define SFIRST "r=rOprNGfwEbeRWgbNEkqO" SNONCE ",s=" SALT ",i=4096"
#define CFINAL_BARE "c=biws,r=rOprNGfwEbeRWgbNEkqO" SNONCE
#define PROOF "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
#define SFINAL "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

/* The stored credentials of "pencil" with RFC 7677's salt. */
static void pencil(struct wire_scram_cred *cred)
{
	uint8_t salt[64], stored[WIRE_SCRAM_KEY], server[WIRE_SCRAM_KEY];
	struct dfs_err err = {0};
	int n = wire_b64_decode(SALT, strlen(SALT), salt, sizeof(salt));

	ck_assert_int_eq(n, 16);
	ck_assert_int_eq(wire_scram_derive("pencil", salt, (size_t)n, 4096, stored, server, &err),
			 0);
	memset(cred, 0, sizeof(*cred));
	cred->iters = 4096;
	strcpy(cred->salt, SALT);
	wire_b64_encode(stored, sizeof(stored), cred->stored, sizeof(cred->stored));
	wire_b64_encode(server, sizeof(server), cred->server, sizeof(cred->server));
}

START_TEST(test_wire_scram_rfc7677)
{
	struct wire_scram st;
	struct wire_scram_cred cred;
	struct dfs_err err = {0};
	char out[800];
	const char *fin = CFINAL_BARE ",p=" PROOF;

	pencil(&cred);
	ck_assert_int_eq(wire_scram_client_first(&st, CFIRST, strlen(CFIRST), &err), 0);
	ck_assert_str_eq(st.user, "user");
	ck_assert_int_eq(wire_scram_server_first(&st, SNONCE, &cred, out, sizeof(out), &err), 0);
	ck_assert_str_eq(out, SFIRST);
	ck_assert_int_eq(wire_scram_client_final(&st, fin, strlen(fin), out, sizeof(out), &err), 0);
	ck_assert_str_eq(out, SFINAL);
}
END_TEST

START_TEST(test_wire_scram_client_final_wrong_proof)
{
	struct wire_scram st;
	struct wire_scram_cred cred;
	struct dfs_err err = {0};
	char out[800], fin[256];

	pencil(&cred);
	/* a proof of another password: one byte changed */
	snprintf(fin, sizeof(fin), "%s,p=%s", CFINAL_BARE, PROOF);
	fin[strlen(fin) - 5] = fin[strlen(fin) - 5] == 'A' ? 'B' : 'A';
	wire_scram_client_first(&st, CFIRST, strlen(CFIRST), &err);
	wire_scram_server_first(&st, SNONCE, &cred, out, sizeof(out), &err);
	ck_assert_int_eq(wire_scram_client_final(&st, fin, strlen(fin), out, sizeof(out), &err),
			 DFS_EPERM);
	/* one try: the right proof after a wrong one is refused too */
	snprintf(fin, sizeof(fin), "%s,p=%s", CFINAL_BARE, PROOF);
	dfs_err_clear(&err);
	ck_assert_int_eq(wire_scram_client_final(&st, fin, strlen(fin), out, sizeof(out), &err),
			 DFS_EINVAL);
	/* a nonce that is not the server's */
	wire_scram_client_first(&st, CFIRST, strlen(CFIRST), &err);
	wire_scram_server_first(&st, "other", &cred, out, sizeof(out), &err);
	dfs_err_clear(&err);
	ck_assert_int_eq(wire_scram_client_final(&st, fin, strlen(fin), out, sizeof(out), &err),
			 DFS_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "nonce"));
	/* a random server nonce is never the example's */
	wire_scram_client_first(&st, CFIRST, strlen(CFIRST), &err);
	wire_scram_server_first(&st, NULL, &cred, out, sizeof(out), &err);
	ck_assert_str_ne(out, SFIRST);
}
END_TEST

START_TEST(test_wire_scram_client_first_malformed)
{
	static const char *const bad[] = {
		"p=tls-server-end-point,,n=u,r=abc", /* channel binding */
		"n,,r=abc",			     /* no user */
		"n,,n=,r=abc",			     /* empty user */
		"n,,n=u=2X,r=abc",		     /* bad escape */
		"n,,n=u",			     /* no nonce */
		"n,,n=u,r=",			     /* empty nonce */
		"x,,n=u,r=abc",			     /* bad gs2 flag */
		"n,n=u,r=abc",			     /* no authzid field */
		"",
	};
	struct wire_scram st;
	struct dfs_err err = {0};

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		dfs_err_clear(&err);
		ck_assert_msg(wire_scram_client_first(&st, bad[i], strlen(bad[i]), &err) ==
				      DFS_EINVAL,
			      "accepted '%s'", bad[i]);
	}
	ck_assert_int_eq(wire_scram_client_first(&st, "y,,n=a=2Cb=3Dc,r=xyz", 20, &err), 0);
	ck_assert_str_eq(st.user, "a,b=c");
	ck_assert_str_eq(st.gs2, "y,,");
}
END_TEST

START_TEST(test_wire_b64_roundtrip)
{
	uint8_t in[40], back[40];
	char text[64];

	for (size_t n = 0; n <= sizeof(in); n++) {
		for (size_t i = 0; i < n; i++)
			in[i] = (uint8_t)(i * 37 + n);
		int k = wire_b64_encode(in, n, text, sizeof(text));

		ck_assert_int_eq(k, (int)(4 * ((n + 2) / 3)));
		ck_assert_int_eq(wire_b64_decode(text, (size_t)k, back, sizeof(back)), (int)n);
		ck_assert(n == 0 || memcmp(in, back, n) == 0);
	}
	ck_assert_int_eq(wire_b64_decode("abc", 3, back, sizeof(back)), -1);
	ck_assert_int_eq(wire_b64_decode("a=bc", 4, back, sizeof(back)), -1);
	ck_assert_int_eq(wire_b64_decode("+K=N", 4, back, sizeof(back)), -1); /* fuzz_scram's */
	ck_assert_int_eq(wire_b64_decode("AB==", 4, back, sizeof(back)), -1); /* stray bits */
	ck_assert_int_eq(wire_b64_decode(" AA=", 4, back, sizeof(back)), -1);
	ck_assert_int_eq(wire_b64_decode("AA==", 4, back, sizeof(back)), 1);
	ck_assert_int_eq(wire_b64_decode("AAAAAAAA", 8, back, 5), -1); /* no room */
}
END_TEST

START_TEST(test_wire_scram_password_check_ascii)
{
	struct dfs_err err = {0};

	ck_assert_int_eq(wire_scram_password_check("pencil with spaces ~!", &err), 0);
	ck_assert_int_eq(wire_scram_password_check("", &err), DFS_EINVAL);
	dfs_err_clear(&err);
	ck_assert_int_eq(wire_scram_password_check("caf\xc3\xa9", &err), DFS_EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "SASLprep"));
	dfs_err_clear(&err);
	ck_assert_int_eq(wire_scram_password_check("tab\there", &err), DFS_EINVAL);
}
END_TEST

static int count_user(void *ctx, const bson_t *doc)
{
	bson_iter_t it;

	ck_assert(bson_iter_init_find(&it, doc, "credentials"));
	ck_assert(!bson_iter_init_find(&it, doc, "pwd"));
	(*(int *)ctx)++;
	return 0;
}

/* A command through the dispatch with no connection: its reply's code (0: ok). */
static int run_cmd(struct store *s, const bson_t *cmd)
{
	struct wire_msg m = {.h = {.opcode = WIRE_OP_MSG}};
	struct dfs_buf out;
	bson_t reply;
	bson_iter_t it;
	int code = 0;

	m.body = *cmd;
	dfs_buf_init(&out);
	wire_dispatch(s, NULL, 1, &m, 2, &out);
	ck_assert(out.len > WIRE_HEADER_LEN + 5);
	ck_assert(bson_init_static(&reply, (const uint8_t *)out.data + WIRE_HEADER_LEN + 5,
				   out.len - WIRE_HEADER_LEN - 5));
	if (bson_iter_init_find(&it, &reply, "code"))
		code = bson_iter_int32(&it);
	dfs_buf_release(&out);
	return code;
}

START_TEST(test_wire_user_create_drop)
{
	char dir[] = "/tmp/docfs-wire-auth-XXXXXX", cmd[128];
	struct store *s = NULL;
	struct dfs_err err = {0};
	bson_t *roles = BCON_NEW("0", BCON_UTF8("readWrite"), "1", "{", "role", BCON_UTF8("read"),
				 "db", BCON_UTF8("other"), "}");
	bson_t *bad = BCON_NEW("0", BCON_UTF8("root")); /* root of a database other than admin */
	bson_t *ping = BCON_NEW("ping", BCON_INT32(1), "$db", BCON_UTF8("test"));
	bson_t *find = BCON_NEW("find", BCON_UTF8("c"), "$db", BCON_UTF8("test"));
	int n = 0;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(store_open(dir, true, &s, &err), 0);
	ck_assert(!wire_auth_users_exist(s));
	ck_assert_int_eq(run_cmd(s, find), 0); /* no users: open */
	ck_assert_int_eq(wire_user_create(s, "test", "ann", "secret", roles, NULL, &err), 0);
	ck_assert(wire_auth_users_exist(s));
	ck_assert(wire_auth_users_at(dir));
	ck_assert_int_eq(wire_user_create(s, "test", "ann", "other", roles, NULL, &err),
			 DFS_EEXIST);
	dfs_err_clear(&err);
	ck_assert_int_eq(wire_user_create(s, "test", "bob", "secret", bad, NULL, &err), DFS_ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "root@test"));
	dfs_err_clear(&err);
	ck_assert_int_eq(wire_user_create(s, "test", "bob", "s\xc3\xa9", roles, NULL, &err),
			 DFS_EINVAL);
	dfs_err_clear(&err);
	ck_assert_int_eq(wire_user_each(s, count_user, &n, &err), 0);
	ck_assert_int_eq(n, 1);
	/* users exist: a command without authentication is refused, ping is not */
	ck_assert_int_eq(run_cmd(s, find), 13);
	ck_assert_int_eq(run_cmd(s, ping), 0);
	ck_assert_int_eq(wire_user_drop(s, "test", "ann", &err), 0);
	ck_assert_int_eq(wire_user_drop(s, "test", "ann", &err), DFS_ENOENT);
	ck_assert(!wire_auth_users_exist(s));
	ck_assert_int_eq(run_cmd(s, find), 0);
	bson_destroy(roles);
	bson_destroy(bad);
	bson_destroy(ping);
	bson_destroy(find);
	store_free(s);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *wire_auth_suite(void)
{
	Suite *s = suite_create("wire_auth");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_wire_scram_rfc7677);
	tcase_add_test(tc, test_wire_scram_client_final_wrong_proof);
	tcase_add_test(tc, test_wire_scram_client_first_malformed);
	tcase_add_test(tc, test_wire_b64_roundtrip);
	tcase_add_test(tc, test_wire_scram_password_check_ascii);
	tcase_add_test(tc, test_wire_user_create_drop);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(wire_auth_suite());
	int failed;

	query_init();
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
