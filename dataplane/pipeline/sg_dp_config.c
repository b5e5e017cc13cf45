/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmad configuration: the embedded default, INI files through rte_cfgfile,
 * command-line options, and the lcore layout syntax and its checks.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <endian.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rte_cfgfile.h>
#include <rte_lcore.h>
#include <rte_ethdev.h>
#include <rte_log.h>

#include "sg_config.h"
#include "sg_dp_pipeline.h"
#if SG_HAVE_VERBS
#include "sg_dp_verbs.h"
#endif
#include "sg_dp_proto.h"
#include "sg_sum.h"
#include "sg_parse.h"

const char sg_dp_default_config[] =
	"; sigmad embedded default configuration (sigmad --print-config): one port,\n"
	"; run to completion on lcore 1. See docs/sigmad.md for every key, and\n"
	"; docs/deploy.md for running it as a service (sigmad@NAME reads\n"
	"; /etc/sigma/NAME.conf).\n"
	"[net]\n"
	"ip = 10.11.0.1\n"
	"udp_port = 9300\n"
	"mtu = 9000\n"
	"udp_checksum = yes\n"
	"steer = auto\n"
	"[layout]\n"
	"rtc = (0,0,1)\n"
	"[resources]\n"
	"burst = 32\n"
	"ring_size = 4096\n"
	"mbufs = 16384\n"
	"rx_desc = 1024\n"
	"tx_desc = 1024\n"
	"pool_bufs = 4096\n"
	"peers = 8192\n"
	"peer_idle_ms = 60000\n"
	"[live]\n"
	"idle = busy\n"
	"idle_sleep_us = 100\n"
	"timeout_ms = 1000\n"
	"log_level = info\n"
	"stats_interval_s = 0\n"
	"[transport]\n"
	"; dpdk (ethdev ports), verbs (rdma-core) or socket (kernel UDP sockets)\n"
	"type = dpdk\n"
	"[socket]\n"
	"; [transport] type = socket only: bytes of socket buffer asked for each\n"
	"; socket (SO_RCVBUFFORCE/SO_SNDBUFFORCE, else capped by net.core.rmem_max\n"
	"; and wmem_max), UDP_GRO on receive, UDP_SEGMENT (GSO) on send\n"
	"rcvbuf = 8388608\n"
	"sndbuf = 4194304\n"
	"gro = yes\n"
	"gso = yes\n"
	"; [control]: the control server for sigmactl and the job service\n"
	"; (docs/control.md); without it, only the [job N] sections below exist.\n"
	"; [control]\n"
	"; unix = /run/sigma/ctl.sock\n"
	"; name = node0\n"
	"; A job that exists from start-up; jobs made over [control] need none.\n"
	"[job 1]\n"
	"workers = 4\n"
	"token = 0x5349474d41000001\n"
	"dtype = fp32\n"
	"mode = sync\n"
	"keys = 16\n"
	"partition_bytes = 4096000\n"
	"chunk_bytes = 0\n"
	"slots = 0\n";

/*
 * Keys whose value is one of a few words: one table per key, one parser, and
 * an error that lists the table.
 */
struct word {
	const char *name;
	unsigned int value;
};

#define WORDS(t) (t), RTE_DIM(t)

static const struct word bool_words[] = {
	{"yes", 1}, {"on", 1}, {"true", 1}, {"1", 1}, {"no", 0}, {"off", 0}, {"false", 0}, {"0", 0},
};
static const struct word idle_words[] = {{"busy", SG_IDLE_POLL}, {"sleep", SG_IDLE_SLEEP}};
static const struct word steer_words[] = {
	{"auto", SG_DP_STEER_AUTO}, {"flow", SG_DP_STEER_FLOW}, {"off", SG_DP_STEER_OFF},
};
static const struct word transport_words[] = {
	{"dpdk", SG_DP_TRANSPORT_DPDK}, {"verbs", SG_DP_TRANSPORT_VERBS},
	{"socket", SG_DP_TRANSPORT_SOCKET},
};

/* "a, b or c" into @p buf */
static const char *words_list(const struct word *w, size_t n, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s",
					i == 0 ? "" : i + 1 == n ? " or " : ", ", w[i].name);
	return buf;
}

/*
 * A number of the config: decimal, or hex after 0x (sg_parse_u64x()); any
 * refusal is -EINVAL, the loader's one error for a bad value.
 */
static int cfg_num(const char *s, uint64_t lo, uint64_t hi, uint64_t *v)
{
	return sg_parse_u64x(s, lo, hi, v) == 0 ? 0 : -EINVAL;
}

/*
 * @p s as one of the @p n words of @p w into @p out; otherwise -EINVAL with
 * "@p what = "s": expected a, b or c" in @p err.
 */
static int parse_word(const char *s, const struct word *w, size_t n, unsigned int *out,
		      const char *what, char *err, size_t errlen)
{
	char list[128];

	for (size_t i = 0; s != NULL && i < n; i++)
		if (!strcmp(s, w[i].name)) {
			*out = w[i].value;
			return 0;
		}
	sg_dp_seterr(err, errlen, "%s = \"%s\": expected %s", what, s ? s : "",
		     words_list(w, n, list, sizeof(list)));
	return -EINVAL;
}

_Static_assert(SG_LOG_LEVEL_EMERG == RTE_LOG_EMERG && SG_LOG_LEVEL_DEBUG == RTE_LOG_DEBUG,
	       "sg_parse.h's log levels are rte_log's");

static int parse_log_level(const char *s, unsigned int *lvl)
{
	int l = sg_log_level_parse(s);

	if (l < 0)
		return l;
	*lvl = (unsigned int)l;
	return 0;
}


/*
 * Layout syntax.
 */

void sg_dp_layout_clear(struct sg_dp_config *c, enum sg_role role)
{
	unsigned int j = 0;

	for (unsigned int i = 0; i < c->n_lcores; i++)
		if (c->lcores[i].role != role)
			c->lcores[j++] = c->lcores[i];
	c->n_lcores = j;
}

/* The [layout] key (and option) that lists role @p r's lcores: messages name what the user wrote. */
static const char *layout_key(enum sg_role r)
{
	return r == SG_ROLE_IO ? "io" : r == SG_ROLE_REDUCE ? "reduce" : "rtc";
}

