/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The control server's I/O: one epoll thread owns every socket (TCP, Unix,
 * metrics HTTP) and every connection. Requests are newline-delimited
 * JSON-RPC 2.0 objects (docs/control.md). Beside the sockets and the framing
 * it keeps the HMAC handshake (auth) and the dispatch: a request's method is
 * looked up by name among those registered with SG_RPC_REGISTER() next to
 * their code (sg_ctl_rpc.h). Nothing here touches dataplane memory; the
 * agent callbacks do, through message rings.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "sg_ctl_rpc.h"
#include "sg_ctl_server_internal.h"
#include "sg_parse.h"

#define HTTP_MAX_REQ 8192
/* A client that does not read its answers is cut off past this much queued output. */
#define OUT_MAX (64u << 20)

enum conn_kind { CONN_TCP, CONN_UNIX, CONN_HTTP };

/* epoll tags for the listening sockets (connections use their own pointer). */
static char tag_tcp, tag_unix, tag_http, tag_stop, tag_cluster;

struct conn {
	struct conn *next;
	int fd;
	enum conn_kind kind;
	bool authed;
	bool closing;	 /* close once the output is flushed */
	uint8_t nonce[SG_CTL_NONCE_LEN];
	char *in;
	size_t in_len, in_cap;
	char *out;
	size_t out_len, out_off;
	uint64_t created_ns, last_rx_ns, frame_start_ns;
};

static void conn_free(struct sg_ctl_server *s, struct conn *c)
{
	struct conn **pp;

	for (pp = &s->conns; *pp != NULL; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c->in);
	free(c->out);
	free(c);
	s->n_conns--;
}

