/*
 * scram.c - SCRAM-SHA-256 (RFC 5802, RFC 7677) as MongoDB speaks it, the server's side:
 * a user's stored credentials from a password (PBKDF2-HMAC-SHA-256 over a random salt),
 * and the two steps of a conversation (client-first to server-first, client-final to
 * server-final) checking the client's proof against the stored key. Pure functions over
 * strings and OpenSSL's primitives: where users live and who may do what is auth.c's.
 *
 * Design notes
 * 1. Passwords are taken as their bytes when they are printable ASCII (0x20-0x7e), which
 *    SASLprep leaves unchanged; any other byte is refused (wire_scram_password_check) when
 *    a password is set, since SASLprep's mapping and normalisation of other characters is
 *    not implemented and a driver would then derive other keys than the server did.
 * 2. Only the server's keys are stored (storedKey = H(ClientKey), serverKey), never the
 *    password: a proof is checked by recovering ClientKey = proof XOR HMAC(storedKey,
 *    AuthMessage) and comparing H(ClientKey) with storedKey in constant time.
 * 3. Channel binding is not offered: a gs2 header "p=..." is refused, "n" and "y" taken.
 */
#include "wire.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <stdio.h>
#include <string.h>

int wire_b64_encode(const uint8_t *p, size_t n, char *out, size_t cap)
{
	if (cap < 4 * ((n + 2) / 3) + 1)
		return -1;
	return EVP_EncodeBlock((unsigned char *)out, p, (int)n);
}

int wire_b64_decode(const char *s, size_t len, uint8_t *out, size_t cap)
{
	uint8_t tmp[256]; /* keys, salts and proofs: short */
	char again[4 * sizeof(tmp) / 3 + 4];
	size_t pad = 0;
	int n;

	if (len % 4 || len / 4 * 3 > sizeof(tmp))
		return -1;
	if (len && s[len - 1] == '=')
		pad++;
	if (len > 1 && s[len - 2] == '=')
		pad++;
	n = EVP_DecodeBlock(tmp, (const unsigned char *)s, (int)len);
	if (n < 0 || (size_t)n < pad)
		return -1;
	n -= (int)pad; /* EVP_DecodeBlock counts the padding as zero bytes */
	/* only the canonical text of the bytes is taken: no misplaced padding, no stray bits,
	 * no white space */
	if (wire_b64_encode(tmp, (size_t)n, again, sizeof(again)) != (int)len ||
	    memcmp(again, s, len) || (size_t)n > cap)
		return -1;
	memcpy(out, tmp, (size_t)n);
	return n;
}

