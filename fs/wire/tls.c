/*
 * tls.c - TLS for the wire protocol's TCP connections (OpenSSL): a server's context from a
 * certificate chain and its private key (PEM files), the handshake of each accepted
 * connection, and reads and writes through it. When a server has TLS, a TCP client that
 * does not start a handshake is refused: its first byte is looked at before the handshake,
 * so that a plaintext MongoDB message is named as such in the log. Unix sockets stay
 * plaintext (server.c note 5). Not here: sockets, threads, messages.
 */
#include "wire.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct wire_tls {
	SSL_CTX *ctx;
};

/* OpenSSL's first queued error as text into buf (or "unknown"), the queue emptied. */
static const char *ssl_reason(char *buf, size_t cap)
{
	unsigned long e = ERR_get_error();

	if (e)
		ERR_error_string_n(e, buf, cap);
	else
		snprintf(buf, cap, "unknown");
	ERR_clear_error();
	return buf;
}

int wire_tls_new(const char *cert, const char *key, struct wire_tls **out, struct dfs_err *err)
{
	struct wire_tls *t;
	char why[256];

	if (!cert || !cert[0] || !key || !key[0])
		return dfs_err_set(err, DFS_EINVAL, "TLS needs both tls_cert and tls_key");
	t = calloc(1, sizeof(*t));
	if (!t)
		abort();
	t->ctx = SSL_CTX_new(TLS_server_method());
	if (!t->ctx) {
		free(t);
		return dfs_err_set(err, DFS_EIO, "cannot make a TLS context: %s",
				   ssl_reason(why, sizeof(why)));
	}
	SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
	SSL_CTX_set_mode(t->ctx, SSL_MODE_AUTO_RETRY);
	if (SSL_CTX_use_certificate_chain_file(t->ctx, cert) != 1) {
		wire_tls_free(t);
		return dfs_err_set(err, DFS_EINVAL, "cannot load the TLS certificate '%s': %s",
				   cert, ssl_reason(why, sizeof(why)));
	}
	if (SSL_CTX_use_PrivateKey_file(t->ctx, key, SSL_FILETYPE_PEM) != 1) {
		wire_tls_free(t);
		return dfs_err_set(err, DFS_EINVAL, "cannot load the TLS key '%s': %s", key,
				   ssl_reason(why, sizeof(why)));
	}
	if (SSL_CTX_check_private_key(t->ctx) != 1) {
		wire_tls_free(t);
		return dfs_err_set(err, DFS_EINVAL, "the TLS key '%s' does not match '%s'", key,
				   cert);
	}
	*out = t;
	return 0;
}

void wire_tls_free(struct wire_tls *t)
{
	if (!t)
		return;
	SSL_CTX_free(t->ctx);
	free(t);
}

int wire_tls_accept(struct wire_tls *t, int fd, void **ssl, char *why, size_t cap)
{
	unsigned char first;
	ssize_t k;
	SSL *s;

	do
		k = recv(fd, &first, 1, MSG_PEEK);
	while (k < 0 && errno == EINTR);
	if (k <= 0) {
		snprintf(why, cap, "closed before a TLS handshake");
		return -1;
	}
	if (first != 0x16) { /* a TLS record of type handshake */
		snprintf(why, cap, "not a TLS handshake (a plaintext client?): TLS is required");
		return -1;
	}
	s = SSL_new(t->ctx);
	if (!s || SSL_set_fd(s, fd) != 1) {
		ssl_reason(why, cap);
		SSL_free(s);
		return -1;
	}
	if (SSL_accept(s) != 1) {
		char r[200];

		snprintf(why, cap, "TLS handshake failed: %s", ssl_reason(r, sizeof(r)));
		SSL_free(s);
		return -1;
	}
	*ssl = s;
	return 0;
}

ssize_t wire_tls_read(void *ssl, void *p, size_t n)
{
	int k = SSL_read(ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);

	if (k > 0)
		return k;
	if (SSL_get_error(ssl, k) == SSL_ERROR_ZERO_RETURN) {
		ERR_clear_error();
		return 0;
	}
	ERR_clear_error();
	return -1;
}

ssize_t wire_tls_write(void *ssl, const void *p, size_t n)
{
	int k = SSL_write(ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);

	if (k > 0)
		return k;
	ERR_clear_error();
	return -1;
}

void wire_tls_close(void *ssl)
{
	if (!ssl)
		return;
	SSL_shutdown(ssl); /* a close_notify, not waiting for the client's */
	SSL_free(ssl);
	ERR_clear_error();
}
