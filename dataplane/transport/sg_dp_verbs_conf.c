/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Verbs transport: the parts that need no device. Configuration, the memlock
 * verdict, GID choice, work-request building and UD source addressing. Kept
 * apart from sg_dp_verbs.c so that each is testable on its own.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <rte_cfgfile.h>

#include "sg_dp_verbs.h"
#include "sg_parse.h"

void sg_dp_verbs_conf_defaults(struct sg_dp_verbs_conf *c)
{
	memset(c, 0, sizeof(*c));
	c->port = 1;
	c->gid_index = -1;
	c->mode = SG_DP_VERBS_UD;
	c->qkey = SG_DP_VERBS_QKEY_DEFAULT;
	c->recv_depth = 1024;
	c->send_depth = 1024;
	c->max_peers = 4096;
	c->poll_batch = 32;
	c->rc_slots = 64;
	c->numa_node = -1;
}

const char *sg_dp_verbs_mode_name(enum sg_dp_verbs_mode m)
{
	switch (m) {
	case SG_DP_VERBS_UD:
		return "ud";
	case SG_DP_VERBS_RC:
		return "rc";
	}
	return "unknown";
}

/* One numeric key: its name, bounds and where it goes. */
struct num_key {
	const char *name;
	uint64_t lo, hi;
	size_t off;
	unsigned int size; /* 1 or 4 bytes */
};

#define NK(n, l, h, f) { #n, l, h, offsetof(struct sg_dp_verbs_conf, f), \
		       sizeof(((struct sg_dp_verbs_conf *)0)->f) }
static const struct num_key num_keys[] = {
	NK(port, 1, 255, port),
	NK(qkey, 1, UINT32_MAX, qkey),
	NK(recv_depth, 16, 65536, recv_depth),
	NK(send_depth, 16, 65536, send_depth),
	NK(max_peers, 1, SG_DP_VERBS_MAX_PEERS, max_peers),
	NK(mtu, 0, 65536, mtu),
	NK(poll_batch, 1, 256, poll_batch),
	NK(rc_slots, 1, 65536, rc_slots),
};
#undef NK

int sg_dp_verbs_conf_set(struct sg_dp_verbs_conf *c, const char *key, const char *value,
			 char *err, size_t errlen)
{
	uint64_t v;

	if (key == NULL || value == NULL) {
		snprintf(err, errlen, "[verbs]: missing key or value");
		return -EINVAL;
	}
	if (strcmp(key, "device") == 0) {
		if (strlen(value) >= sizeof(c->device)) {
			snprintf(err, errlen, "[verbs] device = \"%.80s\": longer than %zu characters",
				 value, sizeof(c->device) - 1);
			return -EINVAL;
		}
		snprintf(c->device, sizeof(c->device), "%s", value);
		return 0;
	}
	if (strcmp(key, "mode") == 0) {
		if (strcmp(value, "ud") == 0)
			c->mode = SG_DP_VERBS_UD;
		else if (strcmp(value, "rc") == 0)
			c->mode = SG_DP_VERBS_RC;
		else {
			snprintf(err, errlen, "[verbs] mode = \"%.80s\": expected ud or rc", value);
			return -EINVAL;
		}
		return 0;
	}
	if (strcmp(key, "gid_index") == 0 || strcmp(key, "numa_node") == 0) {
		bool gid = key[0] == 'g';
		uint64_t hi = gid ? 255 : 1023;

		/* "auto" (or -1) lets the transport choose */
		if (strcmp(value, "auto") == 0 || strcmp(value, "-1") == 0)
			v = UINT64_MAX;
		else if (sg_parse_u64x(value, 0, hi, &v) < 0) {
			snprintf(err, errlen,
				 "[verbs] %s = \"%.80s\": expected auto, -1 or an integer in [0, %" PRIu64 "]",
				 key, value, hi);
			return -EINVAL;
		}
		*(gid ? &c->gid_index : &c->numa_node) = v == UINT64_MAX ? -1 : (int)v;
		return 0;
	}
	for (size_t i = 0; i < sizeof(num_keys) / sizeof(num_keys[0]); i++) {
		const struct num_key *k = &num_keys[i];

		if (strcmp(key, k->name) != 0)
			continue;
		if (sg_parse_u64x(value, k->lo, k->hi, &v) < 0) {
			snprintf(err, errlen,
				 "[verbs] %s = \"%.80s\": expected an integer in [%" PRIu64 ", %" PRIu64 "]",
				 key, value, k->lo, k->hi);
			return -EINVAL;
		}
		if (k->size == 1)
			*((uint8_t *)c + k->off) = (uint8_t)v;
		else
			memcpy((uint8_t *)c + k->off, &(uint32_t){(uint32_t)v}, 4);
		return 0;
	}
	snprintf(err, errlen,
		 "[verbs] unknown key \"%.80s\" (known: device, port, gid_index, mode, qkey, "
		 "recv_depth, send_depth, max_peers, mtu, poll_batch, rc_slots, numa_node)", key);
	return -EINVAL;
}

