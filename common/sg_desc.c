/* SPDX-License-Identifier: BSD-3-Clause */
/* The job descriptor (sg_desc.h): a strict parser and its writer. */
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sg_parse.h"
#include "sg_types.h"

#include "sg_desc.h"
#include "sg_err.h"

/* A refusal: "job descriptor: " and the reason (sg_err()). @return -EINVAL. */
#define bad(err, errlen, fmt, ...) \
	sg_err(err, errlen, -EINVAL, "job descriptor: " fmt, ##__VA_ARGS__)

int sg_desc_check_name(const char *name)
{
	size_t n = name != NULL ? strlen(name) : 0;

	if (n == 0 || n >= SG_NAME_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return -EINVAL;
	}
	return 0;
}

/* node=NAME,ADDR,PORT,KIND,GBPS,WEIGHT (@p v is writable). */
static int parse_node(char *v, struct sg_desc_node *nd, unsigned int i, char *err, size_t errlen)
{
	char *f[6];
	unsigned int n = 0;
	uint64_t port;

	/* strtok_r would fold empty fields: split by hand */
	for (char *p = v;; p++) {
		if (n == 6)
			return bad(err, errlen, "node %u: more than 6 fields (want "
				   "NAME,ADDR,PORT,KIND,GBPS,WEIGHT)", i);
		f[n++] = p;
		p = strchr(p, ',');
		if (p == NULL)
			break;
		*p = '\0';
	}
	if (n != 6)
		return bad(err, errlen, "node %u: %u fields, want 6: NAME,ADDR,PORT,KIND,GBPS,WEIGHT",
			   i, n);
	if (sg_desc_check_name(f[0]) != 0)
		return bad(err, errlen, "node %u: name '%.64s' must be 1..%d of A-Z a-z 0-9 . _ -", i,
			   f[0], SG_NAME_MAX - 1);
	if (sg_ipv4_parse(f[1], NULL) != 0)
		return bad(err, errlen, "node %u ('%s'): address '%.32s' is not a dotted-quad IPv4 "
			   "address", i, f[0], f[1]);
	if (sg_parse_u64(f[2], 1, 65535, &port) != 0)
		return bad(err, errlen, "node %u ('%s'): UDP port '%.16s' is not 1..65535", i, f[0],
			   f[2]);
	if (sg_node_kind_from_name(f[3], &nd->kind) != 0)
		return bad(err, errlen, "node %u ('%s'): kind '%.16s' is not cpu or gpu", i, f[0],
			   f[3]);
	/* no sign (docs/control.md): "-0" is a number >= 0 for sg_parse_double() */
	if (f[4][0] == '-' || sg_parse_double(f[4], 0, DBL_MAX, &nd->gbps) != 0 || !(nd->gbps > 0))
		return bad(err, errlen, "node %u ('%s'): gbps '%.32s' is not a positive number", i,
			   f[0], f[4]);
	if (f[5][0] == '-' || sg_parse_double(f[5], 0, DBL_MAX, &nd->weight) != 0)
		return bad(err, errlen, "node %u ('%s'): weight '%.32s' is not a number >= 0", i,
			   f[0], f[5]);
	snprintf(nd->name, sizeof(nd->name), "%s", f[0]);
	snprintf(nd->addr, sizeof(nd->addr), "%s", f[1]);
	nd->port = (uint16_t)port;
	return 0;
}

enum { K_ID, K_WORKERS, K_TOKEN, K_DTYPE, K_MODE, K_PART, K_CHUNK, K_NODE, K_AUTH, K_KEY_ID,
       K_RANK, K_KEYS, K_COUNT };

static const char *const key_names[K_COUNT] = {
	"id", "workers", "token", "dtype", "mode", "partition_bytes", "chunk_bytes", "node",
	"auth", "key_id", "rank", "keys",
};

/* Fields a descriptor may lack: mode (sync), and auth's, which check_whole() ties together. */
#define K_OPTIONAL ((1u << K_MODE) | (1u << K_AUTH) | (1u << K_KEY_ID) | (1u << K_RANK) | \
		    (1u << K_KEYS))

