/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memif server ports (sg_dp_memif.c): sigmad relays their control channel, so
 * that clients that leave or misbehave cannot crash it through DPDK 22.11's
 * memif PMD (the file says how). Start after the lcores are allocated and
 * before the ports start; stop once the lcores have returned and before the
 * ports stop. Start logs and leaves a socket unguarded when it cannot take
 * it over; it fails only for lack of memory or threads.
 */
#ifndef SG_DP_MEMIF_H
#define SG_DP_MEMIF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sg_dp_lcore;
struct sg_dp_pipeline;

struct sg_dp_memif_guard;
int sg_dp_memif_guard_start(struct sg_dp_pipeline *p, char *err, size_t errlen);
void sg_dp_memif_guard_stop(struct sg_dp_pipeline *p);
/*
 * The memif wake-up channel (sg_dp_memif.c, docs/sigmad.md): a client that asked
 * for one sleeps on event fds that sigmad writes after sending to it, and writes
 * one that sigmad's lcores sleep on. tx_kick: after a TX burst on (@p port,
 * @p queue), lcore context, cheap without a channel. idle_wait and wake: the ethdev
 * transport's ops of the same names (false: the lcore polls a queue that no
 * channel covers).
 */
void sg_dp_memif_tx_kick(struct sg_dp_pipeline *p, uint16_t port, uint16_t queue);
bool sg_dp_memif_idle_wait(struct sg_dp_lcore *lc, unsigned int us);
void sg_dp_memif_wake(struct sg_dp_lcore *lc);

#endif /* SG_DP_MEMIF_H */
