/*
 * server.c - the wire protocol's listeners and connections: TCP (HOST:PORT) and Unix socket
 * listeners, one accepting thread polling them all, and a thread per connection reading
 * whole messages, handing each to wire_dispatch and writing its reply. The threads are the
 * server's own: nothing here waits for, or runs on, the FUSE request loop, so a mount that
 * also serves the wire protocol answers both at once.
 *
 * Design notes
 * 1. A connection whose bytes are not a message (a length under 21 or over 48,000,000
 *    bytes, an unknown opcode, a truncated section, invalid BSON: frame.c decides) is
 *    closed with a line in the log (fs_errlog_add, the mount's /.docfs/errors) naming the
 *    connection and the reason. Nothing else is affected: the message was never run.
 * 2. A TCP listener on anything but loopback is refused unless the store has users (then
 *    the server always requires authentication: auth.c note 1) or noauth says so (nothing
 *    enforced, with a warning in the log): without users, a Unix socket's file permissions
 *    and loopback keep the store to this machine's users.
 * 3. Bind before fork, threads after: a daemon binds (and reports a taken port to the
 *    user) before it detaches, and starts the accepting thread in the child.
 * 4. Idle cursors are closed by the accepting thread, between polls.
 * 5. With TLS (wire_server_tls, tls.c), a TCP connection's thread makes the handshake
 *    before anything else, and a client that does not start one is closed with a line in
 *    the log: plaintext is refused. Unix socket connections stay plaintext: they never
 *    leave the machine, and drivers do not speak TLS over them.
 */
#include "wire.h"
#include "fs_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_LISTENERS 16

struct listener {
	int fd;
	char addr[sizeof(((struct sockaddr_un *)0)->sun_path) + 8]; /* as bound */
	bool is_unix; /* a socket file to remove at stop */
};

struct wire_conn {
	int fd;
	int64_t id;	/* connectionId */
	char peer[128]; /* "127.0.0.1:51234" or "unix" */
	int pid;	/* a Unix socket peer's process id (SO_PEERCRED), else 0 */
	struct wire_auth *auth; /* Owned: who it is authenticated as (auth.c) */
	void *ssl;		/* Owned: its TLS session (tls.c), or NULL: plaintext */
	struct wire_server *w;
	struct wire_conn *prev, *next; /* the server's list (w->lock) */
};

struct wire_server {
	struct store *s; /* Borrowed */
	struct listener l[MAX_LISTENERS];
	int n;
	enum wire_auth_mode mode; /* how authentication is enforced (auth.c note 1) */
	struct wire_tls *tls;	  /* Owned: TLS for TCP connections (note 5), or NULL */
	int wake[2]; /* a byte here stops the accepting thread */
	pthread_t th;
	bool started;
	pthread_mutex_t lock; /* guards conns, nconns */
	pthread_cond_t gone;  /* a connection ended */
	struct wire_conn *conns;
	int nconns;
};

static atomic_llong next_conn_id = 1;
static atomic_int open_conns;

int wire_conn_pid(const struct wire_conn *cn)
{
	return cn ? cn->pid : 0;
}

const char *wire_conn_addr(const struct wire_conn *cn)
{
	return cn && !cn->pid && strncmp(cn->peer, "unix", 4) ? cn->peer : "";
}

struct wire_auth *wire_conn_auth(struct wire_conn *cn)
{
	return cn ? cn->auth : NULL;
}

enum wire_auth_mode wire_conn_auth_mode(const struct wire_conn *cn)
{
	return cn ? cn->w->mode : WIRE_AUTH_USERS;
}

int wire_server_connections(void)
{
	return atomic_load(&open_conns);
}

const char *wire_server_addr(const struct wire_server *w, int i)
{
	return i >= 0 && i < w->n ? w->l[i].addr : NULL;
}

static bool is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(a) ||
		       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return false;
}

static void addr_text(const struct sockaddr *sa, char *out, size_t cap)
{
	char host[INET6_ADDRSTRLEN] = "?";
	int port = 0;

	if (sa->sa_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, host, sizeof(host));
		port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
		snprintf(out, cap, "%s:%d", host, port);
	} else if (sa->sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, host,
			  sizeof(host));
		port = ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
		snprintf(out, cap, "[%s]:%d", host, port);
	} else {
		snprintf(out, cap, "unix");
	}
}

static int bind_unix(struct listener *l, const char *path, struct dfs_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return dfs_err_set(err, DFS_ENAMETOOLONG, "socket path '%s' is too long", path);
	strcpy(sa.sun_path, path);
	/* a socket file left by a server that is gone is replaced; a live one is not */
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
		int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) != 0 &&
		    errno == ECONNREFUSED)
			unlink(path);
		if (probe >= 0)
			close(probe);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return dfs_err_set(err, DFS_EIO, "socket: %s", strerror(errno));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 128) != 0) {
		int e = errno;

		close(fd);
		return dfs_err_set(err, DFS_EIO, "cannot listen on '%s': %s", path, strerror(e));
	}
	l->fd = fd;
	l->is_unix = true;
	snprintf(l->addr, sizeof(l->addr), "%s", path);
	return 0;
}

