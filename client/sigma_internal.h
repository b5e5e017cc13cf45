/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libsigma internals shared by its source files: the transport ops interface
 * and the logging macro. Not installed, not for other modules.
 */
#ifndef SIGMA_INTERNAL_H
#define SIGMA_INTERNAL_H

#include <stdint.h>
#include <time.h>

#include <rte_log.h>

#include "sg_ctl_place.h"
#include "sg_dp_proto.h"
#include "sg_udp.h"
#include "sigma.h"

extern int sg_cli_logtype;

#define SG_CLI_LOG(level, fmt, ...)                                                               \
	rte_log(RTE_LOG_##level, sg_cli_logtype, "sigma.client: " fmt "\n", ##__VA_ARGS__)

/** Packets handed to or taken from a transport in one call, at most. */
#define SG_CLI_BURST 64

/** One packet to send: a header and a payload sent from in place, to node @p node. */
struct sg_cli_txpkt {
	const void *hdr;
	const void *payload;
	uint32_t payload_len;
	/** auth = mac: the SG_DP_MAC_TRAILER bytes sent after the payload; NULL: none */
	const void *trailer;
	uint32_t node;
	uint16_t port_off; /**< added to the node's UDP port (reducer steering), else 0 */
};


/** A transport: every way of moving packets to the nodes sits behind these three. */
struct sg_cli_transport {
	/** Send @p n packets. @return packets sent (the rest count as lost), or -errno. */
	int (*send)(struct sg_cli_transport *t, const struct sg_cli_txpkt *pkts, unsigned int n);
	/**
	 * Receive up to @p max packets, waiting at most @p timeout_us for the
	 * first one (0: do not wait); of that, poll for up to @p spin_us before
	 * sleeping (0: sleep at once; a transport that cannot sleep polls
	 * anyway). @return packets received, or -errno.
	 */
	int (*recv)(struct sg_cli_transport *t, struct sg_udp_dgram *pkts, unsigned int max,
		    int timeout_us, int spin_us);
	void (*destroy)(struct sg_cli_transport *t);
	/**
	 * A descriptor that polls readable when recv() has something once what
	 * it buffered is taken (a session mixing transports sleeps on it beside
	 * its own); NULL: none (a poll-mode transport).
	 */
	int (*wait_fd)(const struct sg_cli_transport *t);
	/**
	 * How node @p node (< the session's nnodes) is reached: a SIGMA_TRANSPORT_*
	 * value; NULL: every node by the session's conf.transport.
	 */
	int (*node_transport)(const struct sg_cli_transport *t, uint32_t node);
	/**
	 * Datagrams dropped on the way in before recv() could take them, as far
	 * as the transport can tell (kernel UDP: the socket's receive buffer was
	 * full); NULL: none counted.
	 */
	uint64_t (*rx_dropped)(const struct sg_cli_transport *t);
};

/**
 * A transport's registration: the conf.transport (enum sigma_transport) it
 * serves. SG_CLI_TRANSPORT_REGISTER() puts one into the linker section
 * `sg_cli_transports` at file scope of the transport's own file, so that
 * adding a transport touches no other libsigma file; sigma_open() looks it
 * up by conf.transport. libsigma's archives are prelinked (meson's
 * `prelink`: one object each), so a program that links sigma_open() from
 * libsigma.a links every registered transport too.
 */
struct sg_cli_transport_reg {
	enum sigma_transport kind;
	const char *name; /**< in sigma_open()'s failure message: "UDP", ... */
	/**
	 * Optional: check @p c's settings of this transport, filling in their
	 * defaults, after the session's own checks. @return 0, or
	 * sg_cli_conf_error()'s -EINVAL.
	 */
	int (*check)(struct sigma_conf *c);
	/** The transport to @p conf's nodes (checked). NULL with errno on failure. */
	struct sg_cli_transport *(*create)(const struct sigma_conf *conf);
};

/** Register transport @p name: follow with `= { .kind = ..., ... };` at file scope. */
#define SG_CLI_TRANSPORT_REGISTER(name)                                                      \
	static const struct sg_cli_transport_reg sg_cli_transport_reg_##name                 \
		__attribute__((used, section("sg_cli_transports"), aligned(sizeof(void *))))

/**
 * Kernel UDP to @p conf's nodes, without shared memory (what the DPDK transport
 * uses for the nodes at this machine's own addresses). NULL with errno.
 */
struct sg_cli_transport *sg_cli_udp_create(const struct sigma_conf *conf);

/** Write "sigma: bad session config: <reason>" to stderr. @return -EINVAL. */
int sg_cli_conf_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/**
 * Check conf.shm_paths' entries (sigma_shm.c: the shared-memory transport's,
 * and the kernel-UDP one's, which hands them to it). @return 0, or -EINVAL
 * (sg_cli_conf_error()) for an empty one.
 */
int sg_cli_shm_check_paths(const struct sigma_conf *c);

/**
 * Shared memory to sigma-udpd nodes on this machine. @p rest NULL
 * (SIGMA_TRANSPORT_SHM): every node needs a socket of conf.shm_paths, NULL
 * with errno on failure (see sigma_open()). @p rest a transport to all the
 * nodes (the kernel-UDP one, given conf.shm_paths): the nodes whose socket
 * answers go over shared memory, the others over @p rest, which the result
 * owns from then on (destroyed with it, or on failure); that is @p rest
 * itself when no node answered, and NULL only with ENOMEM.
 */
struct sg_cli_transport *sg_cli_shm_create(const struct sigma_conf *conf,
					   struct sg_cli_transport *rest);

/** Bytes of one receive buffer: the largest Sigma datagram, and some slack. */
#define SG_CLI_RXBUF SG_UDP_DGRAM_BUF

/** The UDP port of node @p n: its own, or the default (SG_DP_UDP_PORT) for 0. */
static inline uint16_t sg_cli_node_port(const struct sigma_node *n)
{
	return n->port ? n->port : SG_DP_UDP_PORT;
}

/** Make @p s refuse tensors of another dtype than @p dt (a session of a described job). */
void sg_cli_set_job_dtype(struct sigma_session *s, enum sg_dtype dt);

static inline uint64_t sg_cli_now_ns(void)
{
	return sg_udp_now_ns();
}

#endif /* SIGMA_INTERNAL_H */
