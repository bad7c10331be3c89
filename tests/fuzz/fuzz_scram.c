/*
 * fuzz_scram.c - the SCRAM-SHA-256 server's parsers (fs/wire/scram.c) on arbitrary client
 * messages: the input is a client-first message, a newline, and a client-final message.
 * A client-first is refused with a reason or read into a user name and a nonce of
 * printable characters; the server-first then names that nonce; a client-final is accepted
 * only with the proof of the password "pencil" (RFC 7677's, the server nonce fixed), and
 * then the server-final is the RFC's. Also base64 on the raw input: what decodes
 * re-encodes to itself.
 */
#include "fuzz.h"
#include "wire.h"

#define SNONCE "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
#define SALT "W22ZaJ0SNY7soEsUEjb6gQ=="
#define SFINAL "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

static struct wire_scram_cred cred;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dfs_err err = {0};
	struct wire_scram st;
	const uint8_t *nl = memchr(data, '\n', size);
	size_t first = nl ? (size_t)(nl - data) : size;
	char out[800], back[512];
	uint8_t bin[256];
	int n;

	if (!cred.iters) {
		uint8_t salt[32], stored[WIRE_SCRAM_KEY], server[WIRE_SCRAM_KEY];
		int k = wire_b64_decode(SALT, strlen(SALT), salt, sizeof(salt));

		FUZZ_CHECK(k == 16, "the salt");
		FUZZ_CHECK(wire_scram_derive("pencil", salt, (size_t)k, 4096, stored, server,
					     &err) == 0,
			   "%s", err.msg);
		cred.iters = 4096;
		strcpy(cred.salt, SALT);
		wire_b64_encode(stored, sizeof(stored), cred.stored, sizeof(cred.stored));
		wire_b64_encode(server, sizeof(server), cred.server, sizeof(cred.server));
	}
	n = wire_b64_decode((const char *)data, size, bin, sizeof(bin));
	if (n >= 0 && size <= sizeof(back) - 1) {
		FUZZ_CHECK((size_t)n <= size / 4 * 3, "decoded more than the text holds");
		FUZZ_CHECK(wire_b64_encode(bin, (size_t)n, back, sizeof(back)) == (int)size &&
				   !memcmp(back, data, size),
			   "base64 does not round-trip");
	}
	if (wire_scram_client_first(&st, (const char *)data, first, &err)) {
		FUZZ_CHECK(err.code == DFS_EINVAL && err.msg[0], "a refusal without a reason");
		return 0;
	}
	FUZZ_CHECK(st.user[0] && strlen(st.user) < sizeof(st.user), "the user name");
	for (const char *p = st.nonce; *p; p++)
		FUZZ_CHECK(*p > 0x20 && *p < 0x7f && *p != ',', "a nonce character %d", *p);
	if (wire_scram_server_first(&st, SNONCE, &cred, out, sizeof(out), &err)) {
		FUZZ_CHECK(err.code == DFS_EINVAL, "server-first: %s", err.msg);
		return 0;
	}
	FUZZ_CHECK(!strncmp(out, "r=", 2) && strstr(out, SNONCE ",s=" SALT ",i=4096"),
		   "server-first: %s", out);
	if (!nl)
		return 0;
	dfs_err_clear(&err);
	if (wire_scram_client_final(&st, (const char *)nl + 1, size - first - 1, out, sizeof(out),
				    &err)) {
		FUZZ_CHECK((err.code == DFS_EINVAL || err.code == DFS_EPERM) && err.msg[0],
			   "a refusal without a reason");
		return 0;
	}
	FUZZ_CHECK(!strcmp(out, SFINAL), "accepted a proof, answered %s", out);
	return 0;
}
