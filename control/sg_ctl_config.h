/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Sigma control configuration: a node's control server settings from an INI
 * section (sigmad's and sigma-udpd's [control]); rte_log level names are
 * sg_parse.h's (sg_log_level_parse()).
 * A library of its own (sg_ctl_config: DPDK's rte_cfgfile), which sigmad's
 * config loader links without the server.
 *
 * Conventions: functions return 0 or a negative errno; constructors return
 * NULL and set errno.
 */
#ifndef SG_CTL_CONFIG_H
#define SG_CTL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "sg_ctl_client.h"
#include "sg_ctl_server.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rte_cfgfile;

/** Storage for the strings and secret that sg_ctl_config_load() points the config at. */
struct sg_ctl_config_store {
	char tcp_addr[64];
	char unix_path[108];
	char metrics_addr[64];
	uint8_t secret[SG_CTL_SECRET_MAX];
};

/**
 * Fill @p cfg (ops are left alone) from section @p section of an INI file
 * loaded with rte_cfgfile_load(). Keys, all optional:
 *
 *     listen = 127.0.0.1:7070 | off        (TCP JSON-RPC; port 0 = any)
 *     unix = /var/run/sigma/ctl.sock | off
 *     secret_file = /etc/sigma/ctl.secret  (needed with listen; mode 0600 or 0400)
 *     metrics = 127.0.0.1:9100 | off
 *     max_frame, max_conns, idle_timeout_ms, frame_timeout_ms,
 *     auth_timeout_ms, heartbeat_timeout_ms  (positive integers)
 *
 * A missing section gives the defaults: TCP off, no Unix socket, metrics
 * off. Strings and the secret live in @p store, which must outlive
 * sg_ctl_server_create().
 * @return 0; -EINVAL with a message naming the key and the fix in @p err
 *         (an unknown key, a bad number, address or port, an unreadable,
 *         too short, too long or group/world-readable secret file).
 */
int sg_ctl_config_load(struct rte_cfgfile *file, const char *section,
		       struct sg_ctl_server_config *cfg, struct sg_ctl_config_store *store,
		       char *err, size_t err_len);

/** The caller's own keys in the section that sg_ctl_config_load_ext() reads. */
struct sg_ctl_config_hook {
	/**
	 * Offered every key of the section before the loader's own.
	 * @return 1 if @p key is the caller's and @p value good, 0 if it is not
	 *         the caller's (the loader parses it), or -EINVAL with a message
	 *         in @p err (@p err_len bytes) for a bad value.
	 */
	int (*key)(void *arg, const char *key, const char *value, char *err, size_t err_len);
	void *arg;
	const char *keys; /**< the caller's keys, named in the unknown-key message */
};

/**
 * sg_ctl_config_load() for a section shared with the caller (sigmad's
 * [control]): @p hook, if not NULL, takes its keys in the same single pass.
 */
int sg_ctl_config_load_ext(struct rte_cfgfile *file, const char *section,
			   struct sg_ctl_server_config *cfg, struct sg_ctl_config_store *store,
			   const struct sg_ctl_config_hook *hook, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif

#endif /* SG_CTL_CONFIG_H */