/* Queue @p len bytes; write what the socket takes now, wait for EPOLLOUT for the rest. */
static void conn_send(struct sg_ctl_server *s, struct conn *c, const char *data, size_t len)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};

	if (c->out_len - c->out_off + len > OUT_MAX) {
		c->closing = true;
		c->out_off = c->out_len;
		return;
	}
	if (c->out_off == c->out_len) {
		ssize_t w = send(c->fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
			c->closing = true;
			return;
		}
		if (w < 0)
			w = 0;
		data += w;
		len -= (size_t)w;
		if (len == 0)
			return;
		c->out_len = c->out_off = 0;
	}
	{
		char *n = realloc(c->out, c->out_len + len);

		if (n == NULL) {
			c->closing = true;
			return;
		}
		c->out = n;
		memcpy(c->out + c->out_len, data, len);
		c->out_len += len;
	}
	epoll_ctl(s->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void send_json(struct sg_ctl_server *s, struct conn *c, json_t *msg)
{
	char *text = json_dumps(msg, JSON_COMPACT), *line;
	size_t n;

	json_decref(msg);
	n = text ? strlen(text) : 0;
	line = text ? realloc(text, n + 1) : NULL;
	if (line == NULL) {
		free(text);
		c->closing = true;
		return;
	}
	/* One send per answer: a lone "\n" segment would meet delayed ACKs. */
	line[n] = '\n';
	conn_send(s, c, line, n + 1);
	free(line);
}

/* Send a JSON-RPC error; @p id may be NULL (then "id": null). */
static void send_error(struct sg_ctl_server *s, struct conn *c, json_t *id, int code,
		       const char *msg)
{
	send_json(s, c,
		  json_pack("{s:s, s:O?, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
			    id ? id : json_null(), "error", "code", code, "message", msg));
}

static int hex_nonce_response(struct sg_ctl_server *s, const struct conn *c, const char *hex)
{
	uint8_t got[crypto_auth_hmacsha256_BYTES];
	char want_hex[2 * crypto_auth_hmacsha256_BYTES + 1];
	uint8_t want[crypto_auth_hmacsha256_BYTES];
	size_t got_len = 0;
	int rc;

	if (hex == NULL ||
	    sodium_hex2bin(got, sizeof(got), hex, strlen(hex), NULL, &got_len, NULL) != 0 ||
	    got_len != sizeof(got) || strlen(hex) != 2 * sizeof(got))
		return -EINVAL;
	sg_ctl_auth_response(s->secret, s->cfg.secret_len, c->nonce, sizeof(c->nonce), want_hex);
	sodium_hex2bin(want, sizeof(want), want_hex, strlen(want_hex), NULL, NULL, NULL);
	/* Constant time: the comparison leaks nothing about how much matched. */
	rc = sodium_memcmp(got, want, sizeof(got)) == 0 ? 0 : -EACCES;
	sodium_memzero(want, sizeof(want));
	return rc;
}

static void handle_auth(struct sg_ctl_server *s, struct conn *c, json_t *id, json_t *params)
{
	const char *resp = NULL;
	json_error_t jerr;

	if (c->kind == CONN_UNIX) {
		/* File permissions already decided; accept the call for symmetry. */
		send_json(s, c, json_pack("{s:s, s:O, s:{s:b}}", "jsonrpc", "2.0", "id", id,
					  "result", "authenticated", 1));
		return;
	}
	if (c->authed || params == NULL ||
	    json_unpack_ex(params, &jerr, JSON_STRICT, "{s:s}", "response", &resp) != 0 ||
	    hex_nonce_response(s, c, resp) != 0) {
		SRV_COUNT(s, auth_failed);
		SG_CTL_LOG(WARNING, "TCP client failed authentication; closing");
		send_error(s, c, id, SG_CTL_ERR_AUTH_FAILED, "authentication failed");
		c->closing = true;
		return;
	}
	c->authed = true;
	/* One nonce answers one connection once: forget it. */
	sodium_memzero(c->nonce, sizeof(c->nonce));
	SRV_COUNT(s, auth_ok);
	send_json(s, c,
		  json_pack("{s:s, s:O, s:{s:b}}", "jsonrpc", "2.0", "id", id, "result",
			    "authenticated", 1));
}

/* One complete request line. */
static void handle_frame(struct sg_ctl_server *s, struct conn *c, const char *line, size_t len)
{
	json_error_t jerr;
	json_t *req, *id = NULL, *params = NULL, *result = NULL;
	const char *method = NULL, *ver = NULL;
	struct sg_rpc_err err = {0};
	int rc;

	/* Any JSON value parses: valid JSON that is not a request object is an invalid
	 * request (-32600), not a parse error. */
	req = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (req == NULL) {
		SRV_COUNT(s, malformed);
		send_error(s, c, NULL, SG_CTL_ERR_PARSE, "parse error: not valid JSON");
		if (!c->authed)
			c->closing = true;
		return;
	}
	if (json_unpack_ex(req, &jerr, 0, "{s:s, s:s, s?o, s?o}", "jsonrpc", &ver, "method",
			   &method, "id", &id, "params", &params) != 0 ||
	    strcmp(ver, "2.0") != 0 ||
	    (id != NULL && !json_is_integer(id) && !json_is_string(id) && !json_is_null(id)) ||
	    (params != NULL && !json_is_object(params) && !json_is_array(params))) {
		SRV_COUNT(s, malformed);
		send_error(s, c, NULL, SG_CTL_ERR_INVALID_REQUEST,
			   "invalid request: want a JSON-RPC 2.0 object with \"method\"");
		if (!c->authed)
			c->closing = true;
		json_decref(req);
		return;
	}
	SRV_COUNT(s, requests);
	if (strcmp(method, "auth") == 0) {
		handle_auth(s, c, id ? id : json_null(), params);
		json_decref(req);
		return;
	}
	if (!c->authed) {
		SRV_COUNT(s, unauthenticated);
		send_error(s, c, id, SG_CTL_ERR_UNAUTHENTICATED,
			   "unauthenticated: answer the auth_challenge first");
		c->closing = true;
		json_decref(req);
		return;
	}
	rc = sg_rpc_dispatch(s, method, params, &result, &err);
	if (rc == -ENOENT) {
		SRV_COUNT(s, unknown_method);
		snprintf(err.msg, sizeof(err.msg), "method not found: %.64s", method);
		err.code = SG_CTL_ERR_METHOD_NOT_FOUND;
	} else if (rc != 0) {
		SRV_COUNT(s, method_errors);
	}
	/* A notification (no id) gets no answer, per JSON-RPC 2.0. */
	if (id != NULL) {
		if (rc == 0)
			send_json(s, c, json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id,
						  "result", result));
		else
			send_error(s, c, id, err.code, err.msg);
	} else {
		json_decref(result);
	}
	json_decref(req);
}

