/* SPDX-License-Identifier: BSD-3-Clause */
/* sigmactl's elastic commands (sigmactl_elastic.c): not a library, part of sigmactl. */
#ifndef SIGMACTL_ELASTIC_H
#define SIGMACTL_ELASTIC_H

#include <stdbool.h>

#include "sg_etcd.h"

/**
 * `drain NODE [--timeout S]`, `undrain NODE [--timeout S]` or `elastic` (argv[0]),
 * against etcd @p ec and @p cluster. @return sigmactl's exit status (0, 1 etcd or
 * not taken within the timeout, 2 usage).
 */
int sigmactl_elastic(const struct sg_etcd_conf *ec, const char *cluster, int argc, char **argv,
		     bool json);

#endif /* SIGMACTL_ELASTIC_H */
