/* SPDX-License-Identifier: BSD-3-Clause */
/* sigmactl's elastic commands (sigmactl_elastic.c): not a library, part of sigmactl. */
#ifndef SIGMACTL_ELASTIC_H
#define SIGMACTL_ELASTIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sg_etcd.h"

/**
 * `drain NODE [--timeout S] [--propose]`, `undrain NODE [--timeout S] [--propose]` or
 * `elastic` (argv[0]), against etcd @p ec and @p cluster. --propose: sigmactl proposes
 * the change too, reaching the nodes' control endpoints with @p secret (@p secret_len
 * 0: none). @return sigmactl's exit status (0, 1 etcd or not taken within the timeout,
 * 2 usage).
 */
int sigmactl_elastic(const struct sg_etcd_conf *ec, const char *cluster, int argc, char **argv,
		     bool json, const uint8_t *secret, size_t secret_len);

#endif /* SIGMACTL_ELASTIC_H */
