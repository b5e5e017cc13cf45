/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmad's own sections of its config file, [control] and [cluster]
 * (sg_dp_agent_config.h): their hooks for the pipeline's loader, the server's
 * settings from them, and SIGHUP's comparison of two of them.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cfgfile.h>
#include <rte_common.h>

#include "sg_ctl_client.h"
#include "sg_dp_agent_config.h"
#include "sg_parse.h"

/* [cluster]: every key a string of a bounded length, checked where it is used. */
static int load_cluster(void *arg, struct rte_cfgfile *cf, const char *sec, char *err,
			size_t errlen)
{
	struct sg_dp_agent_sections *s = arg;
	struct sg_dp_cluster_cfg *cl = &s->cluster;
	const struct {
		const char *key;
		char *dst;
		size_t cap;
	} ckeys[] = {
		{"etcd", cl->etcd, sizeof(cl->etcd)}, {"cluster", cl->cluster, sizeof(cl->cluster)},
		{"addr", cl->addr, sizeof(cl->addr)}, {"user", cl->user, sizeof(cl->user)},
		{"password_file", cl->password_file, sizeof(cl->password_file)},
		{"ca_file", cl->ca_file, sizeof(cl->ca_file)},
		{"cert_file", cl->cert_file, sizeof(cl->cert_file)},
		{"key_file", cl->key_file, sizeof(cl->key_file)},
	};
	int n = rte_cfgfile_section_num_entries(cf, sec);
	struct rte_cfgfile_entry *ents = calloc(n > 0 ? n : 1, sizeof(*ents));
	int rc = 0;

	if (ents == NULL)
		return -ENOMEM;
	memset(cl, 0, sizeof(*cl));
	snprintf(cl->cluster, sizeof(cl->cluster), "default");
	cl->ttl = 5;
	rte_cfgfile_section_entries(cf, sec, ents, n);
	for (int e = 0; e < n && rc == 0; e++) {
		const char *k = ents[e].name, *v = ents[e].value;
		size_t i;

		if (!strcmp(k, "ttl")) {
			uint64_t t = 0;

			if (sg_parse_u64(v, 1, 3600, &t) != 0) {
				sg_dp_seterr(err, errlen, "[cluster] ttl = \"%s\": expected seconds in "
					     "[1, 3600]", v);
				rc = -EINVAL;
			}
			cl->ttl = (unsigned int)t;
			continue;
		}
		for (i = 0; i < RTE_DIM(ckeys) && strcmp(ckeys[i].key, k); i++)
			;
		if (i == RTE_DIM(ckeys)) {
			sg_dp_seterr(err, errlen, "[cluster]: unknown key %s (known: etcd, cluster, "
				     "ttl, addr, user, password_file, ca_file, cert_file, key_file)", k);
			rc = -EINVAL;
		} else if (*v == '\0' || strlen(v) >= ckeys[i].cap) {
			sg_dp_seterr(err, errlen, "[cluster] %s: empty or longer than %zu", k,
				     ckeys[i].cap - 1);
			rc = -EINVAL;
		} else {
			snprintf(ckeys[i].dst, ckeys[i].cap, "%s", v);
		}
	}
	free(ents);
	if (rc == 0 && cl->etcd[0] == '\0') {
		sg_dp_seterr(err, errlen, "[cluster]: etcd = http://host:port[,...] is required");
		rc = -EINVAL;
	}
	return rc;
}

static const char *const agent_keys[] = {"name", "kind", "gbps", "coordinator", "heartbeat_ms"};

