/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Topology data model, the text file format (docs/gpu-topology.md) and the
 * path queries that the planner and the checker ask.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "sg_gpu_internal.h"
#include "sg_parse.h"

RTE_LOG_REGISTER(sg_gpu_logtype, sigma.gpu, INFO);

static const char *const kind_names[SG_GPU_NODE_KIND_COUNT] = {
	[SG_GPU_NODE_SOCKET] = "socket", [SG_GPU_NODE_ROOT] = "root",
	[SG_GPU_NODE_SWITCH] = "switch", [SG_GPU_NODE_GPU] = "gpu",
	[SG_GPU_NODE_NIC] = "nic",       [SG_GPU_NODE_NVSWITCH] = "nvswitch",
};

const char *sg_gpu_node_kind_name(enum sg_gpu_node_kind kind)
{
	return (unsigned)kind < SG_GPU_NODE_KIND_COUNT ? kind_names[kind] : "unknown";
}

struct sg_gpu_topo *sg_gpu_topo_new(void)
{
	return calloc(1, sizeof(struct sg_gpu_topo));
}

void sg_gpu_topo_free(struct sg_gpu_topo *t)
{
	free(t);
}

int sg_gpu_topo_find(const struct sg_gpu_topo *t, const char *name)
{
	for (unsigned i = 0; name != NULL && i < t->nnodes; i++)
		if (strcmp(t->nodes[i].name, name) == 0)
			return (int)i;
	return -ENOENT;
}

/* Which parent kinds each kind accepts (bit per kind; 0: no parent). */
static unsigned parent_kinds(enum sg_gpu_node_kind k)
{
	switch (k) {
	case SG_GPU_NODE_ROOT:
		return 1u << SG_GPU_NODE_SOCKET;
	case SG_GPU_NODE_SWITCH:
	case SG_GPU_NODE_GPU:
	case SG_GPU_NODE_NIC:
		return 1u << SG_GPU_NODE_ROOT | 1u << SG_GPU_NODE_SWITCH;
	default:
		return 0;
	}
}

static bool valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= SG_GPU_NAME_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && strchr("_-.:", s[i]) == NULL)
			return false;
	return true;
}

int sg_gpu_topo_add_node(struct sg_gpu_topo *t, enum sg_gpu_node_kind kind, const char *name,
			 int parent, char *err, size_t errlen)
{
	struct sg_gpu_node *n;
	unsigned want;

	if ((unsigned)kind >= SG_GPU_NODE_KIND_COUNT)
		return sg_err(err, errlen, -EINVAL, "unknown node kind %d", (int)kind);
	if (name == NULL || !valid_name(name))
		return sg_err(err, errlen, -EINVAL,
				  "bad name '%s' (1-%d characters of [A-Za-z0-9_.:-])",
				  name ? name : "(null)", SG_GPU_NAME_LEN - 1);
	if (sg_gpu_topo_find(t, name) >= 0)
		return sg_err(err, errlen, -EEXIST, "name '%s' used twice", name);
	want = parent_kinds(kind);
	if (want == 0 && parent >= 0)
		return sg_err(err, errlen, -EINVAL, "a %s has no parent", kind_names[kind]);
	if (want != 0) {
		if (parent < 0 || (unsigned)parent >= t->nnodes)
			return sg_err(err, errlen, -EINVAL, "%s '%s' needs a parent",
					  kind_names[kind], name);
		if (!(want & 1u << t->nodes[parent].kind))
			return sg_err(err, errlen, -EINVAL, "a %s cannot hang off a %s ('%s')",
					  kind_names[kind], kind_names[t->nodes[parent].kind],
					  t->nodes[parent].name);
	}
	if (t->nnodes >= SG_GPU_MAX_NODES)
		return sg_err(err, errlen, -ENOSPC, "more than %d nodes", SG_GPU_MAX_NODES);
	if (kind == SG_GPU_NODE_GPU && t->ngpus >= SG_GPU_MAX_GPUS)
		return sg_err(err, errlen, -ENOSPC, "more than %d GPUs", SG_GPU_MAX_GPUS);
	if (kind == SG_GPU_NODE_NIC && t->nnics >= SG_GPU_MAX_NICS)
		return sg_err(err, errlen, -ENOSPC, "more than %d NICs", SG_GPU_MAX_NICS);

	n = &t->nodes[t->nnodes];
	memset(n, 0, sizeof(*n));
	n->kind = kind;
	snprintf(n->name, sizeof(n->name), "%s", name);
	n->parent = want != 0 ? parent : -1;
	n->index = -1;
	if (kind == SG_GPU_NODE_SOCKET) {
		unsigned nsock = 0;

		for (unsigned i = 0; i < t->nnodes; i++)
			nsock += t->nodes[i].kind == SG_GPU_NODE_SOCKET;
		n->numa = (int)nsock;
	} else {
		n->numa = n->parent >= 0 ? t->nodes[n->parent].numa : -1;
	}
	if (kind == SG_GPU_NODE_GPU) {
		n->index = (int)t->ngpus;
		t->gpu[t->ngpus++] = (int)t->nnodes;
	} else if (kind == SG_GPU_NODE_NIC) {
		n->index = (int)t->nnics;
		t->nic[t->nnics++] = (int)t->nnodes;
	}
	return (int)t->nnodes++;
}