int sg_dp_verbs_conf_load(struct sg_dp_verbs_conf *c, void *cfgfile, const char *section,
			  char *err, size_t errlen)
{
	struct rte_cfgfile *cfg = cfgfile;
	struct rte_cfgfile_entry *ents;
	int n, rc = 0;

	if (cfg == NULL || section == NULL) {
		snprintf(err, errlen, "verbs: no config file or section");
		return -EINVAL;
	}
	if (!rte_cfgfile_has_section(cfg, section))
		return 0;
	n = rte_cfgfile_section_num_entries(cfg, section);
	if (n <= 0)
		return 0;
	ents = calloc((size_t)n, sizeof(*ents));
	if (ents == NULL) {
		snprintf(err, errlen, "verbs: out of memory reading [%s]", section);
		return -ENOMEM;
	}
	n = rte_cfgfile_section_entries(cfg, section, ents, n);
	for (int i = 0; i < n && rc == 0; i++)
		rc = sg_dp_verbs_conf_set(c, ents[i].name, ents[i].value, err, errlen);
	free(ents);
	return rc < 0 ? rc : sg_dp_verbs_conf_check(c, err, errlen);
}

int sg_dp_verbs_conf_check(const struct sg_dp_verbs_conf *c, char *err, size_t errlen)
{
	if (c->port == 0) {
		snprintf(err, errlen, "[verbs] port = 0: ports are numbered from 1");
		return -EINVAL;
	}
	if (c->gid_index < -1 || c->gid_index > 255) {
		snprintf(err, errlen, "[verbs] gid_index = %d: expected auto or [0, 255]",
			 c->gid_index);
		return -EINVAL;
	}
	if (c->mode != SG_DP_VERBS_UD && c->mode != SG_DP_VERBS_RC) {
		snprintf(err, errlen, "[verbs] mode = %d: expected ud or rc", (int)c->mode);
		return -EINVAL;
	}
	if (c->recv_depth < 16 || c->send_depth < 16 || c->recv_depth > 65536 ||
	    c->send_depth > 65536) {
		snprintf(err, errlen,
			 "[verbs] recv_depth = %u, send_depth = %u: each must be in [16, 65536]",
			 c->recv_depth, c->send_depth);
		return -EINVAL;
	}
	if (c->max_peers == 0 || c->max_peers > SG_DP_VERBS_MAX_PEERS) {
		snprintf(err, errlen, "[verbs] max_peers = %u: expected [1, %u]", c->max_peers,
			 SG_DP_VERBS_MAX_PEERS);
		return -EINVAL;
	}
	if (c->poll_batch == 0 || c->poll_batch > 256) {
		snprintf(err, errlen, "[verbs] poll_batch = %u: expected [1, 256]", c->poll_batch);
		return -EINVAL;
	}
	if (c->mode == SG_DP_VERBS_RC && (c->rc_slots == 0 || c->rc_slots > c->recv_depth)) {
		snprintf(err, errlen,
			 "[verbs] rc_slots = %u: expected [1, recv_depth = %u] (slots per connection)",
			 c->rc_slots, c->recv_depth);
		return -EINVAL;
	}
	if (c->mtu != 0 && (c->mtu < SG_DP_HDR_LEN + 8 ||
			    c->mtu > SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD)) {
		snprintf(err, errlen,
			 "[verbs] mtu = %u: expected 0 (the port's) or [%u, %u] bytes, header included",
			 c->mtu, SG_DP_HDR_LEN + 8, SG_DP_HDR_LEN + SG_DP_MAX_PAYLOAD);
		return -EINVAL;
	}
	if (c->numa_node < -1 || c->numa_node > 1023) {
		snprintf(err, errlen, "[verbs] numa_node = %d: expected -1 or [0, 1023]",
			 c->numa_node);
		return -EINVAL;
	}
	return 0;
}