static int layout_add(struct sg_dp_config *c, enum sg_role role, unsigned long lcore,
		      unsigned long port, unsigned long queue, char *err, size_t errlen)
{
	if (c->n_lcores >= SG_DP_MAX_LAYOUT) {
		sg_dp_seterr(err, errlen, "layout: more than %d lcores", SG_DP_MAX_LAYOUT);
		return -EINVAL;
	}
	if (lcore >= RTE_MAX_LCORE) {
		sg_dp_seterr(err, errlen, "layout %s: lcore %lu is not below RTE_MAX_LCORE (%d)",
		       layout_key(role), lcore, RTE_MAX_LCORE);
		return -EINVAL;
	}
	if (port >= SG_DP_MAX_PORTS || queue > 1023) {
		sg_dp_seterr(err, errlen, "layout %s: port %lu / queue %lu out of range (ports < %d, "
		       "queues < 1024)", layout_key(role), port, queue, SG_DP_MAX_PORTS);
		return -EINVAL;
	}
	c->lcores[c->n_lcores++] = (struct sg_dp_lcore_cfg){
		.lcore = (unsigned int)lcore, .role = role,
		.port = (uint16_t)port, .queue = (uint16_t)queue};
	return 0;
}

/* A decimal number and the spaces around it, from a layout list; *p moves past them. */
static int parse_ulong_tok(const char **p, unsigned long *v)
{
	char num[24];
	uint64_t x;
	size_t n;

	while (isspace((unsigned char)**p))
		(*p)++;
	n = strspn(*p, "0123456789");
	if (n == 0 || n >= sizeof(num))
		return -EINVAL;
	memcpy(num, *p, n);
	num[n] = '\0';
	if (sg_parse_u64(num, 0, ULONG_MAX, &x) != 0)
		return -EINVAL;
	*v = (unsigned long)x;
	*p += n;
	while (isspace((unsigned char)**p))
		(*p)++;
	return 0;
}

int sg_dp_lcore_list_parse(const char *spec, bool *mask, char *err, size_t errlen)
{
	struct sg_dp_config *tmp = calloc(1, sizeof(*tmp));
	int rc;

	/* the reduce list's parser, so that both lists have one syntax */
	if (tmp == NULL)
		return -ENOMEM;
	rc = sg_dp_layout_parse(tmp, SG_ROLE_REDUCE, spec, err, errlen);
	if (rc == 0) {
		memset(mask, 0, sizeof(bool) * 1024);
		for (unsigned int i = 0; i < tmp->n_lcores; i++)
			mask[tmp->lcores[i].lcore] = true;
	}
	free(tmp);
	return rc;
}

int sg_dp_layout_parse(struct sg_dp_config *c, enum sg_role role, const char *spec, char *err,
		       size_t errlen)
{
	const char *p = spec;
	unsigned long v[3];

	if (spec == NULL || *spec == '\0') {
		sg_dp_seterr(err, errlen, "layout %s: empty list", layout_key(role));
		return -EINVAL;
	}
	while (*p) {
		if (role == SG_ROLE_REDUCE) {
			unsigned long lo, hi;

			if (parse_ulong_tok(&p, &lo) < 0)
				goto bad;
			hi = lo;
			if (*p == '-') {
				p++;
				if (parse_ulong_tok(&p, &hi) < 0 || hi < lo || hi - lo >= SG_DP_MAX_LAYOUT)
					goto bad;
			}
			for (unsigned long l = lo; l <= hi; l++)
				if (layout_add(c, role, l, 0, 0, err, errlen) < 0)
					return -EINVAL;
		} else {
			while (isspace((unsigned char)*p))
				p++;
			if (*p++ != '(')
				goto bad;
			for (int i = 0; i < 3; i++) {
				if (parse_ulong_tok(&p, &v[i]) < 0)
					goto bad;
				if (*p++ != (i < 2 ? ',' : ')'))
					goto bad;
			}
			if (layout_add(c, role, v[2], v[0], v[1], err, errlen) < 0)
				return -EINVAL;
			while (isspace((unsigned char)*p))
				p++;
		}
		if (*p == ',')
			p++;
		else if (*p != '\0')
			goto bad;
		else
			break;
		if (*p == '\0')
			goto bad; /* trailing comma */
	}
	return 0;
bad:
	sg_dp_seterr(err, errlen, "layout %s: cannot parse \"%s\" near \"%.16s\": expected %s",
	       layout_key(role), spec, p, role == SG_ROLE_REDUCE ?
	       "lcore[,lcore|a-b...], e.g. \"2,3\" or \"2-3\"" :
	       "(port,queue,lcore)[,...], e.g. \"(0,0,1),(0,1,2)\"");
	return -EINVAL;
}

/* [layout] extra_rx / --extra-rx: the io list's syntax, into c->extra_rx. */
static int extra_rx_parse(struct sg_dp_config *c, const char *spec, char *err, size_t errlen)
{
	struct sg_dp_config *tmp = calloc(1, sizeof(*tmp));
	int rc;

	if (tmp == NULL)
		return -ENOMEM;
	rc = sg_dp_layout_parse(tmp, SG_ROLE_IO, spec, err, errlen);
	if (rc == 0 && tmp->n_lcores > SG_DP_MAX_EXTRA_RX) {
		sg_dp_seterr(err, errlen, "layout extra_rx: more than %d entries",
			     SG_DP_MAX_EXTRA_RX);
		rc = -EINVAL;
	}
	if (rc == 0) {
		c->n_extra_rx = tmp->n_lcores;
		memcpy(c->extra_rx, tmp->lcores, sizeof(tmp->lcores[0]) * tmp->n_lcores);
	}
	free(tmp);
	return rc;
}

/*
 * INI keys. One table drives both the file parser and --help's list.
 */

enum key_kind { K_IP, K_U16, K_UINT, K_BOOL, K_MAC, K_WORD, K_LOG, K_LAYOUT, K_LCORES,
		K_EXTRA_RX };

struct key_def {
	const char *section;
	const char *name;
	enum key_kind kind;
	size_t off;
	uint64_t lo, hi;
	enum sg_role role;
	const struct word *words; /* K_WORD, K_BOOL: the accepted words */
	size_t n_words;
};

#define OFF(f) offsetof(struct sg_dp_config, f)

