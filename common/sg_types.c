/* SPDX-License-Identifier: BSD-3-Clause */
/* Names of the shared vocabulary (sg_types.h). */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "sg_types.h"

static const char *const dtype_names[SG_DTYPE_COUNT] = {
	[SG_DTYPE_FP32] = "fp32", [SG_DTYPE_FP64] = "fp64", [SG_DTYPE_FP16] = "fp16",
	[SG_DTYPE_BF16] = "bf16", [SG_DTYPE_INT32] = "int32", [SG_DTYPE_INT64] = "int64",
	[SG_DTYPE_INT8] = "int8", [SG_DTYPE_UINT8] = "uint8",
};

static const size_t dtype_sizes[SG_DTYPE_COUNT] = {
	[SG_DTYPE_FP32] = 4, [SG_DTYPE_FP64] = 8, [SG_DTYPE_FP16] = 2, [SG_DTYPE_BF16] = 2,
	[SG_DTYPE_INT32] = 4, [SG_DTYPE_INT64] = 8, [SG_DTYPE_INT8] = 1, [SG_DTYPE_UINT8] = 1,
};

static const char *const mode_names[SG_MODE_COUNT] = {
	[SG_MODE_SYNC] = "sync", [SG_MODE_ASYNC] = "async", [SG_MODE_DETERM] = "deterministic",
};

/* Index of @p name (any case) in @p names, or -EINVAL. */
static int find_name(const char *const *names, unsigned int n, const char *name)
{
	for (unsigned int i = 0; name != NULL && i < n; i++)
		if (strcasecmp(name, names[i]) == 0)
			return (int)i;
	return -EINVAL;
}

size_t sg_dtype_size(enum sg_dtype dt)
{
	return sg_dtype_valid(dt) ? dtype_sizes[dt] : 0;
}

const char *sg_dtype_name(enum sg_dtype dt)
{
	if (dt == SG_DTYPE_ANY)
		return "any";
	return sg_dtype_valid(dt) ? dtype_names[dt] : "unknown";
}

int sg_dtype_from_name(const char *name, enum sg_dtype *dt)
{
	int i = find_name(dtype_names, SG_DTYPE_COUNT, name);

	if (i < 0)
		return i;
	*dt = (enum sg_dtype)i;
	return 0;
}

int sg_job_dtype_from_name(const char *name, enum sg_dtype *dt)
{
	if (name != NULL && strcasecmp(name, "any") == 0) {
		*dt = SG_DTYPE_ANY;
		return 0;
	}
	return sg_dtype_from_name(name, dt);
}

const char *sg_mode_name(enum sg_mode mode)
{
	return (unsigned int)mode < SG_MODE_COUNT ? mode_names[mode] : "unknown";
}

int sg_mode_from_name(const char *name, enum sg_mode *mode)
{
	int i = find_name(mode_names, SG_MODE_COUNT, name);

	if (i < 0 && name != NULL && strcasecmp(name, "determ") == 0)
		i = SG_MODE_DETERM;
	if (i < 0)
		return i;
	*mode = (enum sg_mode)i;
	return 0;
}

const char *sg_node_kind_name(enum sg_node_kind kind)
{
	return kind == SG_NODE_CPU ? "cpu" : kind == SG_NODE_GPU ? "gpu" : "unknown";
}

const char *sg_role_name(enum sg_role role)
{
	switch (role) {
	case SG_ROLE_IO:
		return "io";
	case SG_ROLE_REDUCE:
		return "reducer";
	case SG_ROLE_RTC:
		return "rtc";
	case SG_ROLE_CONTROL:
		return "control";
	}
	return "unknown";
}

int sg_node_kind_from_name(const char *name, enum sg_node_kind *kind)
{
	if (name == NULL || kind == NULL)
		return -EINVAL;
	if (strcmp(name, "cpu") == 0)
		*kind = SG_NODE_CPU;
	else if (strcmp(name, "gpu") == 0)
		*kind = SG_NODE_GPU;
	else
		return -EINVAL;
	return 0;
}
