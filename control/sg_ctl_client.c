/* SPDX-License-Identifier: BSD-3-Clause */
/* Blocking JSON-RPC client of the control server (sigmactl, tests, other tools). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "sg_ctl_client.h"
#include "sg_err.h"
#include "sg_version.h"

/* Largest answer accepted (a detailed placement of a big job is the largest). */
#define REPLY_MAX (64u << 20)

struct sg_ctl_client {
	int fd;
	uint32_t timeout_ms;
	json_int_t next_id;
	char *buf;
	size_t len, cap;
};

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Read one line (without '\n') into a malloc'd string. */
static int read_line(struct sg_ctl_client *c, char **line)
{
	int64_t deadline = mono_ms() + c->timeout_ms;

	for (;;) {
		char *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
		struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
		int64_t left;
		ssize_t r;

		if (nl != NULL) {
			size_t n = (size_t)(nl - c->buf);

			*line = strndup(c->buf, n);
			c->len -= n + 1;
			memmove(c->buf, nl + 1, c->len);
			return *line ? 0 : -ENOMEM;
		}
		if (c->len == c->cap) {
			size_t ncap = c->cap ? c->cap * 2 : 65536;
			char *nb;

			if (ncap > REPLY_MAX)
				return -EPROTO;
			nb = realloc(c->buf, ncap);
			if (nb == NULL)
				return -ENOMEM;
			c->buf = nb;
			c->cap = ncap;
		}
		left = deadline - mono_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		r = poll(&pfd, 1, (int)left);
		if (r == 0)
			return -ETIMEDOUT;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		r = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
		if (r == 0)
			return -ECONNRESET;
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		c->len += (size_t)r;
	}
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

uint64_t sg_ctl_wire_token(const char *token)
{
	uint64_t wire = 0;

	for (int i = 0; i < 16; i++)
		wire = wire << 4 | (uint64_t)(token[i] <= '9' ? token[i] - '0' :
					      (token[i] | 0x20) - 'a' + 10);
	return wire;
}

bool sg_ctl_target_is_tcp(const char *target)
{
	return strncmp(target, "tcp:", 4) == 0 ||
	       (strncmp(target, "unix:", 5) != 0 && strchr(target, '/') == NULL);
}

static int connect_target(const char *target, bool *is_tcp)
{
	const char *rest = target;
	int fd;

	if (!sg_ctl_target_is_tcp(target)) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};

		if (strncmp(target, "unix:", 5) == 0)
			rest += 5;
		if (strlen(rest) >= sizeof(sa.sun_path) || rest[0] == '\0')
			return -EINVAL;
		strcpy(sa.sun_path, rest);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			int e = -errno;

			close(fd);
			return e;
		}
		*is_tcp = false;
		return fd;
	}
	{
		char host[256], *colon;
		struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
		int rc;

		if (strncmp(target, "tcp:", 4) == 0)
			rest += 4;
		if (strlen(rest) >= sizeof(host))
			return -EINVAL;
		strcpy(host, rest);
		colon = strrchr(host, ':');
		if (colon == NULL || colon == host || colon[1] == '\0')
			return -EINVAL;
		*colon = '\0';
		rc = getaddrinfo(host, colon + 1, &hints, &ai);
		if (rc != 0)
			return -EHOSTUNREACH;
		fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			freeaddrinfo(ai);
			return -errno;
		}
		rc = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : -errno;
		freeaddrinfo(ai);
		if (rc != 0) {
			close(fd);
			return rc;
		}
		rc = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &rc, sizeof(rc));
		*is_tcp = true;
		return fd;
	}
}

/* Answer the server's auth_challenge. */
static int authenticate(struct sg_ctl_client *c, const uint8_t *secret, size_t secret_len)
{
	uint8_t nonce[SG_CTL_NONCE_LEN];
	char hex[65], *line = NULL, *res = NULL, *emsg = NULL, params[128];
	const char *nhex;
	json_t *j;
	size_t nlen = 0;
	int rc;

	rc = read_line(c, &line);
	if (rc != 0)
		return rc;
	j = json_loads(line, 0, NULL);
	free(line);
	if (j == NULL || json_unpack(j, "{s:{s:s}}", "params", "nonce", &nhex) != 0 ||
	    sodium_hex2bin(nonce, sizeof(nonce), nhex, strlen(nhex), NULL, &nlen, NULL) != 0 ||
	    nlen != sizeof(nonce)) {
		json_decref(j);
		return -EPROTO;
	}
	json_decref(j);
	if (secret == NULL)
		return -EACCES;
	sg_ctl_auth_response(secret, secret_len, nonce, sizeof(nonce), hex);
	snprintf(params, sizeof(params), "{\"response\":\"%s\"}", hex);
	rc = sg_ctl_client_call(c, "auth", params, &res, &emsg);
	free(res);
	free(emsg);
	return rc == -EREMOTEIO ? -EACCES : rc;
}