static const struct key_def keys[] = {
	{"net", "ip", K_IP, OFF(ip), 0, 0, 0},
	{"net", "udp_port", K_U16, OFF(udp_port), 1, 65535, 0},
	{"net", "mtu", K_U16, OFF(mtu), 576, 9000, 0},
	{"net", "udp_checksum", K_BOOL, OFF(udp_checksum), 0, 0, 0, WORDS(bool_words)},
	{"net", "mac", K_MAC, OFF(mac_override), 0, 0, 0},
	{"net", "steer", K_WORD, OFF(steer), 0, 0, 0, WORDS(steer_words)},
	{"layout", "io", K_LAYOUT, 0, 0, 0, SG_ROLE_IO},
	{"layout", "reduce", K_LAYOUT, 0, 0, 0, SG_ROLE_REDUCE},
	{"layout", "rtc", K_LAYOUT, 0, 0, 0, SG_ROLE_RTC},
	{"layout", "extra_rx", K_EXTRA_RX, 0, 0, 0, SG_ROLE_IO},
	{"resources", "burst", K_UINT, OFF(burst), 1, 512, 0},
	{"resources", "ring_size", K_UINT, OFF(ring_size), 64, 1u << 20, 0},
	{"resources", "mbufs", K_UINT, OFF(mbufs), 1024, 1u << 22, 0},
	{"resources", "rx_desc", K_UINT, OFF(rxd), 64, 16384, 0},
	{"resources", "tx_desc", K_UINT, OFF(txd), 64, 16384, 0},
	{"resources", "pool_bufs", K_UINT, OFF(pool_bufs), 16, 1u << 22, 0},
	{"resources", "peers", K_UINT, OFF(peers), 64, 1u << 22, 0},
	{"resources", "peer_idle_ms", K_UINT, OFF(peer_idle_ms), 10, 86400000, 0},
	{"live", "idle", K_WORD, OFF(idle), 0, 0, 0, WORDS(idle_words)},
	{"live", "sleep_lcores", K_LCORES, OFF(sleep_lcores), 0, 0, 0},
	{"live", "idle_sleep_us", K_UINT, OFF(idle_sleep_us), 1, 1000000, 0},
	{"live", "timeout_ms", K_UINT, OFF(timeout_ms), 1, 3600000, 0},
	{"live", "log_level", K_LOG, OFF(log_level), 0, 0, 0},
	{"live", "stats_interval_s", K_UINT, OFF(stats_interval_s), 0, 86400, 0},
	{"socket", "rcvbuf", K_UINT, OFF(sock.rcvbuf), 65536, 1u << 30, 0},
	{"socket", "sndbuf", K_UINT, OFF(sock.sndbuf), 65536, 1u << 30, 0},
	{"socket", "gro", K_BOOL, OFF(sock.gro), 0, 0, 0, WORDS(bool_words)},
	{"socket", "gso", K_BOOL, OFF(sock.gso), 0, 0, 0, WORDS(bool_words)},
};

static int apply_key(struct sg_dp_config *c, const struct key_def *k, const char *val,
		     char *err, size_t errlen)
{
	void *f = (char *)c + k->off;
	char what[64];
	uint64_t v;
	unsigned int w;
	int rc = 0;

	snprintf(what, sizeof(what), "[%s] %s", k->section, k->name);
	switch (k->kind) {
	case K_IP:
		if ((rc = sg_ipv4_parse(val, &c->ip)) == 0)
			c->ip = be32toh(c->ip);
		break;
	case K_U16:
		if ((rc = cfg_num(val, k->lo, k->hi, &v)) == 0)
			*(uint16_t *)f = (uint16_t)v;
		break;
	case K_UINT:
		if ((rc = cfg_num(val, k->lo, k->hi, &v)) == 0)
			*(unsigned int *)f = (unsigned int)v;
		break;
	case K_BOOL:
		if ((rc = parse_word(val, k->words, k->n_words, &w, what, err, errlen)) == 0)
			*(bool *)f = w != 0;
		return rc;
	case K_WORD:
		/* the fields are unsigned int or an enum of unsigned int's size */
		RTE_BUILD_BUG_ON(sizeof(enum sg_idle) != sizeof(unsigned int));
		if ((rc = parse_word(val, k->words, k->n_words, &w, what, err, errlen)) == 0)
			*(unsigned int *)f = w;
		return rc;
	case K_MAC:
		rc = rte_ether_unformat_addr(val, &c->mac_override) < 0 ? -EINVAL : 0;
		break;
	case K_LOG:
		rc = parse_log_level(val, &c->log_level);
		break;
	case K_LAYOUT:
		sg_dp_layout_clear(c, k->role);
		return sg_dp_layout_parse(c, k->role, val, err, errlen);
	case K_EXTRA_RX:
		return extra_rx_parse(c, val, err, errlen);
	case K_LCORES:
		if (!strcmp(val, "none")) {
			memset(c->sleep_lcores, 0, sizeof(c->sleep_lcores));
			return 0;
		}
		rc = sg_dp_lcore_list_parse(val, c->sleep_lcores, err, errlen);
		if (rc < 0)
			return rc;
		break;
	}
	if (rc < 0) {
		const char *want = "a value";
		char range[64];

		switch (k->kind) {
		case K_IP: want = "a dotted IPv4 address such as 10.11.0.1"; break;
		case K_MAC: want = "a MAC such as 02:00:00:00:00:01"; break;
		case K_LOG: want = "emerg|alert|crit|err|warning|notice|info|debug"; break;
		default:
			snprintf(range, sizeof(range), "an integer in [%" PRIu64 ", %" PRIu64 "]",
				 k->lo, k->hi);
			want = range;
		}
		sg_dp_seterr(err, errlen, "%s = \"%s\": expected %s", what, val, want);
	}
	return rc;
}