static int agent_key(struct sg_dp_agent_conf *ac, const char *k, const char *v, char *err,
		     size_t errlen)
{
	if (!strcmp(k, "name")) {
		if (*v == '\0' || strlen(v) >= sizeof(ac->name) || strchr(v, '"') || strchr(v, '\\'))
			goto bad;
		snprintf(ac->name, sizeof(ac->name), "%s", v);
	} else if (!strcmp(k, "kind")) {
		enum sg_node_kind kind;

		if (sg_node_kind_from_name(v, &kind) < 0)
			goto bad;
		ac->kind = kind;
	} else if (!strcmp(k, "gbps")) {
		if (sg_parse_double(v, 0, 100000, &ac->gbps) != 0 || !(ac->gbps > 0))
			goto bad;
	} else if (!strcmp(k, "coordinator")) {
		if (strlen(v) >= sizeof(ac->coordinator) || (strchr(v, ':') == NULL && !strchr(v, '/')))
			goto bad;
		snprintf(ac->coordinator, sizeof(ac->coordinator), "%s", v);
	} else {
		uint64_t ms;

		if (sg_parse_u64(v, 10, 600000, &ms) != 0)
			goto bad;
		ac->heartbeat_ms = (unsigned int)ms;
	}
	return 0;
bad:
	sg_dp_seterr(err, errlen, "[control] %s = \"%s\": expected %s", k, v,
		     !strcmp(k, "name") ? "a node name of 1..63 characters without quotes" :
		     !strcmp(k, "kind") ? "cpu or gpu" :
		     !strcmp(k, "gbps") ? "a bandwidth in Gbit/s in (0, 100000]" :
		     !strcmp(k, "coordinator") ? "host:port or unix:/path of the coordinator" :
		     "a period in ms in [10, 600000]");
	return -EINVAL;
}

/* sg_ctl_config_hook: sigmad's keys of [control]; the server's keys go to control/. */
static int agent_hook(void *arg, const char *k, const char *v, char *err, size_t errlen)
{
	struct sg_dp_agent_conf *ac = arg;

	for (size_t i = 0; i < RTE_DIM(agent_keys); i++)
		if (!strcmp(k, agent_keys[i]))
			return agent_key(ac, k, v, err, errlen) == 0 ? 1 : -EINVAL;
	return 0;
}

/*
 * `[control]`: the agent's keys (name, kind, gbps, coordinator, heartbeat_ms) into
 * @p ac, every other key into @p sc / @p store, in one pass (sg_ctl_config_load_ext()).
 */
static int load_control_section(struct rte_cfgfile *cf, struct sg_dp_agent_conf *ac,
				struct sg_ctl_server_config *sc, struct sg_ctl_config_store *store,
				char *err, size_t errlen)
{
	const struct sg_ctl_config_hook hook = {
		.key = agent_hook, .arg = ac, .keys = "name, kind, gbps, coordinator, heartbeat_ms"};
	int rc;

	memset(ac, 0, sizeof(*ac));
	ac->kind = SG_NODE_CPU;
	rc = sg_ctl_config_load_ext(cf, "control", sc, store, &hook, err, errlen);
	if (rc == 0 && ac->coordinator[0] && sg_ctl_target_is_tcp(ac->coordinator) &&
	    sc->secret == NULL) {
		sg_dp_seterr(err, errlen, "[control] coordinator = %s: a TCP coordinator needs the "
			     "shared secret: add secret_file", ac->coordinator);
		rc = -EINVAL;
	}
	return rc;
}

/*
 * [control], parsed here once per load and kept: sigmad starts and reloads the
 * agent from it; a later file's [control] replaces an earlier one whole.
 */
static int load_control(void *arg, struct rte_cfgfile *cf, const char *sec, char *err,
			size_t errlen)
{
	struct sg_dp_agent_sections *s = arg;
	struct sg_dp_control_cfg *ctl = &s->ctl;
	int rc;

	(void)sec;
	memset(ctl, 0, sizeof(*ctl));
	rc = load_control_section(cf, &ctl->ac, &ctl->sc, &ctl->store, err, errlen);
	s->control = rc == 0;
	if (rc < 0)
		explicit_bzero(ctl, sizeof(*ctl));
	return rc;
}

void sg_dp_agent_sections_init(struct sg_dp_agent_sections *s, struct sg_dp_config *c)
{
	memset(s, 0, sizeof(*s));
	c->sections[0] = (struct sg_dp_config_section){"control", load_control, s};
	c->sections[1] = (struct sg_dp_config_section){"cluster", load_cluster, s};
	c->n_sections = 2;
}

void sg_dp_agent_sections_server(const struct sg_dp_agent_sections *s,
				 struct sg_ctl_server_config *sc)
{
	const struct sg_dp_control_cfg *ctl = &s->ctl;