/* @p n bytes from 2n lower- or upper-case hex digits. @return 0 or -EINVAL. */
static int parse_hex(const char *s, uint8_t *out, size_t n)
{
	if (strlen(s) != 2 * n)
		return -EINVAL;
	for (size_t i = 0; i < 2 * n; i++) {
		char c = s[i];
		int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
			c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;

		if (v < 0)
			return -EINVAL;
		out[i / 2] = (uint8_t)(i % 2 ? (out[i / 2] | v) : v << 4);
	}
	return 0;
}

/* One key=value field (@p val is writable). */
static int parse_field(struct sg_desc *d, unsigned int k, char *val, char *err, size_t errlen)
{
	uint64_t v;

	switch (k) {
	case K_ID:
		if (sg_parse_u64(val, 1, UINT32_MAX, &v) != 0)
			return bad(err, errlen, "id '%.24s' is not 1..4294967295", val);
		d->id = (uint32_t)v;
		return 0;
	case K_WORKERS:
		if (sg_parse_u64(val, 1, SG_MAX_WORKERS, &v) != 0)
			return bad(err, errlen, "workers '%.24s' is not 1..%d", val, SG_MAX_WORKERS);
		d->workers = (uint32_t)v;
		return 0;
	case K_TOKEN: {
		char hex[2 + 16 + 1];

		snprintf(hex, sizeof(hex), "0x%s", val);
		if (strlen(val) != 16 || sg_parse_u64x(hex, 0, UINT64_MAX, &d->token) != 0)
			return bad(err, errlen, "token '%.24s' is not 16 hex digits (the job's 64-bit "
				   "wire token)", val);
		return 0;
	}
	case K_DTYPE:
		/* any: an open job whose keys each take the dtype of their first push */
		if (sg_job_dtype_from_name(val, &d->dtype) != 0)
			return bad(err, errlen, "dtype '%.24s' is not fp32, fp64, fp16, bf16, int32, "
				   "int64, int8, uint8 or any", val);
		return 0;
	case K_MODE:
		if (sg_mode_from_name(val, &d->mode) != 0)
			return bad(err, errlen, "mode '%.24s' is not sync, async or deterministic",
				   val);
		return 0;
	case K_PART:
		if (sg_parse_u64(val, 8, SG_MAX_PARTITION_BYTES, &v) != 0 || v % 8 != 0)
			return bad(err, errlen, "partition_bytes '%.24s' is not a multiple of 8 in "
				   "8..%u", val, SG_MAX_PARTITION_BYTES);
		d->partition_bytes = (uint32_t)v;
		return 0;
	case K_CHUNK:
		if (sg_parse_u64(val, 8, SG_MAX_CHUNK_BYTES, &v) != 0 || v % 8 != 0)
			return bad(err, errlen, "chunk_bytes '%.24s' is not a multiple of 8 in 8..%d",
				   val, SG_MAX_CHUNK_BYTES);
		d->chunk_bytes = (uint32_t)v;
		return 0;
	case K_AUTH:
		if (strcmp(val, "mac") != 0)
			return bad(err, errlen, "auth '%.24s' is not mac (authenticated datagrams; a "
				   "job without them has no auth= field)", val);
		d->auth = true;
		return 0;
	case K_KEY_ID: {
		uint8_t b[4];

		if (parse_hex(val, b, sizeof(b)) != 0)
			return bad(err, errlen, "key_id '%.24s' is not 8 hex digits", val);
		d->key_id = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
		return 0;
	}
	case K_RANK:
		if (sg_parse_u64(val, 0, SG_MAX_WORKERS - 1, &v) != 0)
			return bad(err, errlen, "rank '%.24s' is not 0..%d", val, SG_MAX_WORKERS - 1);
		d->rank = (uint16_t)v;
		return 0;
	case K_KEYS:
		/* never echoed: the value is a secret */
		if (parse_hex(val, d->keys, sizeof(d->keys)) != 0)
			return bad(err, errlen, "keys is not %zu hex digits (a rank's two keys)",
				   2 * sizeof(d->keys));
		return 0;
	default:
		if (d->n_nodes == SG_MAX_NODES)
			return bad(err, errlen, "more than %d nodes", SG_MAX_NODES);
		return parse_node(val, &d->nodes[d->n_nodes], d->n_nodes, err, errlen) ?:
		       (d->n_nodes++, 0);
	}
}