static int apply_job(struct sg_dp_config *c, const char *sec, const char *name, const char *val,
		     char *err, size_t errlen)
{
	uint64_t id, v;
	struct sg_dp_job_cfg *j = NULL;
	enum sg_dtype dt;
	enum sg_mode mode;
	int rc = -EINVAL;

	if (cfg_num(sec + 4, 1, UINT32_MAX, &id) < 0) {
		sg_dp_seterr(err, errlen, "[%s]: a job section is named \"job N\" with N >= 1", sec);
		return -EINVAL;
	}
	for (unsigned int i = 0; i < c->n_jobs; i++)
		if (c->jobs[i].id == id)
			j = &c->jobs[i];
	if (j == NULL) {
		if (c->n_jobs >= SG_DP_MAX_CONFIG_JOBS) {
			sg_dp_seterr(err, errlen, "[%s]: more than %d jobs", sec,
				     SG_DP_MAX_CONFIG_JOBS);
			return -EINVAL;
		}
		j = &c->jobs[c->n_jobs++];
		*j = (struct sg_dp_job_cfg){.id = (uint32_t)id, .workers = 1, .dtype = SG_DTYPE_FP32,
					    .keys = 1, .partition_bytes = SG_PARTITION_BYTES_DEFAULT};
	}
	if (!strcmp(name, "workers")) {
		if ((rc = cfg_num(val, 1, 64, &v)) == 0)
			j->workers = (uint32_t)v;
	} else if (!strcmp(name, "token")) {
		rc = cfg_num(val, 0, UINT64_MAX, &j->token);
	} else if (!strcmp(name, "dtype")) {
		if ((rc = sg_dtype_from_name(val, &dt)) == 0)
			j->dtype = dt;
	} else if (!strcmp(name, "mode")) {
		if ((rc = sg_mode_from_name(val, &mode)) == 0)
			j->mode = mode;
	} else if (!strcmp(name, "keys")) {
		if ((rc = cfg_num(val, 1, 1u << 20, &v)) == 0)
			j->keys = (uint32_t)v;
	} else if (!strcmp(name, "chunk_bytes")) {
		if ((rc = cfg_num(val, 0, SG_MAX_CHUNK_BYTES, &v)) == 0 && v % 8 != 0)
			rc = -EINVAL;
		if (rc == 0)
			j->chunk_bytes = (uint32_t)v;
	} else if (!strcmp(name, "partition_bytes")) {
		if ((rc = cfg_num(val, 64, 1u << 30, &v)) == 0)
			j->partition_bytes = (uint32_t)v;
	} else if (!strcmp(name, "slots")) {
		if ((rc = cfg_num(val, 0, 1u << 20, &v)) == 0)
			j->slots = (uint32_t)v;
	} else {
		sg_dp_seterr(err, errlen, "[%s]: unknown key \"%s\" (known: workers, token, dtype, mode, "
		       "keys, partition_bytes, chunk_bytes, slots)", sec, name);
		return -EINVAL;
	}
	if (rc < 0)
		sg_dp_seterr(err, errlen, "[%s] %s = \"%s\": bad value (workers 1..64, token an integer, "
		       "dtype fp32|fp64|fp16|bf16|int32|int64|int8|uint8, mode "
		       "sync|async|deterministic, keys 1..2^20, partition_bytes 64..2^30, "
		       "chunk_bytes 0..8920 in multiples of 8, slots 0..2^20)",
		       sec, name, val);
	return rc;
}

/* [verbs]: checked here when the build has verbs, kept as text for the transport. */
static int load_verbs_section(struct sg_dp_config *c, struct rte_cfgfile *cf, char *err,
			      size_t errlen)
{
	int n = rte_cfgfile_section_num_entries(cf, "verbs");
	struct rte_cfgfile_entry *ents;
	int rc = 0;

	c->n_verbs_kv = 0;
	if (n <= 0)
		return 0;
	if ((unsigned int)n > RTE_DIM(c->verbs_kv)) {
		sg_dp_seterr(err, errlen, "[verbs]: %d keys (at most %zu)", n, RTE_DIM(c->verbs_kv));
		return -EINVAL;
	}
	ents = calloc((size_t)n, sizeof(*ents));
	if (ents == NULL)
		return -ENOMEM;
	rte_cfgfile_section_entries(cf, "verbs", ents, n);
	for (int i = 0; i < n && rc == 0; i++) {
		if (strlen(ents[i].name) >= sizeof(c->verbs_kv[0].key) ||
		    strlen(ents[i].value) >= sizeof(c->verbs_kv[0].value)) {
			sg_dp_seterr(err, errlen, "[verbs] %s: key or value too long (at most %zu and "
				     "%zu characters)", ents[i].name, sizeof(c->verbs_kv[0].key) - 1,
				     sizeof(c->verbs_kv[0].value) - 1);
			rc = -EINVAL;
			break;
		}
		snprintf(c->verbs_kv[i].key, sizeof(c->verbs_kv[i].key), "%s", ents[i].name);
		snprintf(c->verbs_kv[i].value, sizeof(c->verbs_kv[i].value), "%s", ents[i].value);
		c->n_verbs_kv++;
	}
	free(ents);
#if SG_HAVE_VERBS
	if (rc == 0) {
		struct sg_dp_verbs_conf vc;

		sg_dp_verbs_conf_defaults(&vc);
		rc = sg_dp_verbs_conf_load(&vc, cf, "verbs", err, errlen);
	}
#endif
	/* without verbs in the build, [transport] type = verbs says what is missing */
	return rc;
}

/*
 * Sections that are not key tables: the program's own (struct
 * sg_dp_config_section: sigmad's [control] and [cluster]), [verbs] for the verbs
 * transport, [transport], which picks one. @return 1 if @p sec is one of them.
 */
static int apply_other_section(struct sg_dp_config *c, struct rte_cfgfile *cf, const char *sec,
			       int *rc, char *err, size_t errlen)
{
	for (unsigned int i = 0; i < c->n_sections && i < SG_DP_CONFIG_MAX_SECTIONS; i++)
		if (c->sections[i].name != NULL && !strcmp(sec, c->sections[i].name)) {
			*rc = c->sections[i].load(c->sections[i].arg, cf, sec, err, errlen);
			return 1;
		}
	if (!strcmp(sec, "transport")) {
		const char *t = rte_cfgfile_get_entry(cf, sec, "type");
		int n = rte_cfgfile_section_num_entries(cf, sec);

		*rc = 0;
		if (n > 1 || (n == 1 && t == NULL)) {
			sg_dp_seterr(err, errlen, "[transport]: the only key is type (dpdk, verbs or "
				     "socket)");
			*rc = -EINVAL;
		} else if (t == NULL) {
			c->transport = SG_DP_TRANSPORT_DPDK;
		} else {
			*rc = parse_word(t, WORDS(transport_words), &c->transport, "[transport] type",
					 err, errlen);
		}
		return 1;
	}
	if (!strcmp(sec, "verbs")) {
		*rc = load_verbs_section(c, cf, err, errlen);
		return 1;
	}
	return 0;
}

