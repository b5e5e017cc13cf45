/* SPDX-License-Identifier: BSD-3-Clause */
/* A mock sigmad agent for the control-plane tests: fixed node, lcores and layout. */
#ifndef CTL_MOCK_H
#define CTL_MOCK_H

#include "sg_ctl_server.h"

#define MOCK_LCORES 4
/* node_info's max_chunk_bytes, and the chunk of a job created without one */
#define MOCK_MAX_CHUNK 8920
/* keys of the last job_create the mock keeps */
#define MOCK_KEYS 4096

struct mock_agent {
	struct sg_ctl_job jobs[SG_CTL_MAX_JOBS];
	unsigned int n_jobs;
	unsigned int extra_jobs; /* job_list reports this many more (ids 5000...), as from a file */
	uint32_t next_id;
	struct sg_ctl_layout layout;
	unsigned int layout_changes;
	bool draining;
	int last_log_level;
	char last_token[SG_CTL_TOKEN_LEN];
	uint32_t last_n_keys;			/* keys the last job_create placed here */
	struct sg_ctl_key last_keys[MOCK_KEYS];	/* ... the first MOCK_KEYS of them */
	/* verbs: 0 = RC node, 1 = UD node, 2 = a node on the DPDK transport */
	int verbs_kind;
	unsigned int rc_calls;			/* verbs_rc_connect calls that reached the agent */
	struct sg_ctl_verbs_rc_addr last_worker; /* what the last one carried */
	unsigned int disc_calls;		/* verbs_rc_disconnect calls that reached it */
	uint64_t closed;			/* peer ids (< 64) it disconnected */
	unsigned int keys_add_calls;		/* job_keys_add calls that reached it (last_keys) */
};

extern const struct sg_ctl_agent_ops mock_ops;

/** Reset @p m to its fixed state: 4 lcores (1 io, 2 reducers, 1 control), no jobs. */
void mock_init(struct mock_agent *m);

/** Fill a server config for tests (loopback, short timeouts). */
void mock_config(struct sg_ctl_server_config *cfg, struct mock_agent *m, const char *unix_path);

/** The shared secret mock_config() installs. */
extern const uint8_t mock_secret[32];

#endif /* CTL_MOCK_H */