/* What only the whole descriptor can tell. */
static int check_whole(const struct sg_desc *d, unsigned int seen, char *err, size_t errlen)
{
	double sum = 0;

	bool rank = seen & (1u << K_RANK), keys = seen & (1u << K_KEYS);

	for (unsigned int k = 0; k < K_COUNT; k++)
		if (!(K_OPTIONAL & (1u << k)) && !(seen & (1u << k)))
			return bad(err, errlen, "no %s= field", key_names[k]);
	if (d->auth != !!(seen & (1u << K_KEY_ID)))
		return bad(err, errlen, "auth=mac and key_id= go together");
	if (rank != keys)
		return bad(err, errlen, "rank= and keys= go together (a rank's own descriptor)");
	if (keys && !d->auth)
		return bad(err, errlen, "keys= without auth=mac");
	if (rank && d->rank >= d->workers)
		return bad(err, errlen, "rank %u: the job has %u workers", d->rank, d->workers);
	if (d->chunk_bytes > d->partition_bytes)
		return bad(err, errlen, "chunk_bytes %u is larger than partition_bytes %u",
			   d->chunk_bytes, d->partition_bytes);
	for (unsigned int i = 0; i < d->n_nodes; i++) {
		sum += d->nodes[i].weight;
		for (unsigned int k = 0; k < i; k++)
			if (strcmp(d->nodes[i].name, d->nodes[k].name) == 0)
				return bad(err, errlen, "node '%s' is listed twice", d->nodes[i].name);
	}
	if (!(sum > 0))
		return bad(err, errlen, "every node's weight is 0");
	return 0;
}

/* sg_desc_parse() with its working copy of the text in @p buf (SG_DESC_MAX bytes). */
static int parse_in(const char *text, struct sg_desc *d, char *buf, char *err, size_t errlen)
{
	const char *ws = " \t\r\n";
	unsigned int seen = 0, field = 0;
	size_t len;
	char *p;
	int rc;

	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if (d == NULL)
		return -EINVAL;
	memset(d, 0, sizeof(*d));
	d->mode = SG_MODE_SYNC;
	if (text == NULL)
		return bad(err, errlen, "none given");
	text += strspn(text, ws);
	len = strlen(text);
	while (len > 0 && strchr(ws, text[len - 1]) != NULL)
		len--;
	if (len >= SG_DESC_MAX) {
		bad(err, errlen, "%zu characters: longer than %d", len, SG_DESC_MAX - 1);
		return -E2BIG;
	}
	if (len == 0)
		return bad(err, errlen, "empty");
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)text[i] <= ' ' || (unsigned char)text[i] >= 0x7f)
			return bad(err, errlen, "byte 0x%02x at offset %zu: a descriptor is one line "
				   "of printable ASCII without spaces", (unsigned char)text[i], i);
	memcpy(buf, text, len);
	buf[len] = '\0';
	p = buf;
	for (;;) {
		char *semi = strchr(p, ';'), *eq;
		unsigned int k;

		if (semi != NULL)
			*semi = '\0';
		field++;
		eq = strchr(p, '=');
		if (*p == '\0')
			return bad(err, errlen, "field %u is empty (';' doubled, or at an end)", field);
		if (eq == NULL || eq == p)
			return bad(err, errlen, "field %u ('%.40s') is not key=value", field, p);
		*eq = '\0';
		if (field == 1) {
			if (strcmp(p, "sigma-job") != 0)
				return bad(err, errlen, "it starts with '%.32s=', not 'sigma-job=%d': "
					   "not a Sigma job descriptor", p, SG_DESC_VERSION);
			if (strcmp(eq + 1, "1") != 0)
				return bad(err, errlen, "version '%.16s': this build reads sigma-job=%d",
					   eq + 1, SG_DESC_VERSION);
		} else {
			for (k = 0; k < K_COUNT && strcmp(p, key_names[k]) != 0; k++)
				;
			if (k == K_COUNT)
				return bad(err, errlen, "unknown key '%.32s' (field %u)", p, field);
			if (k != K_NODE && (seen & (1u << k)))
				return bad(err, errlen, "%s= given twice", key_names[k]);
			seen |= 1u << k;
			rc = parse_field(d, k, eq + 1, err, errlen);
			if (rc != 0)
				return rc;
		}
		if (semi == NULL)
			break;
		p = semi + 1;
	}
	d->has_keys = (seen >> K_KEYS) & 1;
	return check_whole(d, seen, err, errlen);
}