/* Binds TCP address spec; a non-loopback one only when remote (noauth, or users exist), and
 * then *remote_bound is set. */
static int bind_tcp(struct listener *l, const char *spec, bool noauth, bool users,
		    bool *remote_bound, struct dfs_err *err)
{
	char host[256] = "127.0.0.1", port[16] = "27017";
	const char *colon = strrchr(spec, ':');
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res, *ai;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int fd = -1, rc, one = 1, e = 0;

	if (colon) {
		size_t hl = (size_t)(colon - spec);

		if (spec[0] == '[' && hl >= 2 && spec[hl - 1] == ']') { /* [::1]:port */
			spec++;
			hl -= 2;
		}
		if (hl >= sizeof(host) || strlen(colon + 1) >= sizeof(port))
			return dfs_err_set(err, DFS_EINVAL, "bad listen address '%s'", spec);
		if (hl)
			snprintf(host, sizeof(host), "%.*s", (int)hl, spec);
		if (colon[1])
			snprintf(port, sizeof(port), "%s", colon + 1);
	} else if (spec[0]) {
		if (strspn(spec, "0123456789") == strlen(spec)) {
			if (strlen(spec) >= sizeof(port))
				return dfs_err_set(err, DFS_EINVAL, "bad port '%s'", spec);
			snprintf(port, sizeof(port), "%s", spec);
		} else {
			if (strlen(spec) >= sizeof(host))
				return dfs_err_set(err, DFS_EINVAL, "bad host '%s'", spec);
			snprintf(host, sizeof(host), "%s", spec);
		}
	}
	if (strspn(port, "0123456789") != strlen(port) || atoi(port) > 65535)
		return dfs_err_set(err, DFS_EINVAL, "bad port '%s' in listen address", port);
	if ((rc = getaddrinfo(host, port, &hints, &res)) != 0)
		return dfs_err_set(err, DFS_EINVAL, "cannot resolve '%s': %s", host,
				   gai_strerror(rc));
	for (ai = res; ai; ai = ai->ai_next) {
		if (!is_loopback(ai->ai_addr) && !noauth && !users) {
			freeaddrinfo(res);
			return dfs_err_set(err, DFS_EPERM,
					   "refusing to listen on '%s:%s' without authentication "
					   "(not a loopback address, and the store has no users): "
					   "create one with 'docfs user STORE add NAME', or use a "
					   "Unix socket or 127.0.0.1, or --noauth (-o noauth) to "
					   "accept any client that can connect",
					   host, port);
		}
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			e = errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 512) == 0)
			break;
		e = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return dfs_err_set(err, DFS_EIO, "cannot listen on '%s:%s': %s", host, port,
				   strerror(e ? e : EADDRNOTAVAIL));
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		addr_text((struct sockaddr *)&ss, l->addr, sizeof(l->addr));
	if (!is_loopback((struct sockaddr *)&ss))
		*remote_bound = true;
	if (!is_loopback((struct sockaddr *)&ss) && noauth)
		fs_errlog_add("wire: WARNING: listening on %s without authentication (noauth): "
			      "anyone who can connect can read and write the store",
			      l->addr);
	l->fd = fd;
	return 0;
}

int wire_server_bind(struct store *s, const char *const *addrs, int n, bool noauth,
		     struct wire_server **out, struct dfs_err *err)
{
	struct wire_server *w;
	bool users = false, remote = false;
	int rc = 0;

	if (n > MAX_LISTENERS)
		return dfs_err_set(err, DFS_EINVAL, "at most %d listen addresses", MAX_LISTENERS);
	w = calloc(1, sizeof(*w));
	if (!w)
		abort();
	w->s = s;
	w->wake[0] = w->wake[1] = -1;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->gone, NULL);
	users = wire_auth_users_at(store_path(s)); /* no database of s opened before a fork */
	for (int i = 0; i < n && !rc; i++) {
		const char *a = addrs[i] ? addrs[i] : "";

		if (strchr(a, '/'))
			rc = bind_unix(&w->l[w->n], a, err);
		else
			rc = bind_tcp(&w->l[w->n], a, noauth, users, &remote, err);
		if (!rc)
			w->n++;
	}
	w->mode = noauth ? WIRE_AUTH_OFF : remote ? WIRE_AUTH_ON : WIRE_AUTH_USERS;
	if (noauth && users)
		fs_errlog_add("wire: WARNING: the store has users, but noauth: no command "
			      "requires authentication");
	if (!rc && pipe2(w->wake, O_CLOEXEC) != 0)
		rc = dfs_err_set(err, DFS_EIO, "pipe: %s", strerror(errno));
	if (rc) {
		wire_server_stop(w);
		return rc;
	}
	*out = w;
	return 0;
}