struct sg_ctl_client *sg_ctl_client_connect(const char *target, const uint8_t *secret,
					    size_t secret_len, uint32_t timeout_ms)
{
	struct sg_ctl_client *c;
	bool tcp = false;
	int fd, rc;

	if (target == NULL || timeout_ms == 0) {
		errno = EINVAL;
		return NULL;
	}
	if (sodium_init() < 0) {
		errno = EIO;
		return NULL;
	}
	fd = connect_target(target, &tcp);
	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		close(fd);
		return NULL;
	}
	c->fd = fd;
	c->timeout_ms = timeout_ms;
	c->next_id = 1;
	if (tcp && (rc = authenticate(c, secret, secret_len)) != 0) {
		sg_ctl_client_close(c);
		errno = -rc;
		return NULL;
	}
	return c;
}

void sg_ctl_client_close(struct sg_ctl_client *c)
{
	if (c == NULL)
		return;
	close(c->fd);
	free(c->buf);
	free(c);
}

int sg_ctl_client_call(struct sg_ctl_client *c, const char *method, const char *params_json,
		       char **result_json, char **err_msg)
{
	json_t *req, *params = NULL, *ans = NULL, *res, *err;
	json_int_t id;
	char *text, *line = NULL;
	int rc;

	if (result_json != NULL)
		*result_json = NULL;
	if (err_msg != NULL)
		*err_msg = NULL;
	if (c == NULL || method == NULL)
		return -EINVAL;
	if (params_json != NULL) {
		params = json_loads(params_json, 0, NULL);
		if (params == NULL || (!json_is_object(params) && !json_is_array(params))) {
			json_decref(params);
			return -EINVAL;
		}
	}
	id = c->next_id++;
	req = json_pack("{s:s, s:I, s:s}", "jsonrpc", "2.0", "id", id, "method", method);
	if (params != NULL)
		json_object_set_new(req, "params", params);
	text = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	if (text == NULL || asprintf(&line, "%s\n", text) < 0) {
		free(text);
		return -ENOMEM;
	}
	free(text);
	/* The whole frame in one send, so Nagle never holds back its end. */
	rc = send_all(c->fd, line, strlen(line));
	free(line);
	line = NULL;
	if (rc != 0)
		return rc == -EPIPE ? -ECONNRESET : rc;
	/* Skip notifications; the answer is the first object with our id. */
	for (;;) {
		json_t *jid;

		rc = read_line(c, &line);
		if (rc != 0)
			return rc;
		ans = json_loads(line, 0, NULL);
		free(line);
		if (ans == NULL)
			return -EPROTO;
		jid = json_object_get(ans, "id");
		if (json_is_integer(jid) && json_integer_value(jid) == id)
			break;
		if (json_is_null(jid) && json_object_get(ans, "error") != NULL)
			break; /* the server could not tell which request failed */
		json_decref(ans);
	}
	res = json_object_get(ans, "result");
	err = json_object_get(ans, "error");
	if (err != NULL) {
		if (err_msg != NULL &&
		    asprintf(err_msg, "%s (%" JSON_INTEGER_FORMAT ")",
			     json_string_value(json_object_get(err, "message"))
				     ?: "unknown error",
			     json_integer_value(json_object_get(err, "code"))) < 0)
			*err_msg = NULL;
		rc = -EREMOTEIO;
	} else if (res == NULL) {
		rc = -EPROTO;
	} else if (result_json != NULL) {
		*result_json = json_dumps(res, JSON_COMPACT | JSON_ENCODE_ANY);
		rc = *result_json ? 0 : -ENOMEM;
	}
	json_decref(ans);
	return rc;
}

