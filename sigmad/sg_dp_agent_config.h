/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * sigmad's own sections of its config file: `[control]` (the control server
 * and the agent's keys; docs/control.md) and `[cluster]` (the registration in
 * etcd; docs/cluster.md). The pipeline's loader (sg_dp_config.h) hands them to
 * the hooks that sg_dp_agent_sections_init() installs (struct
 * sg_dp_config_section), so that the pipeline itself knows nothing of the
 * control plane and links neither jansson nor libsodium. Library
 * sg_dp_agent_config (the pipeline and sg_ctl_config), which the agent
 * (sg_dp_agent.h) and sigma-demo link.
 *
 * Conventions: functions return 0 or -errno.
 */
#ifndef SG_DP_AGENT_CONFIG_H
#define SG_DP_AGENT_CONFIG_H

#include <stdbool.h>
#include <stdio.h>

#include "sg_ctl_config.h"
#include "sg_dp_config.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What the agent needs beyond the server's own settings. */
struct sg_dp_agent_conf {
	char name[64];         /**< node name (heartbeats, node_info) [hostname] */
	unsigned int kind;     /**< enum sg_node_kind [cpu] */
	double gbps;           /**< bandwidth announced in heartbeats [the ports' speed, or 100] */
	char coordinator[128]; /**< "host:port" or "unix:path" of a coordinator; "" = none */
	unsigned int heartbeat_ms; /**< period of node_heartbeat [1000] */
};

/**
 * `[control]` as its hook parsed it, once per load: the agent's keys and the
 * control server's. Held by value in struct sg_dp_agent_sections, which is
 * copied by value: the server settings' strings and secret live in @c store,
 * and @c sc's pointers are only meaningful through sg_dp_agent_sections_server(),
 * which points them into the store of the copy at hand.
 */
struct sg_dp_control_cfg {
	struct sg_dp_agent_conf ac;      /**< name, kind, gbps, coordinator, heartbeat_ms */
	struct sg_ctl_server_config sc;  /**< listen, unix, metrics, secret, limits (no ops) */
	struct sg_ctl_config_store store; /**< the strings and the secret @c sc names */
};

/**
 * `[cluster]`: the node's registration in etcd (docs/cluster.md). Read at
 * start; a change needs a restart.
 */
struct sg_dp_cluster_cfg {
	char etcd[512];		/**< endpoints http://host:port[,...]; "" = no registration */
	char cluster[64];	/**< records under /sigma/<cluster>/ [default] */
	unsigned int ttl;	/**< lease TTL, seconds, 1..3600 [5] */
	char addr[16];		/**< dataplane IPv4 announced [[net] ip] */
	char user[64];		/**< etcd user (optional) */
	char password_file[256];/**< its password, first line of this file (mode 0600) */
	char ca_file[256];	/**< TLS: CA bundle (https:// endpoints) */
	char cert_file[256];	/**< TLS: client certificate */
	char key_file[256];	/**< TLS: client key */
};

/** sigmad's sections, as the last load parsed them. */
struct sg_dp_agent_sections {
	bool control;          /**< the file has a [control] section: run the control agent */
	struct sg_dp_control_cfg ctl; /**< that section, parsed (valid when @c control) */
	struct sg_dp_cluster_cfg cluster; /**< [cluster] (etcd[0] == 0: none) */
};

/**
 * Clear @p s (no [control], no [cluster]) and install its hooks in @p c, after
 * sg_dp_config_defaults(c) and before loading files or options into @p c: each
 * [control] or [cluster] that a load meets then lands in @p s (a later file's
 * section replaces an earlier one whole), and a bad one fails the load with
 * the key named. @p s must outlive those loads.
 */
void sg_dp_agent_sections_init(struct sg_dp_agent_sections *s, struct sg_dp_config *c);

/**
 * The control server's settings from @p s's parsed `[control]` into @p sc,
 * ops left NULL. Its strings and secret point into @p s itself, so they stay
 * right for a by-value copy; @p s must outlive @p sc's use
 * (sg_ctl_server_create() copies what it keeps).
 */
void sg_dp_agent_sections_server(const struct sg_dp_agent_sections *s,
				 struct sg_ctl_server_config *sc);

/**
 * SIGHUP: compare the control server's keys of two parsed [control] sections
 * (listen, unix, secret_file's secret, metrics and the limits), which apply
 * only at start, and name on @p report, in one line, each one that differs.
 * The agent's own keys are sg_dp_agent_reload()'s.
 * @return how many differ (each needs a restart).
 */
int sg_dp_agent_sections_diff(const struct sg_dp_agent_sections *old,
			      const struct sg_dp_agent_sections *nc, FILE *report);

#ifdef __cplusplus
}
#endif

#endif /* SG_DP_AGENT_CONFIG_H */
