/* SPDX-License-Identifier: BSD-3-Clause */
/* The control side's state (sg_dp_control.c; its operations are sg_dp_pipeline.h's). */
#ifndef SG_DP_CONTROL_H
#define SG_DP_CONTROL_H

struct sg_dp_pipeline;

/* Free the control side's moves and staging (sg_dp_control.c) once the lcores returned. */
void sg_dp_control_fini(struct sg_dp_pipeline *p);

#endif /* SG_DP_CONTROL_H */
