/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers shared by the pipeline tests (whatever the transport).
 */
#ifndef DP_PIPE_UTIL_H
#define DP_PIPE_UTIL_H

#include "sg_dp_pipeline.h"
#include "sg_test.h"

/* Replace @p c's layout: each list in the `io`, `reduce`, `rtc` syntax, or NULL. */
static inline void dp_layout(struct sg_dp_config *c, const char *io, const char *red,
			     const char *rtc)
{
	char e[256] = "";

	c->n_lcores = 0;
	if (io)
		SG_CHECK(sg_dp_layout_parse(c, SG_ROLE_IO, io, e, sizeof(e)) == 0, "io: %s", e);
	if (red)
		SG_CHECK(sg_dp_layout_parse(c, SG_ROLE_REDUCE, red, e, sizeof(e)) == 0,
			 "reduce: %s", e);
	if (rtc)
		SG_CHECK(sg_dp_layout_parse(c, SG_ROLE_RTC, rtc, e, sizeof(e)) == 0, "rtc: %s",
			 e);
}

#endif /* DP_PIPE_UTIL_H */