	*sc = ctl->sc;
	/* the parsed pointers name the store of the config parsed into, which may be
	 * another copy: point them at this one's */
	sc->tcp_addr = ctl->sc.tcp_addr ? ctl->store.tcp_addr : NULL;
	sc->unix_path = ctl->sc.unix_path ? ctl->store.unix_path : NULL;
	sc->metrics_addr = ctl->sc.metrics_addr ? ctl->store.metrics_addr : NULL;
	sc->secret = ctl->sc.secret_len ? ctl->store.secret : NULL;
	sc->ops = NULL;
	sc->ops_arg = NULL;
}

/* "addr:port" or "off" */
static const char *hostport_str(bool on, const char *addr, uint16_t port, char *buf, size_t len)
{
	if (!on)
		return "off";
	snprintf(buf, len, "%s:%u", addr && addr[0] ? addr : "127.0.0.1", port);
	return buf;
}

int sg_dp_agent_sections_diff(const struct sg_dp_agent_sections *old,
			      const struct sg_dp_agent_sections *nc, FILE *report)
{
#define LIMIT(f) {#f, offsetof(struct sg_ctl_server_config, f), \
		  sizeof(((struct sg_ctl_server_config *)0)->f)}
	static const struct {
		const char *key;
		size_t off, size;
	} limits[] = {
		LIMIT(max_frame), LIMIT(max_conns), LIMIT(idle_timeout_ms),
		LIMIT(frame_timeout_ms), LIMIT(auth_timeout_ms), LIMIT(heartbeat_timeout_ms),
	};
#undef LIMIT
	struct sg_ctl_server_config a, b;
	char names[512] = "", va[96], vb[96];
	const char *pa, *pb;
	size_t off = 0;
	int n = 0;

	sg_dp_agent_sections_server(old, &a);
	sg_dp_agent_sections_server(nc, &b);
#define CHANGED(key, fmt, ...)                                                              \
	do {                                                                                \
		n++;                                                                        \
		if (off < sizeof(names))                                                    \
			off += (size_t)snprintf(names + off, sizeof(names) - off, "%s" key " (" \
						fmt ")", n > 1 ? ", " : "", __VA_ARGS__);   \
	} while (0)
	pa = hostport_str(!a.tcp_disable, a.tcp_addr, a.tcp_port, va, sizeof(va));
	pb = hostport_str(!b.tcp_disable, b.tcp_addr, b.tcp_port, vb, sizeof(vb));
	if (strcmp(pa, pb))
		CHANGED("listen", "%s -> %s", pa, pb);
	if (strcmp(a.unix_path ? a.unix_path : "off", b.unix_path ? b.unix_path : "off"))
		CHANGED("unix", "%s -> %s", a.unix_path ? a.unix_path : "off",
			b.unix_path ? b.unix_path : "off");
	/* the secret itself, not its file's name: a moved file with the same key is no change */
	if (a.secret_len != b.secret_len ||
	    (a.secret_len && memcmp(a.secret, b.secret, a.secret_len)))
		CHANGED("secret_file", "%s", "another secret");
	pa = hostport_str(a.metrics_enable, a.metrics_addr, a.metrics_port, va, sizeof(va));
	pb = hostport_str(b.metrics_enable, b.metrics_addr, b.metrics_port, vb, sizeof(vb));
	if (strcmp(pa, pb))
		CHANGED("metrics", "%s -> %s", pa, pb);
	for (size_t i = 0; i < RTE_DIM(limits); i++) {
		const char *fa = (const char *)&a + limits[i].off, *fb = (const char *)&b + limits[i].off;
		uint64_t x = limits[i].size == 8 ? *(const uint64_t *)fa : *(const uint32_t *)fa;
		uint64_t y = limits[i].size == 8 ? *(const uint64_t *)fb : *(const uint32_t *)fb;

		if (x != y)
			CHANGED("%s", "%" PRIu64 " -> %" PRIu64, limits[i].key, x, y);
	}
#undef CHANGED
	if (n && report)
		fprintf(report, "sigmad: SIGHUP: [control] listen, unix, secret_file, metrics or limits "
			"changed: needs a restart: %s\n", names);
	return n;
}