static int apply_cfgfile(struct sg_dp_config *c, struct rte_cfgfile *cf, const char *what,
			 char *err, size_t errlen)
{
	int nsec = rte_cfgfile_num_sections(cf, NULL, 0);
	char(*secs)[CFG_NAME_LEN] = NULL;
	char *secp[64];
	int rc = 0;

	if (nsec < 0 || nsec > 64) {
		sg_dp_seterr(err, errlen, "%s: %d sections (at most 64)", what, nsec);
		return -EINVAL;
	}
	secs = calloc(nsec ? nsec : 1, sizeof(*secs));
	if (secs == NULL)
		return -ENOMEM;
	for (int i = 0; i < nsec; i++)
		secp[i] = secs[i];
	rte_cfgfile_sections(cf, secp, nsec);
	for (int i = 0; i < nsec && rc == 0; i++) {
		int n = rte_cfgfile_section_num_entries(cf, secp[i]);
		struct rte_cfgfile_entry *ents;
		bool job = !strncmp(secp[i], "job ", 4);
		bool known = job;

		if (apply_other_section(c, cf, secp[i], &rc, err, errlen))
			continue;

		for (size_t k = 0; k < RTE_DIM(keys); k++)
			known |= !strcmp(keys[k].section, secp[i]);
		if (!known) {
			char others[128] = "";
			size_t o = 0;

			for (unsigned int h = 0; h < c->n_sections && o < sizeof(others); h++)
				o += (size_t)snprintf(others + o, sizeof(others) - o, ", %s",
						      c->sections[h].name);
			sg_dp_seterr(err, errlen, "%s: unknown section [%s] (known: net, layout, resources, "
			       "live, job N, transport, verbs, socket%s)", what, secp[i], others);
			rc = -EINVAL;
			break;
		}
		if (n <= 0)
			continue;
		ents = calloc(n, sizeof(*ents));
		if (ents == NULL) {
			rc = -ENOMEM;
			break;
		}
		rte_cfgfile_section_entries(cf, secp[i], ents, n);
		/* a layout section replaces the whole layout, so clear roles it omits */
		if (!strcmp(secp[i], "layout"))
			c->n_lcores = c->n_extra_rx = 0;
		for (int e = 0; e < n && rc == 0; e++) {
			const struct key_def *k = NULL;

			if (job) {
				rc = apply_job(c, secp[i], ents[e].name, ents[e].value, err, errlen);
				continue;
			}
			for (size_t d = 0; d < RTE_DIM(keys); d++)
				if (!strcmp(keys[d].section, secp[i]) &&
				    !strcmp(keys[d].name, ents[e].name))
					k = &keys[d];
			if (k == NULL) {
				sg_dp_seterr(err, errlen, "%s: unknown key \"%s\" in [%s]", what,
				       ents[e].name, secp[i]);
				rc = -EINVAL;
			} else {
				rc = apply_key(c, k, ents[e].value, err, errlen);
			}
		}
		free(ents);
	}
	free(secs);
	return rc;
}

/* rte_cfgfile skips some malformed lines silently; a config must not. */
static int check_lines(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	unsigned int no = 0;
	bool in_section = false;

	if (f == NULL) {
		sg_dp_seterr(err, errlen, "config %s: %s", path, strerror(errno));
		return -EINVAL;
	}
	while (fgets(line, sizeof(line), f)) {
		char *p = line;

		no++;
		while (isspace((unsigned char)*p))
			p++;
		if (*p == '\0' || *p == ';' || *p == '#')
			continue;
		if (*p == '[' && strchr(p, ']')) {
			in_section = true;
			continue;
		}
		if (!in_section || strchr(p, '=') == NULL) {
			fclose(f);
			sg_dp_seterr(err, errlen, "config %s line %u: not a valid INI line (%s): \"%.40s\"",
			       path, no, in_section ? "expected key = value" :
			       "expected a [section] first", strtok(p, "\r\n") ? p : "");
			return -EINVAL;
		}
	}
	fclose(f);
	return 0;
}

int sg_dp_config_check_jobs(const struct sg_dp_config *c, char *err, size_t errlen)
{
	for (unsigned int j = 0; j < c->n_jobs; j++)
		if (c->jobs[j].partition_bytes % sg_dtype_size(c->jobs[j].dtype)) {
			sg_dp_seterr(err, errlen, "[job %u]: partition_bytes %u is not a multiple of the "
			       "%s element size", c->jobs[j].id, c->jobs[j].partition_bytes,
			       sg_dtype_name(c->jobs[j].dtype));
			return -EINVAL;
		}
	return 0;
}

int sg_dp_config_load_file(struct sg_dp_config *c, const char *path, char *err, size_t errlen)
{
	struct rte_cfgfile *cf;
	int rc;

	if (access(path, R_OK) != 0) {
		rc = -errno;
		sg_dp_seterr(err, errlen, "config %s: %s", path, strerror(errno));
		return rc;
	}
	rc = check_lines(path, err, errlen);
	if (rc < 0)
		return rc;
	cf = rte_cfgfile_load(path, CFG_FLAG_EMPTY_VALUES);
	if (cf == NULL) {
		sg_dp_seterr(err, errlen, "config %s: not a valid INI file (rte_cfgfile_load failed: "
		       "check for lines outside a [section] or without '=')", path);
		return -EINVAL;
	}
	rc = apply_cfgfile(c, cf, path, err, errlen);
	rte_cfgfile_close(cf);
	return rc;
}

int sg_dp_config_load_string(struct sg_dp_config *c, const char *text, char *err, size_t errlen)
{
	char path[64];
	int fd, rc;
	size_t len = strlen(text);

	/* rte_cfgfile reads files only: hand it an anonymous in-memory one */
	fd = memfd_create("sigmad.ini", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, text, len) != (ssize_t)len) {
		close(fd);
		return -EIO;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rc = sg_dp_config_load_file(c, path, err, errlen);
	close(fd);
	return rc;
}

int sg_dp_config_defaults(struct sg_dp_config *c)
{
	char err[256];
	int rc;

	memset(c, 0, sizeof(*c));
	c->demo_workers = 4;
	rc = sg_dp_config_load_string(c, sg_dp_default_config, err, sizeof(err));
	if (rc < 0)
		fprintf(stderr, "sigmad: embedded default config: %s\n", err);
	return rc;
}

/*
 * Command line.
 */