static bool nvlink_end(const struct sg_gpu_topo *t, int n)
{
	return n >= 0 && (unsigned)n < t->nnodes &&
	       (t->nodes[n].kind == SG_GPU_NODE_GPU || t->nodes[n].kind == SG_GPU_NODE_NVSWITCH);
}

int sg_gpu_topo_add_nvlink(struct sg_gpu_topo *t, int a, int b, unsigned count, char *err,
			   size_t errlen)
{
	int e;

	if (!nvlink_end(t, a) || !nvlink_end(t, b) || a == b)
		return sg_err(err, errlen, -EINVAL,
				  "an nvlink joins two different GPUs or a GPU and an NVSwitch");
	if (t->nodes[a].kind == SG_GPU_NODE_NVSWITCH && t->nodes[b].kind == SG_GPU_NODE_NVSWITCH)
		return sg_err(err, errlen, -EINVAL, "NVSwitch-to-NVSwitch links are not modelled");
	if (count == 0 || count > 64)
		return sg_err(err, errlen, -EINVAL, "nvlink count %u out of 1..64", count);
	e = sg_gpu_topo_nvlink_edge(t, a, b);
	if (e >= 0) {
		if (t->nvlinks[e].count + count > 64)
			return sg_err(err, errlen, -EINVAL, "nvlink count above 64");
		t->nvlinks[e].count += count;
		return 0;
	}
	if (t->nnvlinks >= SG_GPU_MAX_NVLINKS)
		return sg_err(err, errlen, -ENOSPC, "more than %d nvlink edges",
				  SG_GPU_MAX_NVLINKS);
	t->nvlinks[t->nnvlinks++] = (struct sg_gpu_nvlink){.a = a, .b = b, .count = count};
	return 0;
}

int sg_gpu_topo_validate(const struct sg_gpu_topo *t, char *err, size_t errlen)
{
	if (t->ngpus == 0)
		return sg_err(err, errlen, -EINVAL, "no GPU in the topology");
	for (unsigned i = 0; i < t->nnodes; i++) {
		const struct sg_gpu_node *n = &t->nodes[i];

		for (unsigned j = 0; n->kind == SG_GPU_NODE_SOCKET && j < i; j++)
			if (t->nodes[j].kind == SG_GPU_NODE_SOCKET && t->nodes[j].numa == n->numa)
				return sg_err(err, errlen, -EINVAL,
						  "sockets '%s' and '%s' both claim NUMA node %d",
						  t->nodes[j].name, n->name, n->numa);
		if (sg_gpu_topo_socket_of(t, (int)i) < 0 && n->kind != SG_GPU_NODE_NVSWITCH)
			return sg_err(err, errlen, -EINVAL, "%s '%s' is not under a socket",
					  kind_names[n->kind], n->name);
		if (n->kind == SG_GPU_NODE_NVSWITCH) {
			bool linked = false;

			for (unsigned l = 0; l < t->nnvlinks; l++)
				linked |= t->nvlinks[l].a == (int)i || t->nvlinks[l].b == (int)i;
			if (!linked)
				return sg_err(err, errlen, -EINVAL,
						  "nvswitch '%s' has no nvlink", n->name);
		}
	}
	return 0;
}

/* ---- queries ------------------------------------------------------------ */

int sg_gpu_topo_socket_of(const struct sg_gpu_topo *t, int n)
{
	/* Bounded walk: a hand-made topology must not loop us forever. */
	for (unsigned hops = 0; n >= 0 && (unsigned)n < t->nnodes && hops <= t->nnodes; hops++) {
		if (t->nodes[n].kind == SG_GPU_NODE_SOCKET)
			return n;
		n = t->nodes[n].parent;
	}
	return -EINVAL;
}

