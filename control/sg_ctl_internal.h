/* SPDX-License-Identifier: BSD-3-Clause */
/* Private to control/: logging and helpers shared by its files. */
#ifndef SG_CTL_INTERNAL_H
#define SG_CTL_INTERNAL_H

#include <rte_log.h>

#include "sg_ctl_members.h"
#include "sg_ctl_server.h"

extern int sg_ctl_logtype;

#define SG_CTL_LOG(level, fmt, ...) \
	rte_log(RTE_LOG_##level, sg_ctl_logtype, "sigma.control: " fmt "\n", ##__VA_ARGS__)


#endif /* SG_CTL_INTERNAL_H */