int wire_server_tls(struct wire_server *w, const char *cert, const char *key, struct dfs_err *err)
{
	struct wire_tls *t;
	int rc = wire_tls_new(cert, key, &t, err);

	if (rc)
		return rc;
	wire_tls_free(w->tls);
	w->tls = t;
	return 0;
}

/* Reads exactly n bytes: 0, 1 at a clean end of stream before any byte, -1 on an error or
 * an end inside the bytes. */
static int read_full(struct wire_conn *cn, uint8_t *p, size_t n, bool first)
{
	size_t got = 0;

	while (got < n) {
		ssize_t k = cn->ssl ? wire_tls_read(cn->ssl, p + got, n - got)
				    : recv(cn->fd, p + got, n - got, 0);

		if (k == 0)
			return got == 0 && first ? 1 : -1;
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		got += (size_t)k;
	}
	return 0;
}

static int write_full(struct wire_conn *cn, const char *p, size_t n)
{
	while (n) {
		ssize_t k =
			cn->ssl ? wire_tls_write(cn->ssl, p, n) : send(cn->fd, p, n, MSG_NOSIGNAL);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static void *conn_main(void *arg)
{
	struct wire_conn *cn = arg;
	struct wire_server *w = cn->w;
	struct dfs_buf in, out;
	static atomic_int reply_id = 1;

	dfs_buf_init(&in);
	dfs_buf_init(&out);
	if (w->tls && !cn->pid && strncmp(cn->peer, "unix", 4)) { /* note 5 */
		char why[300];

		if (wire_tls_accept(w->tls, cn->fd, &cn->ssl, why, sizeof(why))) {
			fs_errlog_add("wire: connection %lld from %s: %s; closing it",
				      (long long)cn->id, cn->peer, why);
			goto done;
		}
	}
	for (;;) {
		struct dfs_err err = {0};
		struct wire_header h;
		struct wire_msg m;
		uint8_t hb[WIRE_HEADER_LEN];
		int rc = read_full(cn, hb, sizeof(hb), true);

		if (rc)
			break; /* the client went away */
		if (wire_header_parse(hb, sizeof(hb), &h, &err)) {
			fs_errlog_add("wire: connection %lld from %s: %s; closing it",
				      (long long)cn->id, cn->peer, err.msg);
			break;
		}
		dfs_buf_reset(&in);
		dfs_buf_reserve(&in, (size_t)h.len);
		memcpy(in.data, hb, sizeof(hb));
		if (read_full(cn, (uint8_t *)in.data + sizeof(hb), (size_t)h.len - sizeof(hb),
			      false)) {
			fs_errlog_add("wire: connection %lld from %s: message of %d bytes "
				      "truncated; closing it",
				      (long long)cn->id, cn->peer, h.len);
			break;
		}
		in.len = (size_t)h.len;
		if (wire_msg_parse((const uint8_t *)in.data, in.len, &m, &err)) {
			fs_errlog_add("wire: connection %lld from %s: %s; closing it",
				      (long long)cn->id, cn->peer, err.msg);
			break;
		}
		dfs_buf_reset(&out);
		wire_dispatch(w->s, cn, cn->id, &m, atomic_fetch_add(&reply_id, 1), &out);
		fs_net_count(in.len, out.len);
		if (out.len && write_full(cn, out.data, out.len))
			break;
		/* a large message's buffer is not kept for the connection's life */
		if (in.cap > (1u << 20)) {
			dfs_buf_release(&in);
			dfs_buf_init(&in);
		}
		if (out.cap > (1u << 20)) {
			dfs_buf_release(&out);
			dfs_buf_init(&out);
		}
	}
done:
	dfs_buf_release(&in);
	dfs_buf_release(&out);
	wire_tls_close(cn->ssl);
	close(cn->fd);
	wire_auth_free(cn->auth);
	pthread_mutex_lock(&w->lock);
	if (cn->prev)
		cn->prev->next = cn->next;
	else
		w->conns = cn->next;
	if (cn->next)
		cn->next->prev = cn->prev;
	w->nconns--;
	atomic_fetch_sub(&open_conns, 1);
	fs_curop_handle(false);
	pthread_cond_broadcast(&w->gone);
	pthread_mutex_unlock(&w->lock);
	free(cn);
	return NULL;
}

static void conn_start(struct wire_server *w, int fd, const struct sockaddr *sa)
{
	struct wire_conn *cn = calloc(1, sizeof(*cn));
	pthread_attr_t attr;
	pthread_t th;
	sigset_t all, old;
	int one = 1, rc;

	if (!cn)
		abort();
	cn->fd = fd;
	cn->w = w;
	cn->auth = wire_auth_new();
	cn->id = atomic_fetch_add(&next_conn_id, 1);
	addr_text(sa, cn->peer, sizeof(cn->peer));
	if (sa->sa_family != AF_UNIX) {
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	} else {
		struct ucred cr;
		socklen_t cl = sizeof(cr);

		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0) {
			cn->pid = cr.pid;
			snprintf(cn->peer, sizeof(cn->peer), "unix (pid %d)", (int)cr.pid);
		}
	}
	pthread_mutex_lock(&w->lock);
	cn->next = w->conns;
	if (w->conns)
		w->conns->prev = cn;
	w->conns = cn;
	w->nconns++;
	atomic_fetch_add(&open_conns, 1);
	pthread_mutex_unlock(&w->lock);
	fs_curop_handle(true); /* serverStatus's connections count clients too */
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	sigfillset(&all); /* signals go to the main thread */
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&th, &attr, conn_main, cn);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc) {
		fs_errlog_add("wire: cannot start a thread for connection %lld: %s",
			      (long long)cn->id, strerror(rc));
		pthread_mutex_lock(&w->lock);
		if (cn->prev)
			cn->prev->next = cn->next;
		else
			w->conns = cn->next;
		if (cn->next)
			cn->next->prev = cn->prev;
		w->nconns--;
		atomic_fetch_sub(&open_conns, 1);
		pthread_mutex_unlock(&w->lock);
		fs_curop_handle(false);
		close(fd);
		wire_auth_free(cn->auth);
		free(cn);
	}
}