/* Whether the @p n bytes at @p v can begin an HTTP version "HTTP/d.d" (all of it if
 * @p whole). */
static bool http_version_ok(const char *v, size_t n, bool whole)
{
	static const char pat[] = "HTTP/0.0";

	if (n > sizeof(pat) - 1 || (whole && n != sizeof(pat) - 1))
		return false;
	for (size_t k = 0; k < n; k++)
		if (k == 5 || k == 7 ? v[k] < '0' || v[k] > '9' : v[k] != pat[k])
			return false;
	return true;
}

/*
 * How far the @p len bytes of an HTTP request at @p in (NUL-terminated) go:
 * 1 once its head is complete, 0 while more may come, -1 as soon as they
 * cannot be an HTTP/1.x request: a NUL or another control byte, or a request
 * line that is not "METHOD SP target SP HTTP/d.d" with an upper-case method.
 * Garbage gets its 400 at once instead of holding the connection until a
 * timeout.
 */
static int http_scan(const char *in, size_t len)
{
	const char *eol = memchr(in, '\n', len);
	size_t rl = eol != NULL ? (size_t)(eol - in) : len, ver = 0;
	unsigned int sp = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)in[i];

		if ((ch < 0x20 && ch != '\r' && ch != '\n' && ch != '\t') || ch == 0x7f)
			return -1;
	}
	if (rl > 0 && in[rl - 1] == '\r')
		rl--;
	for (size_t i = 0; i < rl; i++) {
		unsigned char ch = (unsigned char)in[i];

		if (ch == ' ') {
			if (i == 0 || in[i - 1] == ' ' || ++sp > 2)
				return -1;
			ver = i + 1;
		} else if (ch > 0x7e || ch == '\t' || ch == '\r' ||
			   (sp == 0 && (ch < 'A' || ch > 'Z'))) {
			return -1;
		}
	}
	if (sp == 2 ? !http_version_ok(in + ver, rl - ver, eol != NULL) : eol != NULL)
		return -1;
	/* no NUL inside: the C string functions see all of it */
	return strstr(in, "\r\n\r\n") != NULL || strstr(in, "\n\n") != NULL;
}