enum {
	OPT_CONFIG = 256, OPT_IO, OPT_REDUCE, OPT_RTC, OPT_IP, OPT_UDP_PORT, OPT_MTU,
	OPT_IDLE, OPT_IDLE_SLEEP, OPT_BURST, OPT_DURATION, OPT_DEMO, OPT_DEMO_WORKERS,
	OPT_LOG_LEVEL, OPT_NO_UDP_CSUM, OPT_PRINT_CONFIG, OPT_SLEEP_LCORES, OPT_STEER, OPT_VERSION,
	OPT_EXTRA_RX,
};

static const struct option long_opts[] = {
	{"config", required_argument, NULL, OPT_CONFIG},
	{"io", required_argument, NULL, OPT_IO},
	{"reduce", required_argument, NULL, OPT_REDUCE},
	{"rtc", required_argument, NULL, OPT_RTC},
	{"extra-rx", required_argument, NULL, OPT_EXTRA_RX},
	{"ip", required_argument, NULL, OPT_IP},
	{"udp-port", required_argument, NULL, OPT_UDP_PORT},
	{"mtu", required_argument, NULL, OPT_MTU},
	{"idle", required_argument, NULL, OPT_IDLE},
	{"idle-sleep-us", required_argument, NULL, OPT_IDLE_SLEEP},
	{"sleep-lcores", required_argument, NULL, OPT_SLEEP_LCORES},
	{"burst", required_argument, NULL, OPT_BURST},
	{"duration", required_argument, NULL, OPT_DURATION},
	{"demo", no_argument, NULL, OPT_DEMO},
	{"demo-workers", required_argument, NULL, OPT_DEMO_WORKERS},
	{"log-level", required_argument, NULL, OPT_LOG_LEVEL},
	{"no-udp-checksum", no_argument, NULL, OPT_NO_UDP_CSUM},
	{"steer", required_argument, NULL, OPT_STEER},
	{"print-config", no_argument, NULL, OPT_PRINT_CONFIG},
	{"version", no_argument, NULL, OPT_VERSION},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

void sg_dp_usage(FILE *f, const char *prog)
{
	const char *base = strrchr(prog, '/');

	/* the program's name, not the path it was run by: the man page is made from this */
	prog = base != NULL ? base + 1 : prog;
	fprintf(f,
		"usage: %s [EAL options] -- [sigmad options]\n"
		"\n"
		"sigmad sums the gradient pushes of N workers and returns the sum to each\n"
		"(see docs/sigmad.md). Without --config it runs the embedded default config\n"
		"(print it with --print-config). Options override the config file.\n"
		"\n"
		"  --config FILE         INI file: sections [net] [layout] [resources] [live] [job N],\n"
		"                        [control] (control server, heartbeats; docs/control.md),\n"
		"                        [transport] type = dpdk|verbs|socket, [verbs]\n"
		"                        (docs/verbs.md), [socket] (kernel UDP sockets)\n"
		"  --print-config        print the embedded default config and exit\n"
		"  --ip A.B.C.D          our IPv4 address (ARP is answered for it)   [net] ip\n"
		"  --udp-port N          UDP port of the wire protocol             [net] udp_port\n"
		"  --mtu N               IP MTU, 576..9000                         [net] mtu\n"
		"  --no-udp-checksum     send UDP checksum 0 and do not verify it  [net] udp_checksum\n"
		"  --steer auto|flow|off\n"
		"                        rte_flow rule per reducer: udp_port+1+r -> its own RX\n"
		"                        queue; auto falls back to rings where a port refuses,\n"
		"                        flow makes that an error (default auto)   [net] steer\n"
		"  --io LIST             I/O lcores: \"(port,queue,lcore)[,...]\"     [layout] io\n"
		"  --reduce LIST         reducer lcores: \"lcore[,lcore|a-b...]\"     [layout] reduce\n"
		"  --rtc LIST            run-to-completion lcores: \"(port,queue,lcore)[,...]\"\n"
		"  --extra-rx LIST       more RX queues for io/rtc lcores: \"(port,queue,lcore)[,...]\"\n"
		"  --idle busy|sleep     idle policy of every lcore (sleep backs off, then sleeps)\n"
		"  --sleep-lcores LIST   lcores that back off and sleep anyway, e.g. \"2,3\"\n"
		"  --idle-sleep-us N     longest sleep of an idle lcore            [live] idle_sleep_us\n"
		"  --burst N             packets per RX/TX burst                   [resources] burst\n"
		"  --log-level LEVEL     emerg..debug                              [live] log_level\n"
		"  --duration SECONDS    stop after this long (default: run until SIGINT/SIGTERM)\n"
		"  --demo                sigma-demo only (sigmad has no traffic generator): start\n"
		"                        4 in-process workers on ring ports, check every sum,\n"
		"                        print goodput and the per-lcore table, and exit\n"
		"  --demo-workers N      workers the demo simulates (1..64, default 4)\n"
		"  --version             print the release and the wire protocol, control API\n"
		"                        and library versions, and exit\n"
		"  -h, --help            this text\n"
		"\n"
		"Layout examples (lcores are EAL lcores: enable them with -l or --lcores):\n"
		"  --rtc \"(0,0,1)\"                     lcore 1 receives port 0 queue 0 and sums\n"
		"  --io \"(0,0,1)\" --reduce 2-3         lcore 1 receives; lcores 2 and 3 each own\n"
		"                                      half of the keys (rte_ring hand-off)\n"
		"  --rtc \"(0,0,1),(0,1,2)\"             two queues, two lcores, each receiving and\n"
		"                                      summing; a push whose key the other lcore\n"
		"                                      owns is passed to it through its ring\n"
		"  --io \"(0,0,1),(1,0,2)\" --reduce 3   two ports, one reducer\n"
		"An lcore has one role. Reducers should sit on the NUMA node of the ports they\n"
		"serve: sigmad warns otherwise and names the lcore to move.\n"
		"\n"
		"Signals: SIGINT/SIGTERM stop RX, drain, print final stats and exit; SIGHUP\n"
		"re-reads the config: [live] keys apply at once, others are reported as needing\n"
		"a restart. Telemetry: /sigma/lcores /sigma/ports /sigma/jobs /sigma/drops\n"
		"(dpdk-telemetry.py -f <file-prefix>).\n",
		prog);
}

int sg_dp_config_parse_args(struct sg_dp_config *c, int argc, char **argv, char *err,
			    size_t errlen)
{
	const struct key_def *kd = NULL;
	bool layout_from_cli = false;
	int opt, rc = 0;
	uint64_t v;

	/* pass 1: --config and --help, so that the rest overrides the file */
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
		if (opt == 'h') {
			sg_dp_usage(stdout, argv[0]);
			return 1;
		}
		if (opt == OPT_PRINT_CONFIG) {
			fputs(sg_dp_default_config, stdout);
			return 1;
		}
		if (opt == OPT_VERSION) {
			fputs(SG_VERSION_TEXT("sigmad"), stdout);
			return 1;
		}
		if (opt == OPT_CONFIG) {
			snprintf(c->config_path, sizeof(c->config_path), "%s", optarg);
			rc = sg_dp_config_load_file(c, optarg, err, errlen);
			if (rc < 0)
				return rc;
		}
	}
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
		const char *name = NULL;

		kd = NULL;
		switch (opt) {
		case OPT_CONFIG:
			continue;
		case OPT_IO:
		case OPT_REDUCE:
		case OPT_RTC: {
			enum sg_role r = opt == OPT_IO ? SG_ROLE_IO :
					    opt == OPT_REDUCE ? SG_ROLE_REDUCE : SG_ROLE_RTC;
			/* the first layout option replaces the config's whole layout */
			if (!layout_from_cli) {
				c->n_lcores = c->n_extra_rx = 0;
				layout_from_cli = true;
			}
			rc = sg_dp_layout_parse(c, r, optarg, err, errlen);
			if (rc < 0)
				return rc;
			continue;
		}
		case OPT_EXTRA_RX:
			if (!layout_from_cli) {
				c->n_lcores = c->n_extra_rx = 0;
				layout_from_cli = true;
			}
			rc = extra_rx_parse(c, optarg, err, errlen);
			if (rc < 0)
				return rc;
			continue;
		case OPT_IP: name = "ip"; break;
		case OPT_UDP_PORT: name = "udp_port"; break;
		case OPT_MTU: name = "mtu"; break;
		case OPT_STEER: name = "steer"; break;
		case OPT_IDLE: name = "idle"; break;
		case OPT_IDLE_SLEEP: name = "idle_sleep_us"; break;
		case OPT_SLEEP_LCORES: name = "sleep_lcores"; break;
		case OPT_BURST: name = "burst"; break;
		case OPT_LOG_LEVEL: name = "log_level"; break;
		case OPT_NO_UDP_CSUM:
			c->udp_checksum = false;
			continue;
		case OPT_DEMO:
			c->demo = true;
			continue;
		case OPT_DEMO_WORKERS:
			if (cfg_num(optarg, 1, 64, &v) < 0) {
				sg_dp_seterr(err, errlen, "--demo-workers \"%s\": expected 1..64", optarg);
				return -EINVAL;
			}
			c->demo_workers = (unsigned int)v;
			continue;
		case OPT_DURATION: {
			double d;

			if (sg_parse_double(optarg, 0, 1e7, &d) != 0 || !(d > 0 && d < 1e7)) {
				sg_dp_seterr(err, errlen, "--duration \"%s\": expected seconds > 0", optarg);
				return -EINVAL;
			}
			c->duration_s = d;
			continue;
		}
		case '?':
		default:
			sg_dp_seterr(err, errlen, "unknown or incomplete option \"%s\" (see --help)",
			       argv[optind - 1]);
			return -EINVAL;
		}
		for (size_t k = 0; k < RTE_DIM(keys); k++)
			if (!strcmp(keys[k].name, name))
				kd = &keys[k];
		rc = apply_key(c, kd, optarg, err, errlen);
		if (rc < 0)
			return rc;
	}
	if (optind < argc) {
		sg_dp_seterr(err, errlen, "unexpected argument \"%s\" (sigmad takes options only)",
		       argv[optind]);
		return -EINVAL;
	}
	return 0;
}

