/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmad's lcore pipeline: reducer rings, one aggregation engine per reducer
 * lcore, and the lcore loops that connect them. Bytes move through a
 * transport (struct sg_dp_transport, sg_dp_transport.h); the DPDK ethdev one
 * is in sg_dp_eth.c, the kernel UDP one ([transport] type = socket) in
 * sg_dp_sock.c, the rdma-core one ([transport] type = verbs) in
 * sg_dp_verbs_tp.c.
 *
 * Data path of one push: an I/O (or run-to-completion) lcore receives the
 * frame, checks Ethernet/IPv4/UDP (sg_dp_net_classify), and picks the reducer
 * that owns the datagram's (job, key). If that is itself it sums at once;
 * otherwise the mbuf goes to the owner's rte_ring. The reducer gives the
 * payload to its engine; the engine's replies are built straight into fresh
 * mbufs (tx_alloc/tx_send) and sent on the reducer's own TX queue of the
 * port the worker talks through. A RESULT for all N workers is built once
 * and sent as N small header mbufs chained to it (tx_alloc_multi/send_multi). Nothing on this path allocates from the
 * heap or takes a lock.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include "sg_config.h"
#include "sg_dp_chan.h"
#include "sg_dp_engine.h"
#include "sg_dp_control.h"
#include "sg_dp_eth.h"
#include "sg_dp_lcore_ctl.h"
#include "sg_dp_memif.h"
#include "sg_dp_transport.h"
#include "sg_dp_xdp.h"
#include "sg_dp_pipeline.h"
#include "sg_dp_proto.h"

#define SG_DP_IDLE_SPIN 256   /* empty polls before the sleep policy starts sleeping */
/* ... before it blocks in a transport's idle_wait(), which an arrival ends: a long spin
 * only takes the CPU from the workers. Measured on the 2-core VM (socket transport, 1 rtc
 * lcore, 4 workers, 16 MB): sigmad's CPU 510 ms at 256 polls, 380 at 8, 480 at 1 (a
 * wake-up per burst); wall time 84, 77 and 76 ms. */
#define SG_DP_IDLE_SPIN_WAIT 8

/* @return true if the lcore slept (or blocked in its transport's wait) */
static bool idle_wait(struct sg_dp_lcore *lc, unsigned int *idle_polls)
{
	unsigned int shift, us;

	if (*(volatile enum sg_idle *)&lc->st.idle != SG_IDLE_SLEEP || lc->ctl_waiting)
		return false;
	++*idle_polls;
	if (lc->p->tr->idle_wait != NULL) {
		bool waited;

		/* a blocking wait that input ends: a short spin, no back-off */
		if (*idle_polls < SG_DP_IDLE_SPIN_WAIT)
			return false;
		rte_rcu_qsbr_thread_offline(lc->p->rcu, lc->idx);
		waited = lc->p->tr->idle_wait(lc, lc->p->idle_sleep_us);
		rte_rcu_qsbr_thread_online(lc->p->rcu, lc->idx);
		if (waited)
			return true;
		/* it cannot block (input it cannot wait for): the sleep policy below */
	}
	if (*idle_polls < SG_DP_IDLE_SPIN)
		return false;
	/* back off exponentially from 1 us up to the configured longest sleep */
	shift = RTE_MIN(*idle_polls - SG_DP_IDLE_SPIN, 20u);
	us = RTE_MIN(1u << shift, lc->p->idle_sleep_us);
	/* asleep, it holds nothing that sg_dp_eth_port_gate() must wait for */
	rte_rcu_qsbr_thread_offline(lc->p->rcu, lc->idx);
	rte_delay_us_sleep(us);
	rte_rcu_qsbr_thread_online(lc->p->rcu, lc->idx);
	return true;
}