int sg_gpu_topo_top_switch(const struct sg_gpu_topo *t, int n)
{
	int top = -ENOENT;

	for (unsigned hops = 0; n >= 0 && (unsigned)n < t->nnodes && hops <= t->nnodes; hops++) {
		if (t->nodes[n].kind == SG_GPU_NODE_SWITCH)
			top = n;
		n = t->nodes[n].parent;
	}
	return top;
}

int sg_gpu_topo_depth(const struct sg_gpu_topo *t, int n)
{
	int d = 0;

	while (n >= 0 && t->nodes[n].parent >= 0 && d <= (int)t->nnodes) {
		n = t->nodes[n].parent;
		d++;
	}
	return d;
}

/* Lowest common PCIe ancestor of two nodes, -1 if in different sockets. */
static int common_ancestor(const struct sg_gpu_topo *t, int a, int b)
{
	int da = sg_gpu_topo_depth(t, a), db = sg_gpu_topo_depth(t, b);

	while (da > db) {
		a = t->nodes[a].parent;
		da--;
	}
	while (db > da) {
		b = t->nodes[b].parent;
		db--;
	}
	while (a != b && a >= 0 && b >= 0) {
		a = t->nodes[a].parent;
		b = t->nodes[b].parent;
	}
	return a == b ? a : -1;
}

bool sg_gpu_topo_same_switch(const struct sg_gpu_topo *t, unsigned ga, unsigned gb)
{
	int lca;

	if (ga >= t->ngpus || gb >= t->ngpus)
		return false;
	lca = common_ancestor(t, t->gpu[ga], t->gpu[gb]);
	return lca >= 0 && t->nodes[lca].kind == SG_GPU_NODE_SWITCH;
}

int sg_gpu_topo_nvlink_edge(const struct sg_gpu_topo *t, int a, int b)
{
	for (unsigned i = 0; i < t->nnvlinks; i++) {
		const struct sg_gpu_nvlink *l = &t->nvlinks[i];

		if ((l->a == a && l->b == b) || (l->a == b && l->b == a))
			return (int)i;
	}
	return -1;
}

unsigned sg_gpu_topo_nvlinks(const struct sg_gpu_topo *t, int a, int b)
{
	int e = sg_gpu_topo_nvlink_edge(t, a, b);

	return e < 0 ? 0 : t->nvlinks[e].count;
}

bool sg_gpu_topo_below(const struct sg_gpu_topo *t, int n, int anc)
{
	for (unsigned hops = 0; n >= 0 && hops <= t->nnodes; hops++, n = t->nodes[n].parent)
		if (n == anc)
			return true;
	return false;
}

bool sg_gpu_topo_nvlink_path(const struct sg_gpu_topo *t, unsigned ga, unsigned gb)
{
	int a, b;

	if (ga >= t->ngpus || gb >= t->ngpus || ga == gb)
		return false;
	a = t->gpu[ga];
	b = t->gpu[gb];
	if (sg_gpu_topo_nvlinks(t, a, b) > 0)
		return true;
	for (unsigned i = 0; i < t->nnodes; i++)
		if (t->nodes[i].kind == SG_GPU_NODE_NVSWITCH &&
		    sg_gpu_topo_nvlinks(t, a, (int)i) > 0 && sg_gpu_topo_nvlinks(t, b, (int)i) > 0)
			return true;
	return false;
}

/* ---- text format -------------------------------------------------------- */

#define MAX_TOK 8

static unsigned tokenize(char *line, char **tok)
{
	unsigned n = 0;
	char *save = NULL;

	for (char *s = strtok_r(line, " \t\r", &save); s != NULL; s = strtok_r(NULL, " \t\r", &save)) {
		if (n == MAX_TOK)
			return MAX_TOK + 1;
		tok[n++] = s;
	}
	return n;
}

