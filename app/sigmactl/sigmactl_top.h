/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigmactl top: a live view of one or several nodes (docs/control.md, "sigmactl top").
 */
#ifndef SIGMACTL_TOP_H
#define SIGMACTL_TOP_H

#include <stddef.h>
#include <stdint.h>

/** Longest control target top keeps, and the most nodes it watches. */
#define TOP_TARGET_MAX 128
#define TOP_MAX_NODES 64

/** The nodes to watch and how to reach them. */
struct top_conf {
	const char *const *targets; /**< control targets: "unix:PATH", "HOST:PORT" */
	unsigned int n;
	const uint8_t *secret;      /**< for TCP targets (NULL if all are Unix) */
	size_t secret_len;
	uint32_t timeout_ms;        /**< per call */
	/**
	 * Optional: the targets, asked again before each frame (`--etcd`: the
	 * cluster's live nodes), instead of @p targets and @p n. It writes at most
	 * @p cap into @p out and returns how many, or -1 with a reason in @p err
	 * (the frame says it and keeps the nodes it had).
	 */
	int (*nodes_get)(void *arg, char (*out)[TOP_TARGET_MAX], unsigned int cap, char *err,
		       size_t errlen);
	void *nodes_arg;
	const char *source;         /**< with nodes_get: what the frame names as the nodes' source */
};

/**
 * Run `top [--sort KEY] [--interval S] [--count N]` (@p argc, @p argv: "top"
 * and the words after it). Full screen (curses) when stdout is a terminal, else one
 * plain-text frame per interval. @return the exit status: 0, or 2 for bad usage
 * (the message printed, naming the valid sort keys).
 */
int sigmactl_top(const struct top_conf *tc, int argc, char **argv);

#endif /* SIGMACTL_TOP_H */