/* Answer the request in c->in (@p bad: it is not HTTP, see http_scan()) and close. */
static void handle_http(struct sg_ctl_server *s, struct conn *c, bool bad)
{
	char head[512], *body = NULL, *eol;
	const char *status = "200 OK", *msg = NULL;
	size_t blen = 0;
	int n;

	c->in[c->in_len] = '\0';
	eol = strstr(c->in, "\r\n");
	if (eol == NULL)
		eol = strchr(c->in, '\n');
	if (eol != NULL)
		*eol = '\0';
	if (bad) {
		SRV_COUNT(s, http_bad);
		status = "400 Bad Request";
		msg = "not an HTTP/1.x request; only GET /metrics is served\n";
	} else if (strncmp(c->in, "GET ", 4) != 0 && strncmp(c->in, "HEAD ", 5) != 0) {
		SRV_COUNT(s, http_bad);
		status = strncmp(c->in, "POST ", 5) == 0 || strncmp(c->in, "PUT ", 4) == 0
				 ? "405 Method Not Allowed"
				 : "400 Bad Request";
		msg = "only GET /metrics is served\n";
	} else if (strncmp(strchr(c->in, ' ') + 1, "/metrics ", 9) != 0 ||
		   strstr(c->in, " HTTP/1.") == NULL) {
		SRV_COUNT(s, http_bad);
		status = "404 Not Found";
		msg = "only GET /metrics is served\n";
	} else {
		SRV_COUNT(s, metrics_scrapes);
		body = sg_ctl_srv_metrics(s, &blen);
		if (body == NULL) {
			status = "500 Internal Server Error";
			msg = "metrics unavailable\n";
		}
	}
	if (msg != NULL)
		blen = strlen(msg);
	n = snprintf(head, sizeof(head),
		     "HTTP/1.1 %s\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
		     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
		     status, blen);
	conn_send(s, c, head, (size_t)n);
	if (strncmp(c->in, "HEAD ", 5) != 0)
		conn_send(s, c, body ? body : msg, blen);
	free(body);
	c->closing = true;
}

static void conn_read(struct sg_ctl_server *s, struct conn *c, uint64_t now)
{
	for (;;) {
		ssize_t r;
		char *nl;

		if (c->in_len == c->in_cap) {
			/* The buffer holds max_frame bytes and still no end of frame. */
			SRV_COUNT(s, oversized);
			if (c->kind == CONN_HTTP) {
				handle_http(s, c, true);
				return;
			} else {
				char m[96];

				snprintf(m, sizeof(m), "frame larger than %u bytes; closing",
					 s->cfg.max_frame);
				send_error(s, c, NULL, SG_CTL_ERR_OVERSIZED, m);
			}
			c->closing = true;
			return;
		}
		r = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
			/* Peer gone: nothing more to answer. */
			c->closing = true;
			c->out_off = c->out_len;
			return;
		}
		if (r < 0)
			return;
		c->last_rx_ns = now;
		if (c->in_len == 0)
			c->frame_start_ns = now;
		c->in_len += (size_t)r;
		if (c->kind == CONN_HTTP) {
			int st;

			c->in[c->in_len] = '\0'; /* http_scan() reads it as a string too */
			st = http_scan(c->in, c->in_len);
			if (st != 0) {
				handle_http(s, c, st < 0);
				return;
			}
			continue;
		}
		while (!c->closing && (nl = memchr(c->in, '\n', c->in_len)) != NULL) {
			size_t flen = (size_t)(nl - c->in);

			if (flen > 0 && c->in[flen - 1] == '\r')
				flen--;
			if (flen > 0)
				handle_frame(s, c, c->in, flen);
			c->in_len -= (size_t)(nl - c->in) + 1;
			memmove(c->in, nl + 1, c->in_len);
			c->frame_start_ns = c->in_len ? now : 0;
		}
		if (c->closing)
			return;
	}
}

static void conn_write(struct sg_ctl_server *s, struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK) {
				c->closing = true;
				c->out_off = c->out_len;
			}
			return;
		}
		c->out_off += (size_t)w;
	}
	if (c->out_off == c->out_len) {
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};

		c->out_off = c->out_len = 0;
		epoll_ctl(s->epfd, EPOLL_CTL_MOD, c->fd, &ev);
	}
}