static int lcore_main(void *arg)
{
	struct sg_dp_lcore *lc = arg;
	struct sg_dp_pipeline *p = lc->p;
	const struct sg_dp_transport *tr = p->tr;
	void *items[SG_DP_MAX_BURST];
	unsigned int burst = RTE_MIN(p->cfg.burst, (unsigned int)SG_DP_MAX_BURST);
	unsigned int idle_polls = 0, ctl_count = 0;
	bool rx_on = (lc->role & SG_ROLE_IO) != 0;
	bool reduce = (lc->role & SG_ROLE_REDUCE) != 0;
	uint64_t poll_period = rte_get_tsc_hz() / 1000;
	bool first = true;

	rte_rcu_qsbr_thread_online(p->rcu, lc->idx);
	for (;;) {
		uint64_t t0 = rte_rdtsc(), t1;
		unsigned int work = 0, nr = 0;

		/* no burst of the last loop goes on: a port gate closed before now holds */
		rte_rcu_qsbr_quiescent(p->rcu, lc->idx);

		if (rx_on) {
			if (p->stop_rx) {
				rx_on = false;
				__atomic_fetch_sub(&p->io_running, 1, __ATOMIC_RELEASE);
			} else {
				work += tr->rx(lc, burst);
			}
		}
		if (reduce) {
			if (tr->rx_steered && !p->stop_rx)
				work += tr->rx_steered(lc, burst);
			nr = rte_ring_dequeue_burst(lc->ring, items, burst, NULL);
			if (nr)
				tr->reduce(lc, items, nr);
			work += nr;
			if (t0 >= lc->next_poll_tsc) {
				/* a fresh clock: the engine's time must never run backwards */
				uint64_t t = rte_rdtsc();

				sg_dp_engine_poll(lc->eng, sg_dp_now_ns(p, t));
				if (tr->poll)
					tr->poll(lc, sg_dp_now_ns(p, t));
				lc->next_poll_tsc = t + poll_period;
			}
		}
		work += tr->flush(lc);
		/* a control call that waits is answered now, not after the next sleep */
		if (++ctl_count == SG_DP_CTL_POLL_EVERY || lc->ctl_waiting) {
			ctl_count = 0;
			work += sg_dp_lcore_ctl_tick(lc);
		}
		if (!rx_on) {
			/* drain: a reducer leaves once no lcore can hand it more */
			if (!reduce)
				break;
			if (nr == 0 && __atomic_load_n(&p->io_running, __ATOMIC_ACQUIRE) == 0 &&
			    rte_ring_empty(lc->ring))
				break;
		}
		t1 = rte_rdtsc();
		if (work) {
			lc->st.busy_cycles += t1 - t0;
			idle_polls = 0;
		} else {
			/* after a sleep, look at the control channel at once */
			if (idle_wait(lc, &idle_polls))
				ctl_count = SG_DP_CTL_POLL_EVERY - 1;
			lc->st.idle_cycles += rte_rdtsc() - t0;
		}
		if (unlikely(first)) {
			/* sg_dp_pipeline_wait_polling(): this lcore polls */
			first = false;
			__atomic_fetch_add(&p->polling, 1, __ATOMIC_RELEASE);
		}
	}
	tr->flush(lc);
	rte_rcu_qsbr_thread_offline(p->rcu, lc->idx);
	return 0;
}

/* ---- set-up ------------------------------------------------------------- */

static int lcore_socket(unsigned int lcore)
{
	unsigned int s = rte_lcore_to_socket_id(lcore);

	return s >= RTE_MAX_NUMA_NODES ? 0 : (int)s;
}

int sg_dp_engine_add_config_jobs(struct sg_dp_engine *eng, const struct sg_dp_config *c, char *err,
				  size_t errlen)
{
	for (unsigned int j = 0; j < c->n_jobs; j++) {
		const struct sg_dp_job_cfg *jc = &c->jobs[j];
		size_t es = sg_dtype_size(jc->dtype);
		struct sg_dp_key *keys = calloc(jc->keys, sizeof(*keys));
		struct sg_dp_job_conf jconf = {
			.id = jc->id, .nworkers = jc->workers, .token = jc->token,
			.dtype = jc->dtype, .mode = jc->mode,
			.partition_bytes = jc->partition_bytes,
			.chunk_bytes = sg_dp_job_chunk_bytes(c, jc),
			.max_inflight = jc->slots, .keys = keys, .nkeys = jc->keys,
			.auth_key = jc->auth ? jc->auth_key : NULL,
		};
		int rc;

		if (keys == NULL)
			return -ENOMEM;
		for (uint32_t k = 0; k < jc->keys; k++)
			keys[k] = (struct sg_dp_key){.id = k,
						     .nelem = (uint32_t)(jc->partition_bytes / es)};
		if (jc->open_slots != 0) {
			/* the engine makes the keys as the pushes come */
			jconf.keys = NULL;
			jconf.nkeys = 0;
			jconf.open = true;
			jconf.slots = jc->open_slots;
		}
		rc = sg_dp_engine_add_job(eng, &jconf);
		free(keys);
		if (rc < 0) {
			sg_dp_seterr(err, errlen, "[job %u]: the engine refused it: %s (check workers, "
			       "partition_bytes and chunk_bytes against docs/protocol.md)", jc->id,
			       strerror(-rc));
			return rc;
		}
	}
	return 0;
}