int sg_dp_verbs_memlock_check(uint64_t need, uint64_t limit, uint64_t locked, bool cap_ipc_lock,
			      char *err, size_t errlen)
{
	uint64_t mib = 1 << 20;
	uint64_t want;

	if (cap_ipc_lock || limit == UINT64_MAX)
		return 0;
	if (locked <= limit && need <= limit - locked)
		return 0;
	/* Round the suggestion up to whole MiB, with headroom for CQs and QPs. */
	want = (locked + need + 2 * mib + mib - 1) / mib;
	snprintf(err, errlen,
		 "verbs: registering %" PRIu64 " KiB of buffers needs a larger locked-memory limit: "
		 "RLIMIT_MEMLOCK is %" PRIu64 " KiB with %" PRIu64 " KiB locked already. "
		 "Raise it to at least %" PRIu64 " MiB (or unlimited): 'ulimit -l unlimited' in the "
		 "shell that starts sigmad, '* - memlock unlimited' in /etc/security/limits.conf, "
		 "LimitMEMLOCK=infinity in a systemd unit, '--ulimit memlock=-1' for docker; "
		 "or lower [verbs] recv_depth/send_depth",
		 need / 1024, limit / 1024, locked / 1024, want);
	return -ENOMEM;
}

static bool gid_is_zero(const union ibv_gid *g)
{
	static const uint8_t zero[16];

	return memcmp(g->raw, zero, 16) == 0;
}