/*
 * Layout checks.
 */

void sg_dp_topology_probe(struct sg_dp_topology *t)
{
	struct rte_eth_dev_info info;
	uint16_t pid;

	memset(t, 0, sizeof(*t));
	t->main_lcore = rte_get_main_lcore();
	for (unsigned int l = 0; l < RTE_MAX_LCORE && l < RTE_DIM(t->lcore_enabled); l++) {
		t->lcore_enabled[l] = rte_lcore_is_enabled(l);
		t->lcore_node[l] = (int)rte_lcore_to_socket_id(l);
	}
	RTE_ETH_FOREACH_DEV(pid) {
		if (pid >= SG_DP_MAX_PORTS)
			break;
		t->n_ports = pid + 1u;
		t->port_node[pid] = rte_eth_dev_socket_id(pid);
		if (rte_eth_dev_info_get(pid, &info) == 0) {
			t->max_rxq[pid] = info.max_rx_queues;
			t->max_txq[pid] = info.max_tx_queues;
		}
	}
}

int sg_dp_layout_check(const struct sg_dp_config *c, const struct sg_dp_topology *t, char *err,
		       size_t errlen, FILE *warn, unsigned int *n_warn)
{
	unsigned int nred = 0, nrx = 0, warns = 0;
	uint32_t qmask[SG_DP_MAX_PORTS] = {0};
	unsigned int nq[SG_DP_MAX_PORTS] = {0};

	for (unsigned int i = 0; i < c->n_lcores; i++) {
		const struct sg_dp_lcore_cfg *a = &c->lcores[i];

		nred += (a->role & SG_ROLE_REDUCE) != 0;
		nrx += (a->role & SG_ROLE_IO) != 0;
		if (a->lcore >= RTE_DIM(t->lcore_enabled) || !t->lcore_enabled[a->lcore]) {
			sg_dp_seterr(err, errlen, "layout %s: lcore %u is not enabled by EAL: add it to "
			       "EAL's -l/--lcores list, or pick an enabled lcore",
			       layout_key(a->role), a->lcore);
			return -EINVAL;
		}
		if (a->lcore == t->main_lcore) {
			sg_dp_seterr(err, errlen, "layout %s: lcore %u is EAL's main lcore, which runs "
			       "sigmad's main loop (signals, reload, stats): give EAL another --main-lcore or use "
			       "another lcore", layout_key(a->role), a->lcore);
			return -EINVAL;
		}
		for (unsigned int j = 0; j < i; j++)
			if (c->lcores[j].lcore == a->lcore) {
				bool same = c->lcores[j].role == a->role;

				sg_dp_seterr(err, errlen, "layout: lcore %u has two roles (%s and %s): an "
				       "lcore has one role; %s", a->lcore,
				       layout_key(c->lcores[j].role), layout_key(a->role),
				       same && a->role != SG_ROLE_REDUCE ?
				       "to poll two queues, give each its own lcore" :
				       "to receive and reduce on one lcore, list it once in rtc");
				return -EINVAL;
			}
		if (a->role & SG_ROLE_IO) {
			if (a->port >= t->n_ports) {
				sg_dp_seterr(err, errlen, "layout %s: port %u does not exist (%u port%s: "
				       "add a --vdev or a PCI device to EAL)", layout_key(a->role),
				       a->port, t->n_ports, t->n_ports == 1 ? "" : "s");
				return -EINVAL;
			}
			if (a->queue >= 32 || (qmask[a->port] >> a->queue) & 1) {
				sg_dp_seterr(err, errlen, "layout %s: port %u queue %u is polled twice or is "
				       "above 31", layout_key(a->role), a->port, a->queue);
				return -EINVAL;
			}
			qmask[a->port] |= 1u << a->queue;
			nq[a->port]++;
		}
	}
	for (unsigned int i = 0; i < c->n_extra_rx; i++) {
		const struct sg_dp_lcore_cfg *x = &c->extra_rx[i];
		bool rx = false;

		for (unsigned int j = 0; j < c->n_lcores; j++)
			rx |= c->lcores[j].lcore == x->lcore && (c->lcores[j].role & SG_ROLE_IO);
		if (!rx) {
			sg_dp_seterr(err, errlen, "layout extra_rx (%u,%u,%u): lcore %u does not "
				     "receive: name it in io or rtc first", x->port, x->queue,
				     x->lcore, x->lcore);
			return -EINVAL;
		}
		if (x->port >= t->n_ports) {
			sg_dp_seterr(err, errlen, "layout extra_rx: port %u does not exist (%u port%s: "
				     "add a --vdev or a PCI device to EAL)", x->port, t->n_ports,
				     t->n_ports == 1 ? "" : "s");
			return -EINVAL;
		}
		if (x->queue >= 32 || (qmask[x->port] >> x->queue) & 1) {
			sg_dp_seterr(err, errlen, "layout extra_rx: port %u queue %u is polled twice "
				     "or is above 31", x->port, x->queue);
			return -EINVAL;
		}
		qmask[x->port] |= 1u << x->queue;
		nq[x->port]++;
	}
	if (nred == 0) {
		sg_dp_seterr(err, errlen, "layout: no reducer lcore: add --reduce LCORES or use --rtc");
		return -EINVAL;
	}
	if (nrx == 0) {
		sg_dp_seterr(err, errlen, "layout: no lcore receives: add --io \"(port,queue,lcore)\" or "
		       "--rtc \"(port,queue,lcore)\"");
		return -EINVAL;
	}
	for (unsigned int p = 0; p < t->n_ports && p < SG_DP_MAX_PORTS; p++) {
		if (nq[p] == 0)
			continue; /* a port the layout does not poll is never set up */
		if (qmask[p] != (nq[p] >= 32 ? UINT32_MAX : (1u << nq[p]) - 1)) {
			sg_dp_seterr(err, errlen, "layout: RX queues of port %u must be numbered 0..%u "
			       "without gaps", p, nq[p] ? nq[p] - 1 : 0);
			return -EINVAL;
		}
		if (nq[p] > t->max_rxq[p]) {
			sg_dp_seterr(err, errlen, "layout: port %u has %u RX queues, the layout polls %u: "
			       "use fewer queues on it", p, t->max_rxq[p], nq[p]);
			return -EINVAL;
		}
		if (c->n_lcores > t->max_txq[p]) {
			sg_dp_seterr(err, errlen, "layout: every lcore needs a TX queue on port %u, which "
			       "has %u: use at most %u lcores (net_af_packet: give the vdev "
			       "qpairs=%u)", p,
			       t->max_txq[p], t->max_txq[p], c->n_lcores);
			return -EINVAL;
		}
	}
	/* NUMA: warn, since it works, only slower (remote memory on every packet) */
	for (unsigned int i = 0; i < c->n_lcores; i++) {
		const struct sg_dp_lcore_cfg *a = &c->lcores[i];
		int ln = t->lcore_node[a->lcore];

		for (unsigned int p = 0; p < t->n_ports; p++) {
			int pn = t->port_node[p];
			bool serves = (a->role & SG_ROLE_REDUCE) || a->port == p;

			if (!serves || nq[p] == 0 || pn < 0 || pn == ln)
				continue;
			warns++;
			if (warn)
				fprintf(warn, "sigmad: warning: %s lcore %u is on NUMA node %d but port "
					"%u is on node %d: every packet crosses the interconnect; "
					"move lcore %u to a CPU of node %d (EAL --lcores) or serve the "
					"port from a node-%d lcore\n", layout_key(a->role), a->lcore,
					ln, p, pn, a->lcore, pn, pn);
		}
	}
	if (n_warn)
		*n_warn = warns;
	return 0;
}

