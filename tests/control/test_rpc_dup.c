/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A program that registers a method name twice (here "version", which the
 * server registers too) is refused at sg_ctl_server_create() with EINVAL,
 * rather than answering with whichever registration the linker put first.
 * Built with RPC_DUP_NODE (test rpc_dup_node): the same for a name registered
 * twice for one node's table, while one node registration of a plain method's
 * name is not a duplicate (every node's server starts with those).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sg_ctl_rpc.h"
#include "sg_test.h"

static int m_version_again(struct sg_ctl_server *s, json_t *params, json_t **res,
			   struct sg_rpc_err *err)
{
	(void)s;
	(void)params;
	(void)err;
	*res = json_true();
	return 0;
}

static const struct sg_ctl_agent_ops none;

#ifdef RPC_DUP_NODE
SG_RPC_NODE_REGISTER(&none, "drain", m_version_again);
SG_RPC_NODE_REGISTER(&none, "drain", m_version_again);
#else
SG_RPC_REGISTER("version", m_version_again);
#endif

int main(void)
{
	struct sg_ctl_server_config cfg = {.tcp_disable = true, .ops = &none};
	struct sg_ctl_server *srv;
	char path[64];

	snprintf(path, sizeof(path), "/tmp/sg_rpc_dup.%d.sock", (int)getpid());
	cfg.unix_path = path;
	errno = 0;
	srv = sg_ctl_server_create(&cfg);
	SG_CHECK(srv == NULL && errno == EINVAL, "a method registered twice: server %p, errno %d",
		 (void *)srv, errno);
	SG_CHECK(access(path, F_OK) != 0, "no socket file left behind");
	sg_ctl_server_destroy(srv);
	return sg_test_finish("rpc_dup");
}