int sg_desc_parse(const char *text, struct sg_desc *d, char *err, size_t errlen)
{
	char buf[SG_DESC_MAX];
	int rc = parse_in(text, d, buf, err, errlen);

	/* a rank's descriptor holds its keys: no copy of them is left on the stack */
	explicit_bzero(buf, sizeof(buf));
	if (rc != 0 && d != NULL)
		explicit_bzero(d->keys, sizeof(d->keys));
	return rc;
}

int sg_desc_format(const struct sg_desc *d, char *buf, size_t cap, char *err, size_t errlen)
{
	struct sg_desc back;
	size_t off;
	int n;

	if (d == NULL || buf == NULL)
		return -EINVAL;
	n = snprintf(buf, cap, "sigma-job=%d;id=%" PRIu32 ";workers=%" PRIu32 ";token=%016" PRIx64
		     ";dtype=%s;mode=%s;partition_bytes=%" PRIu32 ";chunk_bytes=%" PRIu32,
		     SG_DESC_VERSION, d->id, d->workers, d->token, sg_dtype_name(d->dtype),
		     sg_mode_name(d->mode), d->partition_bytes, d->chunk_bytes);
	if (n < 0 || (size_t)n >= cap)
		return -ENOSPC;
	off = (size_t)n;
	for (unsigned int i = 0; i < d->n_nodes && i < SG_MAX_NODES; i++) {
		const struct sg_desc_node *nd = &d->nodes[i];

		n = snprintf(buf + off, cap - off, ";node=%s,%s,%u,%s,%.17g,%.17g", nd->name,
			     nd->addr, nd->port, sg_node_kind_name(nd->kind), nd->gbps, nd->weight);
		if (n < 0 || (size_t)n >= cap - off)
			return -ENOSPC;
		off += (size_t)n;
	}
	if (d->auth) {
		n = snprintf(buf + off, cap - off, ";auth=mac;key_id=%08" PRIx32, d->key_id);
		if (n < 0 || (size_t)n >= cap - off)
			return -ENOSPC;
		off += (size_t)n;
	}
	if (d->auth && d->has_keys) {
		n = snprintf(buf + off, cap - off, ";rank=%u;keys=", d->rank);
		if (n < 0 || (size_t)n + 2 * sizeof(d->keys) >= cap - off)
			return -ENOSPC;
		off += (size_t)n;
		for (size_t i = 0; i < sizeof(d->keys); i++)
			off += (size_t)snprintf(buf + off, cap - off, "%02x", d->keys[i]);
	}
	/* what we write must read back: the parser is the definition of the form */
	n = sg_desc_parse(buf, &back, err, errlen);
	explicit_bzero(back.keys, sizeof(back.keys));
	if (n != 0)
		return -EINVAL;
	return (int)off;
}