static void do_accept(struct sg_ctl_server *s, int lfd, enum conn_kind kind, uint64_t now)
{
	for (;;) {
		struct epoll_event ev = {.events = EPOLLIN};
		struct conn *c;
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			return;
		if (s->n_conns >= s->cfg.max_conns) {
			SRV_COUNT(s, conns_refused);
			close(fd);
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (c != NULL) {
			c->in_cap = kind == CONN_HTTP ? HTTP_MAX_REQ : s->cfg.max_frame + 1;
			c->in = malloc(c->in_cap + 1);
		}
		if (c == NULL || c->in == NULL) {
			if (c != NULL)
				free(c);
			close(fd);
			continue;
		}
		if (kind == CONN_TCP) {
			int one = 1;

			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		}
		c->fd = fd;
		c->kind = kind;
		c->authed = kind == CONN_UNIX; /* the socket's mode bits authenticated it */
		c->created_ns = c->last_rx_ns = now;
		c->next = s->conns;
		s->conns = c;
		s->n_conns++;
		SRV_COUNT(s, conns_accepted);
		ev.data.ptr = c;
		epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev);
		if (kind == CONN_TCP) {
			char hex[2 * SG_CTL_NONCE_LEN + 1];

			/* A fresh random nonce per connection: a recorded answer never fits again. */
			randombytes_buf(c->nonce, sizeof(c->nonce));
			sodium_bin2hex(hex, sizeof(hex), c->nonce, sizeof(c->nonce));
			send_json(s, c,
				  json_pack("{s:s, s:s, s:{s:s, s:s}}", "jsonrpc", "2.0", "method",
					    "auth_challenge", "params", "nonce", hex, "alg",
					    "hmac-sha256"));
		}
	}
}

/* Close connections that are idle, stuck mid-frame, or unauthenticated for too long. */
static void reap(struct sg_ctl_server *s, uint64_t now)
{
	struct conn *c, *next;
	const uint64_t ms = 1000000u;

	for (c = s->conns; c != NULL; c = next) {
		bool late;

		next = c->next;
		if (c->closing) {
			if (c->out_off == c->out_len || now - c->last_rx_ns > 1000 * ms)
				conn_free(s, c);
			continue;
		}
		late = now - c->last_rx_ns > s->cfg.idle_timeout_ms * ms ||
		       (c->frame_start_ns && now - c->frame_start_ns > s->cfg.frame_timeout_ms * ms) ||
		       (!c->authed && now - c->created_ns > s->cfg.auth_timeout_ms * ms);
		if (late) {
			SRV_COUNT(s, timeouts);
			conn_free(s, c);
		}
	}
}

static void *server_main(void *arg)
{
	struct sg_ctl_server *s = arg;
	struct epoll_event evs[32];
	uint32_t tick = s->cfg.frame_timeout_ms / 4;

	if (s->cfg.auth_timeout_ms / 4 < tick)
		tick = s->cfg.auth_timeout_ms / 4;
	if (tick > 100)
		tick = 100;
	if (tick < 5)
		tick = 5;
	for (;;) {
		int i, n = epoll_wait(s->epfd, evs, 32, (int)tick);
		uint64_t now = sg_ctl_now_ns();

		for (i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;
			struct conn *c = p;

			if (p == &tag_stop)
				return NULL;
			if (p == &tag_tcp) {
				do_accept(s, s->tcp_fd, CONN_TCP, now);
				continue;
			}
			if (p == &tag_unix) {
				do_accept(s, s->unix_fd, CONN_UNIX, now);
				continue;
			}
			if (p == &tag_http) {
				do_accept(s, s->http_fd, CONN_HTTP, now);
				continue;
			}
			if (p == &tag_cluster) {
				uint64_t v;

				/* the watch saw a change: read its count, then look */
				while (read(sg_etcd_watch_fd(s->cl.w), &v, sizeof(v)) == sizeof(v))
					;
				sg_ctl_cluster_reconcile(s);
				continue;
			}
			if (evs[i].events & EPOLLOUT)
				conn_write(s, c);
			if ((evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->closing)
				conn_read(s, c, now);
			if (c->closing && c->out_off < c->out_len)
				conn_write(s, c);
			if (c->closing && c->out_off >= c->out_len)
				conn_free(s, c);
		}
		reap(s, now);
		sg_ctl_members_check(s->members, now);
		if (s->cl.retry)
			sg_ctl_cluster_reconcile(s);
	}
	return NULL;
}

static int listen_inet(const char *addr, uint16_t port, uint16_t *bound)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	socklen_t sl = sizeof(sa);
	int fd, one = 1;

	if (sg_ipv4_parse(addr, &sa.sin_addr.s_addr) != 0) {
		SG_CTL_LOG(ERR, "listen address '%s' is not an IPv4 address", addr);
		return -EINVAL;
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 64) != 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
		int e = -errno;

		SG_CTL_LOG(ERR, "cannot listen on %s:%u: %s", addr, port, strerror(-e));
		close(fd);
		return e;
	}
	*bound = ntohs(sa.sin_port);
	return fd;
}