static bool gid_is_ipv4_mapped(const union ibv_gid *g)
{
	static const uint8_t pfx[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	return memcmp(g->raw, pfx, 12) == 0;
}

int sg_dp_verbs_gid_select(const struct ibv_gid_entry *e, unsigned int n, bool ethernet)
{
	int first_v2 = -1, first_any = -1;

	for (unsigned int i = 0; i < n; i++) {
		if (gid_is_zero(&e[i].gid))
			continue;
		if (first_any < 0)
			first_any = (int)e[i].gid_index;
		if (!ethernet)
			break;
		if (e[i].gid_type != IBV_GID_TYPE_ROCE_V2)
			continue;
		if (gid_is_ipv4_mapped(&e[i].gid))
			return (int)e[i].gid_index;
		if (first_v2 < 0)
			first_v2 = (int)e[i].gid_index;
	}
	if (first_v2 >= 0)
		return first_v2;
	return first_any >= 0 ? first_any : -ENOENT;
}

uint32_t sg_dp_verbs_mtu_bytes(enum ibv_mtu mtu)
{
	if (mtu < IBV_MTU_256 || mtu > IBV_MTU_4096)
		return 0;
	return 128u << mtu;
}

int sg_dp_verbs_wr_id_decode(uint64_t wr_id, enum sg_dp_verbs_wr_kind *kind, uint32_t *idx)
{
	uint64_t k = wr_id >> 32;

	if (k != SG_DP_VERBS_WR_RECV && k != SG_DP_VERBS_WR_SEND)
		return -EINVAL;
	*kind = (enum sg_dp_verbs_wr_kind)k;
	*idx = (uint32_t)wr_id;
	return 0;
}

static void fill_sge(struct ibv_sge *sge, void *addr, uint32_t len, uint32_t lkey)
{
	sge->addr = (uintptr_t)addr;
	sge->length = len;
	sge->lkey = lkey;
}

void sg_dp_verbs_build_recv(struct ibv_recv_wr *wr, struct ibv_sge *sge, uint32_t idx,
			    void *addr, uint32_t len, uint32_t lkey)
{
	fill_sge(sge, addr, len, lkey);
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = sg_dp_verbs_wr_id(SG_DP_VERBS_WR_RECV, idx);
	wr->sg_list = sge;
	wr->num_sge = 1;
}

static void build_send_common(struct ibv_send_wr *wr, struct ibv_sge *sge, uint32_t idx,
			      void *addr, uint32_t len, uint32_t lkey)
{
	fill_sge(sge, addr, len, lkey);
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = sg_dp_verbs_wr_id(SG_DP_VERBS_WR_SEND, idx);
	wr->sg_list = sge;
	wr->num_sge = 1;
	/* Every send is signalled: its completion is what frees the buffer. */
	wr->send_flags = IBV_SEND_SIGNALED;
}

void sg_dp_verbs_build_ud_send(struct ibv_send_wr *wr, struct ibv_sge *sge, uint32_t idx,
			       void *addr, uint32_t len, uint32_t lkey, struct ibv_ah *ah,
			       uint32_t qpn, uint32_t qkey)
{
	build_send_common(wr, sge, idx, addr, len, lkey);
	wr->opcode = IBV_WR_SEND;
	wr->wr.ud.ah = ah;
	wr->wr.ud.remote_qpn = qpn;
	wr->wr.ud.remote_qkey = qkey;
}

void sg_dp_verbs_build_rc_write_imm(struct ibv_send_wr *wr, struct ibv_sge *sge, uint32_t idx,
				    void *addr, uint32_t len, uint32_t lkey, uint64_t raddr,
				    uint32_t rkey, uint32_t slot, uint32_t stride)
{
	build_send_common(wr, sge, idx, addr, len, lkey);
	wr->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr->imm_data = htonl(slot);
	wr->wr.rdma.remote_addr = raddr + (uint64_t)slot * stride;
	wr->wr.rdma.rkey = rkey;
}

int sg_dp_verbs_peer_from_wc(const struct ibv_wc *wc, const void *grh, uint8_t port,
			     uint8_t gid_index, bool need_grh, bool ipv4_mapped,
			     struct sg_dp_verbs_peer_key *key, struct ibv_ah_attr *ah)
{
	const uint8_t *g = grh;
	bool has_grh = (wc->wc_flags & IBV_WC_GRH) != 0;

	memset(key, 0, sizeof(*key));
	memset(ah, 0, sizeof(*ah));
	key->qpn = wc->src_qp & 0xffffff;
	key->lid = wc->slid;
	ah->dlid = wc->slid;
	ah->sl = wc->sl;
	ah->src_path_bits = wc->dlid_path_bits;
	ah->port_num = port;
	if (!has_grh)
		return need_grh ? -EBADMSG : 0;

	ah->is_global = 1;
	ah->grh.sgid_index = gid_index;
	ah->grh.hop_limit = 0xff;
	if (ipv4_mapped) {
		/* RoCE v2 over IPv4: bytes 20..39 are the IPv4 header. */
		const uint8_t *ip = g + 20;

		if ((ip[0] >> 4) != 4 || (ip[0] & 0xf) != 5)
			return -EBADMSG;
		key->gid[10] = 0xff;
		key->gid[11] = 0xff;
		memcpy(&key->gid[12], ip + 12, 4);
		ah->grh.traffic_class = ip[1];
	} else {
		uint32_t vtf;

		memcpy(&vtf, g, 4);
		vtf = ntohl(vtf);
		if ((vtf >> 28) != 6)
			return -EBADMSG;
		memcpy(key->gid, g + 8, 16); /* source GID */
		ah->grh.traffic_class = (uint8_t)(vtf >> 20);
		ah->grh.flow_label = vtf & 0xfffff;
	}
	memcpy(ah->grh.dgid.raw, key->gid, 16);
	return 0;
}