int wire_scram_password_check(const char *pwd, struct dfs_err *err)
{
	if (!pwd[0])
		return dfs_err_set(err, DFS_EINVAL, "a password must not be empty");
	for (const char *p = pwd; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			return dfs_err_set(err, DFS_EINVAL,
					   "a password must be printable ASCII: docfs does not "
					   "implement SASLprep for other characters");
	return 0;
}

static void hmac(const uint8_t *key, size_t klen, const void *msg, size_t mlen,
		 uint8_t out[WIRE_SCRAM_KEY])
{
	unsigned int olen = WIRE_SCRAM_KEY;

	HMAC(EVP_sha256(), key, (int)klen, msg, mlen, out, &olen);
}

int wire_scram_derive(const char *pwd, const uint8_t *salt, size_t salt_len, int iters,
		      uint8_t stored[WIRE_SCRAM_KEY], uint8_t server[WIRE_SCRAM_KEY],
		      struct dfs_err *err)
{
	uint8_t salted[WIRE_SCRAM_KEY], client[WIRE_SCRAM_KEY];

	if (!PKCS5_PBKDF2_HMAC(pwd, (int)strlen(pwd), salt, (int)salt_len, iters, EVP_sha256(),
			       sizeof(salted), salted))
		return dfs_err_set(err, DFS_EIO, "PBKDF2 failed");
	hmac(salted, sizeof(salted), "Client Key", 10, client);
	SHA256(client, sizeof(client), stored);
	hmac(salted, sizeof(salted), "Server Key", 10, server);
	OPENSSL_cleanse(salted, sizeof(salted));
	OPENSSL_cleanse(client, sizeof(client));
	return 0;
}

int wire_scram_credentials(const char *pwd, int iters, struct wire_scram_cred *out,
			   struct dfs_err *err)
{
	uint8_t salt[28], stored[WIRE_SCRAM_KEY], server[WIRE_SCRAM_KEY];
	int rc;

	if ((rc = wire_scram_password_check(pwd, err)))
		return rc;
	if (RAND_bytes(salt, sizeof(salt)) != 1)
		return dfs_err_set(err, DFS_EIO, "no random bytes for a salt");
	if ((rc = wire_scram_derive(pwd, salt, sizeof(salt), iters, stored, server, err)))
		return rc;
	out->iters = iters;
	wire_b64_encode(salt, sizeof(salt), out->salt, sizeof(out->salt));
	wire_b64_encode(stored, sizeof(stored), out->stored, sizeof(out->stored));
	wire_b64_encode(server, sizeof(server), out->server, sizeof(out->server));
	return 0;
}

/* The value of attribute a ("a=value") at the start of s (len bytes, up to a ','): a view
 * and its length, or NULL. */
static const char *attr(const char *s, size_t len, char a, size_t *vlen)
{
	const char *comma;

	if (len < 2 || s[0] != a || s[1] != '=')
		return NULL;
	comma = memchr(s, ',', len);
	*vlen = (size_t)((comma ? comma : s + len) - s) - 2;
	return s + 2;
}

int wire_scram_client_first(struct wire_scram *st, const char *msg, size_t len, struct dfs_err *err)
{
	const char *p = msg, *end = msg + len, *c1, *c2, *v;
	size_t vlen, o = 0;

	memset(st, 0, sizeof(*st));
	if (memchr(msg, '\0', len))
		return dfs_err_set(err, DFS_EINVAL, "SCRAM: a NUL byte in the client's message");
	/* gs2-header: cbind-flag "," [authzid] "," */
	if (len < 3 || (p[0] != 'n' && p[0] != 'y'))
		return dfs_err_set(err, DFS_EINVAL,
				   "SCRAM: channel binding is not supported, or "
				   "the client's first message is malformed");
	if (p[1] != ',' || !(c1 = memchr(p + 2, ',', (size_t)(end - p - 2))))
		return dfs_err_set(err, DFS_EINVAL, "SCRAM: malformed gs2 header");
	if (c1 != p + 2 && strncmp(p + 2, "a=", 2))
		return dfs_err_set(err, DFS_EINVAL, "SCRAM: malformed authzid");
	if ((size_t)(c1 + 1 - p) >= sizeof(st->gs2))
		return dfs_err_set(err, DFS_EINVAL, "SCRAM: gs2 header too long");
	memcpy(st->gs2, p, (size_t)(c1 + 1 - p));
	p = c1 + 1;
	if ((size_t)(end - p) >= sizeof(st->cfb))
		return dfs_err_set(err, DFS_EINVAL, "SCRAM: client-first message too long");
	memcpy(st->cfb, p, (size_t)(end - p));
	/* client-first-bare: n=user,r=nonce[,extensions] */
	if (!(v = attr(p, (size_t)(end - p), 'n', &vlen)))
		return dfs_err_set(err, DFS_EINVAL, "SCRAM: no user name in the client's message");
	for (size_t i = 0; i < vlen; i++) { /* saslname: "=2C" is ',', "=3D" is '=' */
		char ch = v[i];

		if (ch == '=') {
			if (i + 2 >= vlen)
				return dfs_err_set(err, DFS_EINVAL,
						   "SCRAM: bad escape in user name");
			if (!strncmp(v + i, "=2C", 3))
				ch = ',';
			else if (!strncmp(v + i, "=3D", 3))
				ch = '=';
			else
				return dfs_err_set(err, DFS_EINVAL,
						   "SCRAM: bad escape in user name");
			i += 2;
		}
		if (o + 1 >= sizeof(st->user))
			return dfs_err_set(err, DFS_EINVAL, "SCRAM: user name too long");
		st->user[o++] = ch;
	}
	if (!o)
		return dfs_err_set(err, DFS_EINVAL, "SCRAM: empty user name");
	c2 = v + vlen;
	if (c2 >= end || !(v = attr(c2 + 1, (size_t)(end - c2 - 1), 'r', &vlen)) || !vlen)
		return dfs_err_set(err, DFS_EINVAL, "SCRAM: no nonce in the client's message");
	if (vlen >= sizeof(st->nonce) / 2)
		return dfs_err_set(err, DFS_EINVAL, "SCRAM: nonce too long");
	for (size_t i = 0; i < vlen; i++)
		if (v[i] < 0x21 || v[i] > 0x7e || v[i] == ',')
			return dfs_err_set(err, DFS_EINVAL, "SCRAM: bad character in nonce");
	memcpy(st->nonce, v, vlen);
	st->step = 1;
	return 0;
}

int wire_scram_server_first(struct wire_scram *st, const char *snonce,
			    const struct wire_scram_cred *cred, char *out, size_t cap,
			    struct dfs_err *err)
{
	uint8_t rnd[24];
	char b64[64];
	size_t n = strlen(st->nonce);
	int k;

	if (st->step != 1)
		return dfs_err_set(err, DFS_EINVAL, "SCRAM: out of order");
	if (!snonce) {
		if (RAND_bytes(rnd, sizeof(rnd)) != 1)
			return dfs_err_set(err, DFS_EIO, "no random bytes for a nonce");
		wire_b64_encode(rnd, sizeof(rnd), b64, sizeof(b64));
		snonce = b64;
	}
	if (n + strlen(snonce) >= sizeof(st->nonce))
		return dfs_err_set(err, DFS_EINVAL, "SCRAM: nonce too long");
	strcat(st->nonce, snonce);
	if (wire_b64_decode(cred->stored, strlen(cred->stored), st->stored, sizeof(st->stored)) !=
		    WIRE_SCRAM_KEY ||
	    wire_b64_decode(cred->server, strlen(cred->server), st->server, sizeof(st->server)) !=
		    WIRE_SCRAM_KEY)
		return dfs_err_set(err, DFS_EINVAL, "SCRAM: the user's stored keys are damaged");
	k = snprintf(st->sf, sizeof(st->sf), "r=%s,s=%s,i=%d", st->nonce, cred->salt, cred->iters);
	if (k < 0 || (size_t)k >= sizeof(st->sf) || (size_t)k >= cap)
		return dfs_err_set(err, DFS_EINVAL, "SCRAM: server-first message too long");
	memcpy(out, st->sf, (size_t)k + 1);
	st->step = 2;
	return 0;
}

int wire_scram_client_final(struct wire_scram *st, const char *msg, size_t len, char *out,
			    size_t cap, struct dfs_err *err)
{
	char cb[96], am[2048];
	const char *v, *p, *end = msg + len, *proof_at;
	size_t vlen;
	uint8_t proof[64], sig[WIRE_SCRAM_KEY], key[WIRE_SCRAM_KEY], h[WIRE_SCRAM_KEY];
	int k;

	if (st->step != 2)
		return dfs_err_set(err, DFS_EINVAL, "SCRAM: out of order");
	st->step = 3; /* one try: a failed proof ends the conversation */
	if (memchr(msg, '\0', len))
		return dfs_err_set(err, DFS_EINVAL, "SCRAM: a NUL byte in the client's message");
	/* c=base64(gs2 header) */
	if (!(v = attr(msg, len, 'c', &vlen)))
		return dfs_err_set(err, DFS_EINVAL,
				   "SCRAM: no channel binding in the final message");
	wire_b64_encode((const uint8_t *)st->gs2, strlen(st->gs2), cb, sizeof(cb));
	if (vlen != strlen(cb) || memcmp(v, cb, vlen))
		return dfs_err_set(err, DFS_EINVAL, "SCRAM: channel binding does not match");
	p = v + vlen;
	if (p >= end || !(v = attr(p + 1, (size_t)(end - p - 1), 'r', &vlen)) ||
	    vlen != strlen(st->nonce) || memcmp(v, st->nonce, vlen))
		return dfs_err_set(err, DFS_EINVAL, "SCRAM: nonce does not match");
	/* the proof is the last attribute; what is before it is in the AuthMessage */
	proof_at = NULL;
	for (p = v + vlen; p + 3 <= end; p++)
		if (!strncmp(p, ",p=", 3))
			proof_at = p;
	if (!proof_at || !(v = attr(proof_at + 1, (size_t)(end - proof_at - 1), 'p', &vlen)) ||
	    v + vlen != end)
		return dfs_err_set(err, DFS_EINVAL, "SCRAM: no proof in the final message");
	if (wire_b64_decode(v, vlen, proof, sizeof(proof)) != WIRE_SCRAM_KEY)
		return dfs_err_set(err, DFS_EPERM, "SCRAM: the proof has the wrong length");
	k = snprintf(am, sizeof(am), "%s,%s,%.*s", st->cfb, st->sf, (int)(proof_at - msg), msg);
	if (k < 0 || (size_t)k >= sizeof(am))
		return dfs_err_set(err, DFS_EINVAL, "SCRAM: messages too long");
	hmac(st->stored, WIRE_SCRAM_KEY, am, (size_t)k, sig);
	for (int i = 0; i < WIRE_SCRAM_KEY; i++)
		key[i] = proof[i] ^ sig[i];
	SHA256(key, sizeof(key), h);
	if (CRYPTO_memcmp(h, st->stored, WIRE_SCRAM_KEY) != 0)
		return dfs_err_set(err, DFS_EPERM, "SCRAM: wrong password");
	hmac(st->server, WIRE_SCRAM_KEY, am, (size_t)k, sig);
	if (cap < 3 + 4 * ((WIRE_SCRAM_KEY + 2) / 3) + 1)
		return dfs_err_set(err, DFS_EINVAL, "SCRAM: no room for the server's signature");
	memcpy(out, "v=", 2);
	wire_b64_encode(sig, sizeof(sig), out + 2, cap - 2);
	st->step = 4;
	return 0;
}
