/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Helpers shared by the gpu/ tests: the reference topologies and element
 * access for the dtypes the executors take.
 */
#ifndef GPU_TEST_H
#define GPU_TEST_H

#include <limits.h>
#include <stdlib.h>

#include "sg_gpu.h"
#include "sg_test.h"

/* Folder of the reference topologies: argv[1] of every gpu test. */
static const char *topo_dir = "gpu/topologies";

static const char *const ref_files[] = {"pcie-8gpu.topo", "dgx1-nvlink.topo",
					"dgx-h100-nvswitch.topo", "ws-4gpu.topo"};
#define NREF (sizeof(ref_files) / sizeof(ref_files[0]))

/* Load a reference topology; a missing one ends the test as failed. */
static inline struct sg_gpu_topo *load_ref(const char *name)
{
	char path[PATH_MAX], err[256] = "";
	struct sg_gpu_topo *t;

	snprintf(path, sizeof(path), "%s/%s", topo_dir, name);
	t = sg_gpu_topo_load(path, err, sizeof(err));
	if (t == NULL) {
		fprintf(stderr, "load %s: %s\n", path, err);
		exit(1);
	}
	return t;
}

static inline float val_get(enum sg_dtype dt, const void *buf, size_t i)
{
	if (dt == SG_DTYPE_FP32)
		return ((const float *)buf)[i];
	if (dt == SG_DTYPE_FP16)
		return sg_fp16_to_fp32(((const uint16_t *)buf)[i]);
	return sg_bf16_to_fp32(((const uint16_t *)buf)[i]);
}

static inline void val_set(enum sg_dtype dt, void *buf, size_t i, float v)
{
	if (dt == SG_DTYPE_FP32)
		((float *)buf)[i] = v;
	else if (dt == SG_DTYPE_FP16)
		((uint16_t *)buf)[i] = sg_fp32_to_fp16(v);
	else
		((uint16_t *)buf)[i] = sg_fp32_to_bf16(v);
}

/* Integer-valued test data in [-8, 8]: sums of up to 16 are exact in bf16. */
static inline float exact_val(size_t i, unsigned seed)
{
	return (float)((int)((i * 7 + seed * 13 + (i >> 5)) % 17) - 8);
}

#endif /* GPU_TEST_H */