static int listen_unix(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	mode_t old;
	int fd, rc;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		SG_CTL_LOG(ERR, "unix socket path too long (max %zu): %s", sizeof(sa.sun_path) - 1,
			   path);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	unlink(path);
	/* Created 0600 from the start: no window where others could connect. */
	old = umask(0177);
	rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc != 0 || chmod(path, 0600) != 0 || listen(fd, 64) != 0) {
		int e = -errno;

		SG_CTL_LOG(ERR, "cannot listen on unix socket %s: %s", path, strerror(-e));
		close(fd);
		return e;
	}
	return fd;
}

static int epoll_add(int epfd, int fd, void *tag)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = tag};

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : -errno;
}

static int check_config(const struct sg_ctl_server_config *cfg)
{
	if (cfg->ops == NULL) {
		SG_CTL_LOG(ERR, "server config: the agent ops table is required");
		return -EINVAL;
	}
	if (!cfg->tcp_disable && (cfg->secret == NULL || cfg->secret_len < 16)) {
		SG_CTL_LOG(ERR, "server config: TCP needs a shared secret of at least 16 bytes "
				"(or disable TCP and use the unix socket)");
		return -EINVAL;
	}
	if (cfg->tcp_disable && cfg->unix_path == NULL && !cfg->metrics_enable) {
		SG_CTL_LOG(ERR, "server config: no listener enabled");
		return -EINVAL;
	}
	if (cfg->max_frame > (64u << 20)) {
		SG_CTL_LOG(ERR, "server config: max_frame over 64 MiB");
		return -EINVAL;
	}
	return 0;
}

struct sg_ctl_server *sg_ctl_server_create(const struct sg_ctl_server_config *cfg)
{
	struct sg_ctl_server *s;
	int rc;