int sg_ctl_secret_load(const char *path, bool private_file, uint8_t buf[SG_CTL_SECRET_MAX],
		       size_t *len, char *err, size_t errlen)
{
	uint8_t tmp[SG_CTL_SECRET_MAX + 2]; /* room for the secret, a CR LF, and one more */
	struct stat sb;
	size_t n = 0;
	ssize_t r = 0;
	bool too_long = false;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return sg_err(err, errlen, -EINVAL, "secret_file %s: %s", path, strerror(errno));
	if (private_file && (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))) {
		close(fd);
		return sg_err(err, errlen, -EINVAL, "secret_file %s: not a regular file", path);
	}
	if (private_file && (sb.st_mode & 077)) {
		close(fd);
		return sg_err(err, errlen, -EINVAL, "secret_file %s is readable by others (mode %03o); "
					    "run: chmod 600 %s", path,
			       (unsigned int)(sb.st_mode & 0777), path);
	}
	/* A pipe may deliver the file in pieces: read to the end or past the limit. */
	while (n < sizeof(tmp) && (r = read(fd, tmp + n, sizeof(tmp) - n)) > 0)
		n += (size_t)r;
	if (r >= 0 && n == sizeof(tmp)) {
		uint8_t more;

		r = read(fd, &more, 1);
		too_long = r > 0;
	}
	if (r < 0) {
		int e = errno;

		close(fd);
		return sg_err(err, errlen, -EINVAL, "secret_file %s: %s", path, strerror(e));
	}
	close(fd);
	/* A trailing newline from an editor or echo is not part of the secret. */
	while (n > 0 && (tmp[n - 1] == '\n' || tmp[n - 1] == '\r'))
		n--;
	if (too_long || n > SG_CTL_SECRET_MAX) {
		explicit_bzero(tmp, sizeof(tmp));
		return sg_err(err, errlen, -EINVAL, "secret_file %s: more than %d bytes of secret; every "
					    "side must use the same key, so it is refused, not cut",
			       path, SG_CTL_SECRET_MAX);
	}
	memcpy(buf, tmp, n);
	explicit_bzero(tmp, sizeof(tmp));
	*len = n;
	return 0;
}

int sg_ctl_auth_response(const uint8_t *secret, size_t secret_len, const uint8_t *nonce,
			 size_t nonce_len, char *hex)
{
	crypto_auth_hmacsha256_state st;
	uint8_t mac[crypto_auth_hmacsha256_BYTES];

	if (secret == NULL || nonce == NULL || hex == NULL)
		return -EINVAL;
	if (sodium_init() < 0)
		return -EIO;
	crypto_auth_hmacsha256_init(&st, secret, secret_len);
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)SG_CTL_AUTH_CONTEXT,
				      sizeof(SG_CTL_AUTH_CONTEXT) - 1);
	crypto_auth_hmacsha256_update(&st, nonce, nonce_len);
	crypto_auth_hmacsha256_final(&st, mac);
	sodium_bin2hex(hex, 2 * sizeof(mac) + 1, mac, sizeof(mac));
	sodium_memzero(mac, sizeof(mac));
	return 0;
}

int sg_ctl_version_check(struct sg_ctl_client *c, struct sg_ctl_version *v, char *err,
			 size_t errlen)
{
	struct sg_ctl_version got = {.api = 0};
	char *out = NULL, *msg = NULL;
	const char *rel = NULL;
	json_t *r = NULL;
	int rc = sg_ctl_client_call(c, "version", NULL, &out, &msg);

	if (rc == -EREMOTEIO && msg != NULL && strstr(msg, "(-32601)") != NULL)
		rc = sg_err(err, errlen, -EPROTONOSUPPORT, "the node has no 'version' method: it "
				"is older than this client (release %s, control API %d, wire protocol "
				"%d): upgrade the node", SG_VERSION_STRING, SG_API_VERSION,
				SG_PROTO_VERSION);
	else if (rc == -EREMOTEIO)
		rc = sg_err(err, errlen, rc, "version: %s", msg ? msg : "refused");
	else if (rc != 0)
		rc = sg_err(err, errlen, rc, "version: %s", strerror(-rc));
	else if ((r = json_loads(out, JSON_DECODE_ANY, NULL)) == NULL ||
		 json_unpack(r, "{s:s, s:i, s:i}", "release", &rel, "api", &got.api, "protocol",
			     &got.protocol) != 0)
		rc = sg_err(err, errlen, -EPROTO, "version: the answer has no release, api and "
				"protocol: not a Sigma node?");
	if (rc == 0) {
		snprintf(got.release, sizeof(got.release), "%s", rel);
		if (got.api != SG_API_VERSION || got.protocol != SG_PROTO_VERSION)
			rc = sg_err(err, errlen, -EPROTONOSUPPORT, "the node (release %.31s) speaks "
					"control API %d and wire protocol %d, this client (release %s) "
					"API %d and protocol %d: run a node and clients of the same "
					"versions (sigmad --version)", got.release, got.api,
					got.protocol, SG_VERSION_STRING, SG_API_VERSION,
					SG_PROTO_VERSION);
	}
	if (v != NULL)
		*v = got;
	json_decref(r);
	free(out);
	free(msg);
	return rc;
}