static int reducer_setup(struct sg_dp_pipeline *p, struct sg_dp_lcore *lc, char *err,
			 size_t errlen)
{
	const struct sg_dp_config *c = &p->cfg;
	char name[RTE_RING_NAMESIZE];
	struct sg_dp_engine_conf ec = {
		.numa_node = lc->socket,
		.pool_bufs = c->pool_bufs,
		.max_jobs = SG_DP_MAX_JOBS,
		.slot_timeout_ns = (uint64_t)c->timeout_ms * 1000000ull,
		.tx = p->tr->tx,
	};
	uint32_t maxpl = 0;

	ec.tx.ctx = lc;
	/* the elements' checksum costs the engine little, but not nothing */
	if (!c->udp_checksum)
		ec.tx.payload_csum = NULL;
	snprintf(name, sizeof(name), "sg_red%u_%u", lc->lcore_id, (unsigned int)getpid());
	lc->ring = rte_ring_create(name, c->ring_size, lc->socket, RING_F_SC_DEQ);
	if (lc->ring == NULL) {
		sg_dp_seterr(err, errlen, "reducer lcore %u: ring of %u: %s ([resources] ring_size must "
		       "be a power of two)", lc->lcore_id, c->ring_size, rte_strerror(rte_errno));
		return -rte_errno;
	}
	for (unsigned int j = 0; j < c->n_jobs; j++) {
		/* a job with auth carries its MAC after the chunk: the payload the engine takes */
		uint32_t cb = sg_dp_job_chunk_bytes(c, &c->jobs[j]) +
			      (c->jobs[j].auth ? SG_DP_MAC_TRAILER : 0);

		maxpl = RTE_MAX(maxpl, cb);
	}
	ec.max_payload = maxpl ? maxpl : SG_DP_PAYLOAD_MTU1500;
	lc->eng = sg_dp_engine_create(&ec);
	if (lc->eng == NULL) {
		sg_dp_seterr(err, errlen, "reducer lcore %u: engine: %s (pool of %u buffers of %u bytes)",
		       lc->lcore_id, strerror(errno), ec.pool_bufs, ec.max_payload);
		return -errno;
	}
	return sg_dp_engine_add_config_jobs(lc->eng, c, err, errlen);
}

/* "0-1,4" into @p buf */
static const char *cpuset_str(const rte_cpuset_t *s, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (unsigned int cpu = 0; cpu < CPU_SETSIZE && off < len; cpu++) {
		unsigned int end = cpu;

		if (!CPU_ISSET(cpu, s))
			continue;
		while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, s))
			end++;
		off += (size_t)snprintf(buf + off, len - off, off ? ",%u" : "%u", cpu);
		if (end > cpu && off < len)
			off += (size_t)snprintf(buf + off, len - off, "-%u", end);
		cpu = end;
	}
	return buf;
}

/* Kuhn's augmenting path: give poller @p i a CPU of its set, moving others. */
static bool cpu_match(unsigned int i, const rte_cpuset_t *sets, int *owner, bool *seen)
{
	for (unsigned int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &sets[i]) || seen[cpu])
			continue;
		seen[cpu] = true;
		if (owner[cpu] < 0 || cpu_match((unsigned int)owner[cpu], sets, owner, seen)) {
			owner[cpu] = (int)i;
			return true;
		}
	}
	return false;
}

/*
 * Busy-polling lcores that must share CPUs take turns on them, and each spends
 * its turns polling empty queues while the others' packets wait: on a 2-CPU VM,
 * 1 io + 2 reducer lcores busy-polling moved 9 Gbps, and 30 Gbps with idle =
 * sleep. Warn once (to @p warn) when the pollers (the layout's busy lcores, and
 * the main lcore when --demo's generator polls on it) cannot each have a CPU of
 * their own within the cpusets EAL pinned them to (--lcores; sched_getaffinity).
 * @return 1 if it warned.
 */