	if (cfg == NULL || check_config(cfg) != 0 || sg_rpc_methods_check() != 0) {
		errno = EINVAL;
		return NULL;
	}
	if (sodium_init() < 0) {
		errno = EIO;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return NULL;
	s->epfd = s->stop_fd = s->tcp_fd = s->unix_fd = s->http_fd = -1;
	s->cfg = *cfg;
#define DEFAULT(f, v) \
	if (s->cfg.f == 0) \
	s->cfg.f = (v)
	DEFAULT(max_frame, 65536);
	DEFAULT(max_conns, 64);
	DEFAULT(idle_timeout_ms, 30000);
	DEFAULT(frame_timeout_ms, 5000);
	DEFAULT(auth_timeout_ms, 5000);
	DEFAULT(heartbeat_timeout_ms, 3000);
#undef DEFAULT
	/* The caller's strings are used below, never kept. */
	s->cfg.tcp_addr = s->cfg.metrics_addr = NULL;
	rc = -ENOMEM;
	if (cfg->secret_len) {
		s->secret = malloc(cfg->secret_len);
		if (s->secret == NULL)
			goto fail;
		memcpy(s->secret, cfg->secret, cfg->secret_len);
	}
	s->cfg.secret = NULL;
	s->members = sg_ctl_members_create(s->cfg.heartbeat_timeout_ms * 1000000u, 1024, 0,
					   NULL, NULL);
	if (s->members == NULL)
		goto fail;
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->epfd < 0 || s->stop_fd < 0) {
		rc = -errno;
		goto fail;
	}
	if ((rc = epoll_add(s->epfd, s->stop_fd, &tag_stop)) != 0)
		goto fail;
	if (!cfg->tcp_disable) {
		rc = s->tcp_fd = listen_inet(cfg->tcp_addr && cfg->tcp_addr[0] ? cfg->tcp_addr
									  : "127.0.0.1",
					     cfg->tcp_port, &s->tcp_port);
		if (rc < 0 || (rc = epoll_add(s->epfd, s->tcp_fd, &tag_tcp)) != 0)
			goto fail;
	}
	if (cfg->unix_path != NULL) {
		s->unix_path = strdup(cfg->unix_path);
		rc = s->unix_fd = listen_unix(cfg->unix_path);
		if (rc < 0 || (rc = epoll_add(s->epfd, s->unix_fd, &tag_unix)) != 0)
			goto fail;
	}
	s->cfg.unix_path = NULL;
	if (cfg->metrics_enable) {
		rc = s->http_fd = listen_inet(cfg->metrics_addr && cfg->metrics_addr[0]
						      ? cfg->metrics_addr
						      : "127.0.0.1",
					      cfg->metrics_port, &s->http_port);
		if (rc < 0 || (rc = epoll_add(s->epfd, s->http_fd, &tag_http)) != 0)
			goto fail;
	}
	if (cfg->etcd != NULL) {
		rc = sg_ctl_cluster_start(s, cfg->etcd, cfg->cluster);
		if (rc < 0 ||
		    (rc = epoll_add(s->epfd, sg_etcd_watch_fd(s->cl.w), &tag_cluster)) != 0)
			goto fail;
	}
	s->cfg.etcd = NULL;
	s->cfg.cluster = NULL;
	rc = -pthread_create(&s->thread, NULL, server_main, s);
	if (rc != 0)
		goto fail;
	s->thread_started = true;
	pthread_setname_np(s->thread, "sigma-ctl");
	SG_CTL_LOG(INFO, "control server up (tcp port %u, unix %s, metrics port %u)", s->tcp_port,
		   s->unix_path ? s->unix_path : "-", s->http_port);
	return s;
fail:
	sg_ctl_server_destroy(s);
	errno = rc < 0 ? -rc : EINVAL;
	return NULL;
}

void sg_ctl_server_destroy(struct sg_ctl_server *s)
{
	unsigned int i;

	if (s == NULL)
		return;
	if (s->thread_started) {
		uint64_t one = 1;

		if (write(s->stop_fd, &one, sizeof(one)) != sizeof(one))
			SG_CTL_LOG(ERR, "cannot wake the control thread");
		pthread_join(s->thread, NULL);
	}
	sg_ctl_cluster_stop(s);
	while (s->conns != NULL)
		conn_free(s, s->conns);
	if (s->tcp_fd >= 0)
		close(s->tcp_fd);
	if (s->http_fd >= 0)
		close(s->http_fd);
	if (s->unix_fd >= 0) {
		close(s->unix_fd);
		unlink(s->unix_path);
	}
	if (s->epfd >= 0)
		close(s->epfd);
	if (s->stop_fd >= 0)
		close(s->stop_fd);
	for (i = 0; i < SG_CTL_MAX_JOBS; i++)
		free(s->jobs[i].tensors);
	sg_ctl_members_destroy(s->members);
	if (s->secret != NULL) {
		sodium_memzero(s->secret, s->cfg.secret_len);
		free(s->secret);
	}
	free(s->unix_path);
	free(s);
}

uint16_t sg_ctl_server_tcp_port(const struct sg_ctl_server *s)
{
	return s ? s->tcp_port : 0;
}

uint16_t sg_ctl_server_metrics_port(const struct sg_ctl_server *s)
{
	return s ? s->http_port : 0;
}
