/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmactl top: a live view of one or several nodes (docs/control.md, "sigmactl top").
 */
#ifndef SIGMACTL_TOP_H
#define SIGMACTL_TOP_H

#include <stddef.h>
#include <stdint.h>

/** The nodes to watch and how to reach them. */
struct top_conf {
	const char *const *targets; /**< control targets: "unix:PATH", "HOST:PORT" */
	unsigned int n;
	const uint8_t *secret;      /**< for TCP targets (NULL if all are Unix) */
	size_t secret_len;
	uint32_t timeout_ms;        /**< per call */
};

/**
 * Run `top [--sort KEY] [--interval S] [--count N]` (@p argc, @p argv: "top"
 * and the words after it). Full screen (curses) when stdout is a terminal, else one
 * plain-text frame per interval. @return the exit status: 0, or 2 for bad usage
 * (the message printed, naming the valid sort keys).
 */
int sigmactl_top(const struct top_conf *tc, int argc, char **argv);

#endif /* SIGMACTL_TOP_H */