static int warn_busy_oversubscribed(const struct sg_dp_config *c, FILE *warn)
{
	rte_cpuset_t sets[SG_DP_MAX_LAYOUT + 1], all;
	unsigned int lcore[SG_DP_MAX_LAYOUT + 1], n = 0, matched = 0;
	const char *role[SG_DP_MAX_LAYOUT + 1];
	int owner[CPU_SETSIZE];
	bool seen[CPU_SETSIZE];
	char names[768], cpus[128], set[64];
	size_t off = 0;

	for (unsigned int i = 0; i < c->n_lcores; i++) {
		unsigned int l = c->lcores[i].lcore;

		if (c->idle != SG_IDLE_POLL || (l < RTE_DIM(c->sleep_lcores) && c->sleep_lcores[l]))
			continue;
		lcore[n] = l;
		role[n] = sg_role_name(c->lcores[i].role);
		sets[n++] = rte_lcore_cpuset(l);
	}
	if (c->demo && c->idle == SG_IDLE_POLL) {
		lcore[n] = rte_get_main_lcore();
		role[n] = "main (demo generator)";
		sets[n] = rte_lcore_cpuset(lcore[n]);
		n++;
	}
	if (n < 2)
		return 0;
	CPU_ZERO(&all);
	for (unsigned int i = 0; i < CPU_SETSIZE; i++)
		owner[i] = -1;
	for (unsigned int i = 0; i < n; i++) {
		CPU_OR(&all, &all, &sets[i]);
		memset(seen, 0, sizeof(seen));
		matched += cpu_match(i, sets, owner, seen);
	}
	if (matched == n)
		return 0;
	for (unsigned int i = 0; i < n && off < sizeof(names); i++)
		off += (size_t)snprintf(names + off, sizeof(names) - off, "%slcore %u (%s) on CPUs %s",
					i ? ", " : "", lcore[i], role[i],
					cpuset_str(&sets[i], set, sizeof(set)));
	if (warn)
		fprintf(warn, "sigmad: warning: %u busy-polling lcores cannot each have a CPU: %s; "
			"%d CPU(s) (%s) for %u pollers, so they take turns and poll while the "
			"others' packets wait (measured on a 2-CPU VM: 1 io + 2 reducer lcores "
			"busy-polling 9 Gbps, with idle = sleep 30 Gbps); use --idle sleep "
			"([live] idle = sleep), fewer lcores, or pin each polling lcore to a CPU "
			"of its own with EAL --lcores (e.g. --lcores=0@0,1@1,2@2)\n", n, names,
			CPU_COUNT(&all), cpuset_str(&all, cpus, sizeof(cpus)), n);
	return 1;
}

/* The registrations (SG_DP_TRANSPORT_REGISTER()); weak: a build with none links too. */
extern const struct sg_dp_transport_reg __start_sg_dp_transports[] __attribute__((weak));
extern const struct sg_dp_transport_reg __stop_sg_dp_transports[] __attribute__((weak));

const struct sg_dp_transport *sg_dp_transport_find(unsigned int kind)
{
	for (const struct sg_dp_transport_reg *r = __start_sg_dp_transports;
	     r < __stop_sg_dp_transports; r++)
		if (r->kind == kind)
			return r->tr;
	return NULL;
}