static int parse_uint(const char *s, unsigned max, unsigned *out)
{
	uint64_t v;

	if (sg_parse_u64(s, 0, max, &v) != 0)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

static bool valid_pci(const char *s)
{
	unsigned d, b, dev, f;
	char tail;

	return strlen(s) == 12 &&
	       sscanf(s, "%4x:%2x:%2x.%1x%c", &d, &b, &dev, &f, &tail) == 4 && s[4] == ':' &&
	       s[7] == ':' && s[10] == '.' && dev < 32 && f < 8;
}

static enum sg_gpu_node_kind kind_from_name(const char *s)
{
	for (unsigned k = 0; k < SG_GPU_NODE_KIND_COUNT; k++)
		if (strcmp(s, kind_names[k]) == 0)
			return (enum sg_gpu_node_kind)k;
	return SG_GPU_NODE_KIND_COUNT;
}

/* Apply "key=value" attributes to node n. */
static int node_attrs(struct sg_gpu_topo *t, int n, char **tok, unsigned ntok, char *err,
		      size_t errlen)
{
	struct sg_gpu_node *node = &t->nodes[n];

	for (unsigned i = 0; i < ntok; i++) {
		char *eq = strchr(tok[i], '=');
		const char *key = tok[i], *val;
		unsigned v;

		if (eq == NULL)
			return sg_err(err, errlen, -EINVAL, "expected key=value, got '%s'",
					  tok[i]);
		*eq = '\0';
		val = eq + 1;
		if (strcmp(key, "parent") == 0)
			continue; /* used by the caller */
		if (strcmp(key, "numa") == 0 && node->kind == SG_GPU_NODE_SOCKET) {
			if (parse_uint(val, 1023, &v) < 0)
				return sg_err(err, errlen, -EINVAL,
						  "numa must be 0..1023, got '%s'", val);
			node->numa = (int)v;
		} else if (strcmp(key, "pci") == 0 && node->kind != SG_GPU_NODE_SOCKET) {
			if (!valid_pci(val))
				return sg_err(err, errlen, -EINVAL,
						  "pci must look like 0000:1a:00.0, got '%s'", val);
			snprintf(node->pci, sizeof(node->pci), "%s", val);
		} else if (strcmp(key, "gbps") == 0 && node->kind == SG_GPU_NODE_NIC) {
			if (parse_uint(val, 100000, &v) < 0)
				return sg_err(err, errlen, -EINVAL,
						  "gbps must be 0..100000, got '%s'", val);
			node->gbps = v;
		} else {
			return sg_err(err, errlen, -EINVAL, "unknown attribute '%s' for a %s",
					  key, kind_names[node->kind]);
		}
	}
	return 0;
}

static const char *find_attr(char **tok, unsigned ntok, const char *key)
{
	size_t kl = strlen(key);

	for (unsigned i = 0; i < ntok; i++)
		if (strncmp(tok[i], key, kl) == 0 && tok[i][kl] == '=')
			return tok[i] + kl + 1;
	return NULL;
}

static int parse_line(struct sg_gpu_topo *t, char *line, char *err, size_t errlen)
{
	char *tok[MAX_TOK + 1];
	unsigned ntok = tokenize(line, tok);
	enum sg_gpu_node_kind kind;
	const char *pname;
	int parent = -1, n, a, b;
	unsigned count = 1;

	if (ntok == 0)
		return 0;
	if (ntok > MAX_TOK)
		return sg_err(err, errlen, -EINVAL, "too many words (at most %d)", MAX_TOK);
	if (strcmp(tok[0], "name") == 0) {
		if (ntok != 2)
			return sg_err(err, errlen, -EINVAL, "usage: name <word>");
		snprintf(t->name, sizeof(t->name), "%s", tok[1]);
		return 0;
	}
	if (strcmp(tok[0], "nvlink") == 0) {
		if (ntok < 3 || ntok > 4)
			return sg_err(err, errlen, -EINVAL, "usage: nvlink <a> <b> [count=N]");
		a = sg_gpu_topo_find(t, tok[1]);
		b = sg_gpu_topo_find(t, tok[2]);
		if (a < 0 || b < 0)
			return sg_err(err, errlen, -EINVAL, "nvlink to unknown node '%s'",
					  a < 0 ? tok[1] : tok[2]);
		if (ntok == 4) {
			const char *c = find_attr(tok + 3, 1, "count");

			if (c == NULL || parse_uint(c, 64, &count) < 0 || count == 0)
				return sg_err(err, errlen, -EINVAL,
						  "expected count=1..64, got '%s'", tok[3]);
		}
		return sg_gpu_topo_add_nvlink(t, a, b, count, err, errlen);
	}
	kind = kind_from_name(tok[0]);
	if (kind == SG_GPU_NODE_KIND_COUNT)
		return sg_err(err, errlen, -EINVAL, "unknown keyword '%s'", tok[0]);
	if (ntok < 2)
		return sg_err(err, errlen, -EINVAL, "%s needs a name", tok[0]);
	pname = find_attr(tok + 2, ntok - 2, "parent");
	if (pname != NULL) {
		parent = sg_gpu_topo_find(t, pname);
		if (parent < 0)
			return sg_err(err, errlen, -EINVAL,
					  "parent '%s' is not defined (yet)", pname);
	}
	n = sg_gpu_topo_add_node(t, kind, tok[1], parent, err, errlen);
	if (n < 0)
		return n;
	return node_attrs(t, n, tok + 2, ntok - 2, err, errlen);
}

struct sg_gpu_topo *sg_gpu_topo_parse(const char *text, const char *origin, char *err,
				      size_t errlen)
{
	struct sg_gpu_topo *t;
	char line[512], why[200];
	unsigned lineno = 0;
	const char *p = text;
	int rc;

	if (text == NULL) {
		errno = EINVAL;
		sg_err(err, errlen, -EINVAL, "no text");
		return NULL;
	}
	t = sg_gpu_topo_new();
	if (t == NULL)
		return NULL;
	while (*p != '\0') {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		char *hash;

		lineno++;
		if (len >= sizeof(line)) {
			rc = sg_err(why, sizeof(why), -EINVAL, "line longer than %zu bytes",
					sizeof(line) - 1);
			goto fail;
		}
		memcpy(line, p, len);
		line[len] = '\0';
		p += len + (nl != NULL);
		hash = strchr(line, '#');
		if (hash != NULL)
			*hash = '\0';
		rc = parse_line(t, line, why, sizeof(why));
		if (rc < 0)
			goto fail;
	}
	rc = sg_gpu_topo_validate(t, why, sizeof(why));
	if (rc < 0) {
		sg_err(err, errlen, -EINVAL, "%s: %s", origin ? origin : "topology", why);
		sg_gpu_topo_free(t);
		errno = EINVAL;
		return NULL;
	}
	return t;
fail:
	sg_err(err, errlen, -EINVAL, "%s:%u: %s", origin ? origin : "topology", lineno, why);
	sg_gpu_topo_free(t);
	errno = -rc == ENOSPC ? ENOSPC : EINVAL;
	return NULL;
}

struct sg_gpu_topo *sg_gpu_topo_load(const char *path, char *err, size_t errlen)
{
	struct sg_gpu_topo *t;
	FILE *f;
	char *buf;
	size_t n;
	int e;

	f = fopen(path, "r");
	if (f == NULL) {
		e = errno;
		sg_err(err, errlen, -e, "%s: %s", path, strerror(e));
		errno = e;
		return NULL;
	}
	/* Topology files are small; 1 MiB is far beyond any real machine. */
	buf = malloc(1 << 20);
	if (buf == NULL) {
		fclose(f);
		errno = ENOMEM;
		return NULL;
	}
	n = fread(buf, 1, (1 << 20) - 1, f);
	e = ferror(f);
	if (!e && n == (1 << 20) - 1 && fgetc(f) != EOF) {
		free(buf);
		fclose(f);
		sg_err(err, errlen, -EFBIG, "%s: larger than 1 MiB", path);
		errno = EFBIG;
		return NULL;
	}
	fclose(f);
	if (e) {
		free(buf);
		sg_err(err, errlen, -EIO, "%s: read error", path);
		errno = EIO;
		return NULL;
	}
	buf[n] = '\0';
	if (strlen(buf) != n) {
		free(buf);
		sg_err(err, errlen, -EINVAL, "%s: binary file (NUL byte)", path);
		errno = EINVAL;
		return NULL;
	}
	t = sg_gpu_topo_parse(buf, path, err, errlen);
	e = errno;
	free(buf);
	errno = e;
	return t;
}

int sg_gpu_topo_write(const struct sg_gpu_topo *t, FILE *out)
{
	if (t->name[0] != '\0')
		fprintf(out, "name %s\n", t->name);
	for (unsigned i = 0; i < t->nnodes; i++) {
		const struct sg_gpu_node *n = &t->nodes[i];

		fprintf(out, "%-8s %s", kind_names[n->kind], n->name);
		if (n->parent >= 0)
			fprintf(out, " parent=%s", t->nodes[n->parent].name);
		if (n->kind == SG_GPU_NODE_SOCKET)
			fprintf(out, " numa=%d", n->numa);
		if (n->pci[0] != '\0')
			fprintf(out, " pci=%s", n->pci);
		if (n->gbps != 0)
			fprintf(out, " gbps=%u", n->gbps);
		fputc('\n', out);
	}
	for (unsigned i = 0; i < t->nnvlinks; i++) {
		const struct sg_gpu_nvlink *l = &t->nvlinks[i];

		fprintf(out, "nvlink   %s %s count=%u\n", t->nodes[l->a].name, t->nodes[l->b].name,
			l->count);
	}
	return ferror(out) ? -EIO : 0;
}