int sg_dp_layout_port0(const struct sg_dp_config *c, struct sg_dp_topology *t, const char *type,
		       const char *what, char *err, size_t errlen)
{
	for (unsigned int i = 0; i < c->n_lcores; i++) {
		const struct sg_dp_lcore_cfg *a = &c->lcores[i];

		if ((a->role & SG_ROLE_IO) && a->port != 0) {
			sg_dp_seterr(err, errlen, "layout %s (%u,%u,%u): with [transport] type = %s "
				     "every entry is on port 0 (%s): write (0,%u,%u)",
				     layout_key(a->role), a->port, a->queue, a->lcore, type, what,
				     a->queue, a->lcore);
			return -EINVAL;
		}
	}
	t->n_ports = 1;
	t->port_node[0] = -1;
	t->max_rxq[0] = 32;
	t->max_txq[0] = SG_DP_MAX_LAYOUT;
	return 0;
}

uint32_t sg_dp_job_chunk_bytes(const struct sg_dp_config *c, const struct sg_dp_job_cfg *j)
{
	if (j->chunk_bytes)
		return j->chunk_bytes;
	return RTE_ALIGN_FLOOR((uint32_t)c->mtu - SG_DP_IPUDP_LEN - SG_DP_HDR_LEN -
			       (j->auth ? SG_DP_MAC_TRAILER : 0), 8u);
}