struct sg_dp_pipeline *sg_dp_pipeline_create(const struct sg_dp_config *c, char *err,
					     size_t errlen)
{
	struct sg_dp_pipeline *p;
	unsigned int nwarn = 0;
	char name[32];
	int rc;

	p = rte_zmalloc("sg_dp_pipeline", sizeof(*p), RTE_CACHE_LINE_SIZE);
	if (p == NULL) {
		sg_dp_seterr(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&p->ctl_lock, NULL);
	pthread_mutex_init(&p->op_lock, NULL);
	p->tr = sg_dp_transport_find(c->transport);
	if (p->tr == NULL) {
		if (c->transport == SG_DP_TRANSPORT_VERBS)
			sg_dp_seterr(err, errlen, "[transport] type = verbs: this sigmad was built "
				     "without verbs (rebuild with meson -Dverbs=enabled and "
				     "libibverbs-dev installed), or set [transport] type = dpdk");
		else
			sg_dp_seterr(err, errlen, "[transport] type %u: this sigmad was built "
				     "without it; set [transport] type = dpdk", c->transport);
		rc = -EPROTONOSUPPORT;
		goto fail;
	}
	p->cfg = *c;
	p->idle_sleep_us = c->idle_sleep_us;
	p->ns_per_tsc = 1e9 / (double)rte_get_tsc_hz();
	p->max_frame = RTE_ETHER_HDR_LEN + c->mtu + RTE_ETHER_CRC_LEN;
	sg_dp_topology_probe(&p->topo);
	if (p->tr->check != NULL && (rc = p->tr->check(c, &p->topo, err, errlen)) < 0)
		goto fail;
	rc = sg_dp_layout_check(c, &p->topo, err, errlen, stderr, &nwarn);
	if (rc < 0)
		goto fail;
	warn_busy_oversubscribed(c, stderr);
	rc = sg_dp_config_check_jobs(c, err, errlen);
	if (rc < 0)
		goto fail;
	p->n_lc = c->n_lcores;
	p->lc = rte_zmalloc("sg_dp_lcores", sizeof(*p->lc) * p->n_lc, RTE_CACHE_LINE_SIZE);
	p->rcu = rte_zmalloc("sg_dp_rcu", rte_rcu_qsbr_get_memsize(p->n_lc), RTE_CACHE_LINE_SIZE);
	if (p->lc == NULL || p->rcu == NULL || rte_rcu_qsbr_init(p->rcu, p->n_lc) < 0) {
		rc = -ENOMEM;
		sg_dp_seterr(err, errlen, "out of memory");
		goto fail;
	}
	for (unsigned int i = 0; i < p->n_lc; i++)
		rte_rcu_qsbr_thread_register(p->rcu, i); /* offline until its loop runs */
	for (unsigned int i = 0; i < p->n_lc; i++) {
		struct sg_dp_lcore *lc = &p->lc[i];
		const struct sg_dp_lcore_cfg *a = &c->lcores[i];

		lc->p = p;
		lc->idx = i;
		lc->lcore_id = a->lcore;
		lc->role = a->role;
		lc->socket = lcore_socket(a->lcore);
		lc->rx_port = a->port;
		lc->rx_queue = a->queue;
		lc->st.lcore = a->lcore;
		lc->st.role = a->role;
		lc->st.socket = lc->socket;
		lc->st.idle = c->sleep_lcores[a->lcore] ? SG_IDLE_SLEEP : c->idle;
		snprintf(name, sizeof(name), "sg_ctl%u", a->lcore);
		lc->chan = sg_dp_chan_create(name, 16);
		if (lc->chan == NULL) {
			rc = -errno;
			sg_dp_seterr(err, errlen, "lcore %u: control channel: %s", a->lcore,
				     strerror(errno));
			goto fail;
		}
		if (a->role & SG_ROLE_IO)
			p->port_used[a->port] = true;
		if (a->role & SG_ROLE_REDUCE)
			p->red[p->n_red++] = lc;
	}
	/* [layout] extra_rx: the lcore polls these too, as the port's own extra queues */
	for (unsigned int x = 0; x < c->n_extra_rx; x++)
		for (unsigned int i = 0; i < p->n_lc; i++) {
			struct sg_dp_lcore *lc = &p->lc[i];

			if (lc->lcore_id != c->extra_rx[x].lcore || lc->n_xq == SG_DP_MAX_XQ)
				continue;
			lc->xq_port[lc->n_xq] = c->extra_rx[x].port;
			lc->xq[lc->n_xq++] = c->extra_rx[x].queue;
			p->port_used[c->extra_rx[x].port] = true;
			break;
		}
	for (unsigned int b = 0; b < SG_BUCKETS; b++)
		p->keymap[b] = (uint16_t)(b % RTE_MAX(p->n_red, 1u));
	for (unsigned int b = 0; b < SG_BUCKETS; b++)
		p->ever[b] = 1ull << p->keymap[b];
	for (unsigned int i = 0; i < p->n_red; i++) {
		rc = reducer_setup(p, p->red[i], err, errlen);
		if (rc < 0)
			goto fail;
	}
	rc = p->tr->setup(p, err, errlen);
	if (rc < 0)
		goto fail;
	return p;
fail:
	sg_dp_pipeline_destroy(p);
	errno = rc < 0 ? -rc : EINVAL;
	return NULL;
}

int sg_dp_pipeline_start(struct sg_dp_pipeline *p)
{
	int io = 0;

	if (p->running)
		return -EALREADY;
	for (unsigned int i = 0; i < p->n_lc; i++)
		io += (p->lc[i].role & SG_ROLE_IO) != 0;
	p->stop_rx = false;
	__atomic_store_n(&p->polling, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&p->io_running, io, __ATOMIC_RELEASE);
	for (unsigned int i = 0; i < p->n_lc; i++) {
		int rc = rte_eal_remote_launch(lcore_main, &p->lc[i], p->lc[i].lcore_id);

		if (rc < 0) {
			SG_DP_LOG(ERR, "cannot launch lcore %u: %s", p->lc[i].lcore_id, strerror(-rc));
			/* the lcores already launched must still be stopped and joined */
			for (unsigned int j = i; j < p->n_lc; j++)
				if (p->lc[j].role & SG_ROLE_IO)
					__atomic_fetch_sub(&p->io_running, 1, __ATOMIC_RELEASE);
			p->stop_rx = true;
			for (unsigned int j = 0; j < i; j++)
				rte_eal_wait_lcore(p->lc[j].lcore_id);
			return rc;
		}
	}
	p->running = true;
	return 0;
}

int sg_dp_pipeline_wait_polling(struct sg_dp_pipeline *p, unsigned int timeout_ms)
{
	if (p == NULL || !p->running)
		return -EINVAL;
	for (unsigned int ms = 0; __atomic_load_n(&p->polling, __ATOMIC_ACQUIRE) < p->n_lc; ms++) {
		if (ms >= timeout_ms)
			return -ETIMEDOUT;
		rte_delay_us_sleep(1000);
	}
	return 0;
}

void sg_dp_pipeline_stop(struct sg_dp_pipeline *p)
{
	if (p == NULL || !p->running)
		return;
	p->stop_rx = true;
	for (unsigned int i = 0; p->tr->wake != NULL && i < p->n_lc; i++)
		p->tr->wake(&p->lc[i]);
	for (unsigned int i = 0; i < p->n_lc; i++)
		rte_eal_wait_lcore(p->lc[i].lcore_id);
	p->running = false;
}

void sg_dp_pipeline_destroy(struct sg_dp_pipeline *p)
{
	if (p == NULL)
		return;
	sg_dp_pipeline_stop(p);
	/* memif clients leave through the relay before the PMD stops its ports */
	sg_dp_memif_guard_stop(p);
	for (unsigned int i = 0; p->lc && i < p->n_lc; i++) {
		struct sg_dp_lcore *lc = &p->lc[i];
		void *items[64];
		unsigned int n;

		/* items still in a ring belong to the transport's pools */
		while (lc->ring && (n = rte_ring_dequeue_burst(lc->ring, items, 64, NULL)) > 0)
			p->tr->release(items, n);
		rte_ring_free(lc->ring);
		sg_dp_engine_destroy(lc->eng);
		sg_dp_chan_destroy(lc->chan);
	}
	p->tr->teardown(p);
	sg_dp_control_fini(p);
	rte_free(p->lc);
	rte_free(p->rcu);
	pthread_mutex_destroy(&p->ctl_lock);
	pthread_mutex_destroy(&p->op_lock);
	rte_free(p);
}

/* ---- live reconfiguration and statistics -------------------------------- */

int sg_dp_pipeline_reload(struct sg_dp_pipeline *p, const struct sg_dp_config *nc, FILE *report)
{
	struct sg_dp_config *c = &p->cfg;
	int restart = 0;

#define NEEDS_RESTART(cond, what)                                                            \
	do {                                                                                \
		if (cond) {                                                                 \
			restart++;                                                          \
			if (report)                                                         \
				fprintf(report, "sigmad: SIGHUP: %s changed: needs a restart\n", \
					what);                                              \
		}                                                                           \
	} while (0)
	NEEDS_RESTART(nc->ip != c->ip || nc->udp_port != c->udp_port || nc->mtu != c->mtu ||
		      nc->udp_checksum != c->udp_checksum || nc->steer != c->steer ||
		      !rte_is_same_ether_addr(&nc->mac_override, &c->mac_override), "[net]");
	NEEDS_RESTART(nc->n_lcores != c->n_lcores || nc->n_extra_rx != c->n_extra_rx ||
		      memcmp(nc->lcores, c->lcores, sizeof(c->lcores[0]) * c->n_lcores) ||
		      memcmp(nc->extra_rx, c->extra_rx, sizeof(c->extra_rx[0]) * c->n_extra_rx),
		      "[layout]");
	NEEDS_RESTART(nc->burst != c->burst || nc->ring_size != c->ring_size ||
		      nc->mbufs != c->mbufs || nc->rxd != c->rxd || nc->txd != c->txd ||
		      nc->pool_bufs != c->pool_bufs || nc->peers != c->peers ||
		      nc->peer_idle_ms != c->peer_idle_ms, "[resources]");
	NEEDS_RESTART(nc->n_jobs != c->n_jobs ||
		      memcmp(nc->jobs, c->jobs, sizeof(c->jobs[0]) * c->n_jobs), "[job N]");
	NEEDS_RESTART(nc->transport != c->transport, "[transport]");
	if (p->tr->reload != NULL)
		restart += p->tr->reload(p, nc, report);
	/* the engine takes its slot timeout at creation only */
	NEEDS_RESTART(nc->timeout_ms != c->timeout_ms, "[live] timeout_ms");
#undef NEEDS_RESTART
	if (nc->idle != c->idle || nc->idle_sleep_us != c->idle_sleep_us ||
	    memcmp(nc->sleep_lcores, c->sleep_lcores, sizeof(c->sleep_lcores))) {
		c->idle = nc->idle;
		c->idle_sleep_us = nc->idle_sleep_us;
		memcpy(c->sleep_lcores, nc->sleep_lcores, sizeof(c->sleep_lcores));
		p->idle_sleep_us = nc->idle_sleep_us;
		for (unsigned int i = 0; i < p->n_lc; i++) {
			struct sg_dp_lcore *lc = &p->lc[i];

			*(volatile enum sg_idle *)&lc->st.idle =
				c->sleep_lcores[lc->lcore_id] ? SG_IDLE_SLEEP : c->idle;
			if (report)
				fprintf(report, "sigmad: SIGHUP: lcore %u idle policy now %s (sleep up "
					"to %u us)\n", lc->lcore_id,
					lc->st.idle == SG_IDLE_POLL ? "busy" : "sleep",
					c->idle_sleep_us);
		}
	}
	if (nc->log_level != c->log_level) {
		c->log_level = nc->log_level;
		rte_log_set_level_pattern("sigma.*", c->log_level);
		if (report)
			fprintf(report, "sigmad: SIGHUP: log level now %u\n", c->log_level);
	}
	c->stats_interval_s = nc->stats_interval_s;
	return restart;
}

unsigned int sg_dp_pipeline_n_lcores(const struct sg_dp_pipeline *p)
{
	return p->n_lc;
}

const struct sg_dp_config *sg_dp_pipeline_config(const struct sg_dp_pipeline *p)
{
	return &p->cfg;
}

int sg_dp_pipeline_lcore_stats(const struct sg_dp_pipeline *p, unsigned int idx,
			       struct sg_dp_lcore_stats *st)
{
	if (idx >= p->n_lc)
		return -EINVAL;
	/* lcores keep writing: a torn read of one counter is off by one burst at most */
	*st = p->lc[idx].st;
	st->ring_count = p->lc[idx].ring ? rte_ring_count(p->lc[idx].ring) : 0;
	return 0;
}

void sg_dp_pipeline_engine_stats(const struct sg_dp_pipeline *p, struct sg_dp_stats *st)
{
	memset(st, 0, sizeof(*st));
	for (unsigned int r = 0; r < p->n_red; r++) {
		struct sg_dp_stats s;

		sg_dp_engine_stats(p->red[r]->eng, &s);
		sg_dp_counters_add(st, &s, sizeof(s));
	}
}

int sg_dp_pipeline_net(const struct sg_dp_pipeline *p, uint16_t port_id, struct sg_dp_net *net)
{
	if (port_id >= SG_DP_MAX_PORTS || !p->port_used[port_id])
		return -EINVAL;
	*net = p->net[port_id];
	return 0;
}

unsigned int sg_dp_pipeline_transport_counters(const struct sg_dp_pipeline *p, unsigned int idx,
					       const char **names, uint64_t *values,
					       unsigned int max)
{
	struct sg_dp_counter tc[32];
	unsigned int n;

	if (p->tr->counters == NULL || idx >= p->n_lc)
		return 0;
	n = RTE_MIN(p->tr->counters(p, idx, tc, RTE_DIM(tc)), max);
	for (unsigned int k = 0; k < n; k++) {
		names[k] = tc[k].name;
		values[k] = tc[k].value;
	}
	return n;
}

void sg_dp_pipeline_print_stats(const struct sg_dp_pipeline *p, FILE *f, double seconds)
{
	struct sg_dp_stats es;
	struct sg_dp_lcore_stats peers = {0}; /* the reply-address counters, summed */
	uint64_t drops[SG_DP_ND_COUNT] = {0};

	fprintf(f, "%-6s %-7s %-4s %6s %12s %12s %10s %12s %12s %6s %8s\n", "lcore", "role",
		"node", "busy%", "rx_pkts", "tx_pkts", "handoff", "reduced", "GB_summed", "ring",
		"drops");
	for (unsigned int i = 0; i < p->n_lc; i++) {
		struct sg_dp_lcore_stats st;
		uint64_t d, tot;

		sg_dp_pipeline_lcore_stats(p, i, &st);
		d = sg_dp_lcore_drops(&st, drops);
		peers.peers += st.peers;
		peers.peers_learned += st.peers_learned;
		peers.peers_evicted += st.peers_evicted;
		peers.peers_expired += st.peers_expired;
		tot = st.busy_cycles + st.idle_cycles;
		fprintf(f, "%-6u %-7s %-4d %6.1f %12" PRIu64 " %12" PRIu64 " %10" PRIu64
			" %12" PRIu64 " %12.3f %6" PRIu64 " %8" PRIu64 "\n", st.lcore,
			sg_role_name(st.role), st.socket, tot ? 100.0 * st.busy_cycles / tot : 0.0,
			st.rx_pkts, st.tx_pkts, st.handoff_pkts, st.reduced_pkts,
			st.bytes_summed / 1e9, st.ring_count, d);
		if (seconds > 0)
			fprintf(f, "%-6s %-7s %-4s %6s %9.3f Mpps %9.3f Mpps %25s %7.2f Gbps\n", "",
				"", "", "", st.rx_pkts / seconds / 1e6, st.tx_pkts / seconds / 1e6,
				"", st.bytes_summed * 8 / seconds / 1e9);
	}
	for (int k = 0; k < SG_DP_ND_COUNT; k++)
		if (drops[k])
			fprintf(f, "  drop %-12s %" PRIu64 "\n", sg_dp_ndrop_name(k), drops[k]);
	if (peers.peers_learned)
		fprintf(f, "reply addresses: %" PRIu64 " held, %" PRIu64 " learned, %" PRIu64
			" evicted, %" PRIu64 " expired\n", peers.peers, peers.peers_learned,
			peers.peers_evicted, peers.peers_expired);
	for (unsigned int i = 0; p->tr->counters != NULL && i < p->n_lc; i++) {
		struct sg_dp_counter tc[32];
		unsigned int n = p->tr->counters(p, i, tc, RTE_DIM(tc));

		for (unsigned int k = 0; k < n; k++)
			if (tc[k].drop && tc[k].value)
				fprintf(f, "  lcore %u %s drop %-14s %" PRIu64 "\n", p->lc[i].lcore_id,
					p->tr->name, tc[k].name, tc[k].value);
	}
	sg_dp_pipeline_engine_stats(p, &es);
	fprintf(f, "engine: %" PRIu64 " pushes, %" PRIu64 " rounds completed, %" PRIu64
		" results sent, %" PRIu64 " retransmits served, %" PRIu64 " NACKs, %" PRIu64
		" slot timeouts, %" PRIu64 " incomplete now, %" PRIu64 " WAITING sent\n",
		es.rx_pushes, es.rounds_completed, es.results_sent, es.retransmits_served,
		es.nacks_sent, es.slot_timeouts, es.incomplete_slots, es.waits_sent);
	for (int k = 1; k < SG_DP_DROP_COUNT; k++)
		if (es.drops[k])
			fprintf(f, "  engine drop %-12s %" PRIu64 "\n",
				sg_dp_drop_name((enum sg_dp_drop)k), es.drops[k]);
}

char **sg_dp_args_split(int argc, char **argv, int *eal_argc, int *sg_argc)
{
	int first = 0;
	char **sg;

	for (int i = 1; i < argc && first == 0; i++)
		if (!strcmp(argv[i], "--"))
			first = i;
	*eal_argc = first;
	*sg_argc = argc - first;
	sg = calloc((size_t)*sg_argc + 1, sizeof(char *));
	if (sg == NULL)
		return NULL;
	sg[0] = argv[0];
	for (int i = 1; i < *sg_argc; i++)
		sg[i] = argv[first + i];
	return sg;
}

int sg_dp_eal_init(int eal_argc, char **argv, const char *name)
{
	char prefix[96], lcores[64];
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	char *def_eal[] = {argv[0], "--no-huge", "--no-shconf", "--no-pci", "-m", "1024", prefix,
			   lcores, "--log-level=lib.eal:error", "--log-level=lib.telemetry:error",
			   NULL};

	if (eal_argc > 0) {
		char **eal_argv;
		int n = sg_dp_xdp_eal_args(eal_argc, argv, &eal_argv);

		return n < 0 ? n : rte_eal_init(n, eal_argv);
	}
	snprintf(prefix, sizeof(prefix), "--file-prefix=%s_%d", name, (int)getpid());
	snprintf(lcores, sizeof(lcores), "--lcores=(0-2)@(0-%ld)", ncpu > 1 ? ncpu - 1 : 0);
	return rte_eal_init((int)RTE_DIM(def_eal) - 1, def_eal);
}

void sg_dp_eal_cleanup(void)
{
	char dir[PATH_MAX];
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s", rte_eal_get_runtime_dir());
	rte_eal_cleanup();
	sg_dp_xdp_cleanup();
	d = opendir(dir);
	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	rmdir(dir);
}