static void *accept_main(void *arg)
{
	struct wire_server *w = arg;
	struct pollfd pf[MAX_LISTENERS + 1];
	time_t last_reap = time(NULL);

	for (int i = 0; i < w->n; i++)
		pf[i] = (struct pollfd){.fd = w->l[i].fd, .events = POLLIN};
	pf[w->n] = (struct pollfd){.fd = w->wake[0], .events = POLLIN};
	for (;;) {
		int k = poll(pf, (nfds_t)w->n + 1, 1000);

		/* a look each second, at most a tenth of the timeout late (note 4) */
		if (time(NULL) - last_reap >= (wire_cursor_timeout_s < 10 ? 1 : 5)) {
			wire_cursor_reap(wire_cursor_timeout_s);
			last_reap = time(NULL);
		}
		if (k < 0 && errno != EINTR)
			break;
		if (k <= 0)
			continue;
		if (pf[w->n].revents)
			break;
		for (int i = 0; i < w->n; i++) {
			struct sockaddr_storage ss;
			socklen_t sl = sizeof(ss);
			int fd;

			if (!(pf[i].revents & POLLIN))
				continue;
			memset(&ss, 0, sizeof(ss));
			fd = accept4(w->l[i].fd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
			if (fd < 0) {
				if (errno == EMFILE || errno == ENFILE) {
					fs_errlog_add("wire: cannot accept a connection: %s",
						      strerror(errno));
					usleep(100000);
				}
				continue;
			}
			conn_start(w, fd, (struct sockaddr *)&ss);
		}
	}
	return NULL;
}

int wire_server_start(struct wire_server *w, struct dfs_err *err)
{
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&w->th, NULL, accept_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return dfs_err_set(err, DFS_EIO, "cannot start the wire server: %s", strerror(rc));
	w->started = true;
	for (int i = 0; i < w->n; i++)
		fs_log_info("wire: listening on %s", w->l[i].addr);
	return 0;
}

void wire_server_stop(struct wire_server *w)
{
	if (!w)
		return;
	if (w->started) {
		char b = 1;

		if (write(w->wake[1], &b, 1) < 0)
			fs_errlog_add("wire: cannot wake the accepting thread: %s",
				      strerror(errno));
		pthread_join(w->th, NULL);
	}
	for (int i = 0; i < w->n; i++) {
		close(w->l[i].fd);
		if (w->l[i].is_unix)
			unlink(w->l[i].addr);
	}
	wire_cursor_stop_waits(true);
	pthread_mutex_lock(&w->lock);
	for (struct wire_conn *cn = w->conns; cn; cn = cn->next)
		shutdown(cn->fd, SHUT_RDWR); /* its thread's read ends; it frees itself */
	while (w->nconns)
		pthread_cond_wait(&w->gone, &w->lock);
	pthread_mutex_unlock(&w->lock);
	wire_cursor_stop_waits(false);
	if (w->wake[0] >= 0)
		close(w->wake[0]);
	if (w->wake[1] >= 0)
		close(w->wake[1]);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->gone);
	wire_tls_free(w->tls);
	free(w);
}
