/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * sigmad's control agent (library sg_dp_agent, above the pipeline): the
 * JSON-RPC server of control/ (sg_ctl_server.h) on its own thread, with struct
 * sg_ctl_agent_ops implemented over a running pipeline; heartbeats to a
 * coordinator; the node's registration in etcd ([cluster]). It changes the
 * pipeline only through sg_dp_pipeline.h's control functions (jobs, keys,
 * idle policies, key moves, drain), which reach the lcores over their
 * channels, and never touches an engine itself. The pipeline and its
 * transports never call into it; its
 * settings are sigmad's own sections of the config file, [control] and
 * [cluster] (sg_dp_agent_config.h), which the pipeline's loader hands to it.
 *
 * Conventions: functions return 0 or -errno; constructors return NULL and set
 * errno.
 */
#ifndef SG_DP_AGENT_H
#define SG_DP_AGENT_H

#include <stdint.h>
#include <stdio.h>

#include "sg_dp_agent_config.h"
#include "sg_dp_pipeline.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sg_ctl_server_config;
struct sg_dp_agent;
struct sg_ctl_server;

/**
 * Start the control server over running pipeline @p p (its lcores poll their
 * channels) with server settings @p sc (ops are filled in here) and @p ac;
 * with @p cl (NULL or etcd "": none), the node registers in etcd and the
 * server watches the cluster's records. Jobs of the pipeline's config are
 * listed as jobs; more can be created.
 * @return the agent, or NULL with errno set and @p err filled.
 */
struct sg_dp_agent *sg_dp_agent_start(struct sg_dp_pipeline *p,
				      const struct sg_ctl_server_config *sc,
				      const struct sg_dp_agent_conf *ac,
				      const struct sg_dp_cluster_cfg *cl, char *err, size_t errlen);

/** Stop the heartbeats and the server (before the pipeline stops). NULL is fine. */
void sg_dp_agent_stop(struct sg_dp_agent *a);

/** The control server of @p a (for its ports and counters). */
struct sg_ctl_server *sg_dp_agent_server(struct sg_dp_agent *a);

/**
 * SIGHUP: apply the live part of a re-read `[control]` section (@p ac, from
 * the config's load, sg_dp_agent_sections_init()): name, kind, gbps and heartbeat_ms, and the
 * coordinator when heartbeats already run. Each change is reported on
 * @p report; a coordinator added or removed is reported as needing a restart
 * and left as it was. The server's keys (listen, unix, secret_file, metrics,
 * limits) are sg_dp_agent_sections_diff()'s to compare.
 * @return the number of changes that need a restart.
 */
int sg_dp_agent_reload(struct sg_dp_agent *a, const struct sg_dp_agent_conf *ac, FILE *report);

/**
 * Register /sigma/cluster with rte_telemetry (once per process), reporting on
 * @p a: the node's registration in etcd, or "none: no [cluster] section" when
 * @p a is NULL or has no [cluster]. As sg_dp_telemetry_register() does for the
 * pipeline: rte_telemetry callbacks take no context, so this is the one agent
 * telemetry reports on; sg_dp_agent_stop() of that agent makes it report none.
 * @return 0 or -errno (rte_telemetry_register_cmd()'s).
 */
int sg_dp_agent_telemetry_register(struct sg_dp_agent *a);

/** Heartbeats sent and refused so far. */
void sg_dp_agent_heartbeats(const struct sg_dp_agent *a, uint64_t *sent, uint64_t *failed);

#ifdef __cplusplus
}
#endif

#endif /* SG_DP_AGENT_H */
