/* SPDX-License-Identifier: BSD-3-Clause */
/* The [control] section of sigmad's INI file (rte_cfgfile) -> struct sg_ctl_server_config. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rte_cfgfile.h>
#include <rte_log.h>

#include "sg_ctl_config.h"
#include "sg_err.h"
#include "sg_parse.h"

/* A reason in @p err, and -EINVAL. */
#define cfg_err(err, len, ...) sg_err(err, len, -EINVAL, __VA_ARGS__)

/* "A.B.C.D:PORT" into @addr (buffer of @alen) and @port. */
static int parse_hostport(const char *v, char *addr, size_t alen, uint16_t *port)
{
	const char *colon = strrchr(v, ':');
	uint64_t p;

	if (colon == NULL || (size_t)(colon - v) >= alen || colon[1] == '\0')
		return -EINVAL;
	memcpy(addr, v, (size_t)(colon - v));
	addr[colon - v] = '\0';
	if (sg_ipv4_parse(addr, NULL) != 0)
		return -EINVAL;
	if (sg_parse_u64(colon + 1, 0, 65535, &p) != 0)
		return -EINVAL;
	*port = (uint16_t)p;
	return 0;
}

static int read_secret(const char *path, struct sg_ctl_config_store *st, size_t *len, char *err,
		       size_t elen)
{
	int rc = sg_ctl_secret_load(path, true, st->secret, len, err, elen);

	if (rc == 0 && *len < 16)
		return cfg_err(err, elen, "secret_file %s: need at least 16 bytes of secret; "
					  "e.g. head -c 32 /dev/urandom | base64 > %s", path, path);
	return rc;
}

int sg_ctl_config_load(struct rte_cfgfile *file, const char *section,
		       struct sg_ctl_server_config *cfg, struct sg_ctl_config_store *store,
		       char *err, size_t err_len)
{
	return sg_ctl_config_load_ext(file, section, cfg, store, NULL, err, err_len);
}

int sg_ctl_config_load_ext(struct rte_cfgfile *file, const char *section,
			   struct sg_ctl_server_config *cfg, struct sg_ctl_config_store *store,
			   const struct sg_ctl_config_hook *hook, char *err, size_t err_len)
{
#define NUM_KEY(f)                                                                          \
	{#f, offsetof(struct sg_ctl_server_config, f),                                      \
	 sizeof(((struct sg_ctl_server_config *)0)->f)}
	/* the positive integers: 32- or 64-bit fields, each written at its own size */
	static const struct {
		const char *key;
		size_t off, size;
	} nums[] = {
		NUM_KEY(max_frame),	    NUM_KEY(max_conns),
		NUM_KEY(idle_timeout_ms),  NUM_KEY(frame_timeout_ms),
		NUM_KEY(auth_timeout_ms),  NUM_KEY(heartbeat_timeout_ms),
	};
#undef NUM_KEY
	struct rte_cfgfile_entry *ents = NULL;
	char secret_file[CFG_VALUE_LEN] = "";
	int i, n;
	size_t k, slen = 0;

	if (cfg == NULL || store == NULL || section == NULL)
		return cfg_err(err, err_len, "internal: NULL argument");
	memset(store, 0, sizeof(*store));
	cfg->tcp_disable = true;
	cfg->unix_path = NULL;
	cfg->metrics_enable = false;
	cfg->secret = NULL;
	cfg->secret_len = 0;
	if (file == NULL || !rte_cfgfile_has_section(file, section))
		return 0;
	n = rte_cfgfile_section_num_entries(file, section);
	if (n < 0)
		return cfg_err(err, err_len, "[%s]: unreadable section", section);
	ents = calloc((size_t)n + 1, sizeof(*ents));
	if (ents == NULL)
		return -ENOMEM;
	n = rte_cfgfile_section_entries(file, section, ents, n);
	for (i = 0; i < n; i++) {
		const char *key = ents[i].name, *v = ents[i].value;
		/* the caller's keys first: one pass over the section for both */
		int rc = hook != NULL ? hook->key(hook->arg, key, v, err, err_len) : 0;

		if (rc > 0)
			continue;
		if (rc < 0) {
			/* the hook's message is in err */
		} else if (strcmp(key, "listen") == 0) {
			cfg->tcp_disable = strcmp(v, "off") == 0;
			if (!cfg->tcp_disable &&
			    parse_hostport(v, store->tcp_addr, sizeof(store->tcp_addr),
					   &cfg->tcp_port) != 0)
				rc = cfg_err(err, err_len, "[%s] listen = %s: want IPV4:PORT or off",
					     section, v);
			cfg->tcp_addr = store->tcp_addr;
		} else if (strcmp(key, "unix") == 0) {
			if (strcmp(v, "off") != 0) {
				if (v[0] != '/' || strlen(v) >= sizeof(store->unix_path))
					rc = cfg_err(err, err_len,
						     "[%s] unix = %s: want an absolute path under %zu "
						     "bytes, or off",
						     section, v, sizeof(store->unix_path));
				snprintf(store->unix_path, sizeof(store->unix_path), "%s", v);
				cfg->unix_path = store->unix_path;
			}
		} else if (strcmp(key, "metrics") == 0) {
			cfg->metrics_enable = strcmp(v, "off") != 0;
			if (cfg->metrics_enable &&
			    parse_hostport(v, store->metrics_addr, sizeof(store->metrics_addr),
					   &cfg->metrics_port) != 0)
				rc = cfg_err(err, err_len, "[%s] metrics = %s: want IPV4:PORT or off",
					     section, v);
			cfg->metrics_addr = store->metrics_addr;
		} else if (strcmp(key, "secret_file") == 0) {
			snprintf(secret_file, sizeof(secret_file), "%s", v);
		} else {
			uint64_t x = 0;

			for (k = 0; k < sizeof(nums) / sizeof(nums[0]); k++)
				if (strcmp(key, nums[k].key) == 0)
					break;
			if (k == sizeof(nums) / sizeof(nums[0]))
				rc = cfg_err(err, err_len,
					     "[%s] unknown key '%s' (known: listen, unix, secret_file, "
					     "metrics, max_frame, max_conns, idle_timeout_ms, "
					     "frame_timeout_ms, auth_timeout_ms, heartbeat_timeout_ms%s%s)",
					     section, key, hook && hook->keys ? ", " : "",
					     hook && hook->keys ? hook->keys : "");
			else if (sg_parse_u64(v, 1, UINT32_MAX, &x) != 0)
				rc = cfg_err(err, err_len, "[%s] %s = %s: want a positive integer",
					     section, key, v);
			else if (nums[k].size == sizeof(uint64_t))
				*(uint64_t *)((char *)cfg + nums[k].off) = x;
			else
				*(uint32_t *)((char *)cfg + nums[k].off) = (uint32_t)x;
		}
		if (rc != 0) {
			free(ents);
			return rc;
		}
	}
	free(ents);
	/* Read after the loop: the entries (and their strings) are freed by then. */
	if (secret_file[0] != '\0' && read_secret(secret_file, store, &slen, err, err_len) != 0)
		return -EINVAL;
	if (!cfg->tcp_disable && slen == 0)
		return cfg_err(err, err_len, "[%s] listen is on but no secret_file is set; add "
					     "secret_file = PATH (mode 0600) or set listen = off",
			       section);
	cfg->secret = slen ? store->secret : NULL;
	cfg->secret_len = slen;
	return 0;
}
