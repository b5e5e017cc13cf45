/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigma-plan: print the staging plan for a topology file or for this
 * machine, with the bytes each link carries per partition, and optionally
 * the principle checker's findings.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "sg_gpu.h"
#include "sg_parse.h"
#include "sg_version.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: sigma-plan (--topo FILE | --local [--sysfs ROOT]) [options]\n"
		"  --topo FILE        topology file (format: docs/gpu-topology.md)\n"
		"  --local            discover this machine from sysfs (plus CUDA/NVML when usable)\n"
		"  --sysfs ROOT       read ROOT/sys/bus/pci/devices instead of /sys (tests)\n"
		"  --partition BYTES  partition size (default 4096000)\n"
		"  --nic N|NAME       NIC to push through (default: the first)\n"
		"  --root GPU         force the root GPU (index)\n"
		"  --strategy S       auto, cpu-assisted, nvlink-tree, nvswitch, ring\n"
		"  --check            run the principle checker; exit 3 on a violation\n"
		"  --json             JSON instead of text\n"
		"  --dump-topo        print the topology in the file format and exit\n"
		"  --version          print the release and exit\n"
		"  -h, --help         this text\n"
		"exit: 0 ok, 1 error, 2 usage, 3 violations (with --check)\n");
}

/* Decimal, or hex after 0x (sg_parse_u64x()). */
static int parse_u32(const char *s, uint32_t max, uint32_t *out)
{
	uint64_t v;

	if (sg_parse_u64x(s, 0, max, &v) != 0)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static void json_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

static void json_ep(FILE *out, const struct sg_gpu_plan *p, const struct sg_gpu_ep *e)
{
	static const char *const mem[] = {"grad", "scratch", "host", "net"};

	fprintf(out, "{\"mem\":\"%s\",\"idx\":%u", e->mem < SG_GPU_MEM_COUNT ? mem[e->mem] : "?",
		e->idx);
	if (e->mem == SG_GPU_MEM_SCRATCH)
		fprintf(out, ",\"slot\":%u", e->slot);
	if (e->mem == SG_GPU_MEM_HOST && e->idx < p->nhost)
		fprintf(out, ",\"numa\":%d", p->host_numa[e->idx]);
	fputc('}', out);
}

static void print_json(const struct sg_gpu_topo *t, const struct sg_gpu_plan *p,
		       const struct sg_gpu_report *rep, bool check, const char *gdr, FILE *out)
{
	static const char *const via[] = {"none", "pcie", "nvlink"};
	static const char *const lk[] = {"pcie", "socket", "nvlink"};
	char name[80];

	fprintf(out, "{\"topology\":");
	json_str(out, t->name);
	fprintf(out, ",\"strategy\":");
	json_str(out, p->strategy);
	fprintf(out, ",\"why\":");
	json_str(out, p->why);
	fprintf(out, ",\"partition_bytes\":%" PRIu32 ",\"gpus\":%u,\"nic\":", p->partition_bytes,
		p->ngpus);
	json_str(out, t->nodes[t->nic[p->nic]].name);
	fprintf(out, ",\"root\":%d,\"scratch_slots\":%u,\"host_buffers\":%u,\"steps\":[", p->root,
		p->scratch_slots, p->nhost);
	for (unsigned s = 0; s < p->nsteps; s++) {
		const struct sg_gpu_step *st = &p->steps[s];

		fprintf(out, "%s{\"kind\":\"%s\",\"via\":\"%s\",\"src\":[", s ? "," : "",
			sg_gpu_step_kind_name(st->kind), st->via <= 2 ? via[st->via] : "?");
		for (unsigned i = 0; i < st->nsrc; i++) {
			if (i > 0)
				fputc(',', out);
			json_ep(out, p, &st->src[i]);
		}
		fprintf(out, "],\"dst\":");
		json_ep(out, p, &st->dst);
		fprintf(out, ",\"offset\":%" PRIu32 ",\"bytes\":%" PRIu32 "}", st->data_off,
			st->bytes);
	}
	fprintf(out, "],\"links\":[");
	for (unsigned i = 0; i < rep->nlinks; i++) {
		const struct sg_gpu_link_bytes *l = &rep->links[i];

		sg_gpu_link_name(t, l, name, sizeof(name));
		fprintf(out, "%s{\"kind\":\"%s\",\"name\":", i ? "," : "", lk[l->kind]);
		json_str(out, name);
		fprintf(out, ",\"up\":%" PRIu64 ",\"down\":%" PRIu64 ",\"nic_link\":%s}", l->up,
			l->down,
			l->kind != SG_GPU_LINK_NVLINK && l->node == rep->nic_link ? "true" : "false");
	}
	fprintf(out, "]");
	if (gdr != NULL) {
		fprintf(out, ",\"gpudirect\":");
		json_str(out, gdr);
	}
	if (check) {
		fprintf(out, ",\"violations\":[");
		for (unsigned i = 0; i < rep->nviolations && i < SG_GPU_MAX_VIOLATIONS; i++) {
			const struct sg_gpu_violation *v = &rep->violations[i];

			fprintf(out, "%s{\"principle\":%d,\"step\":%d,\"bytes\":%" PRIu64
				     ",\"message\":",
				i ? "," : "", v->principle, v->step, v->bytes);
			json_str(out, v->msg);
			fputc('}', out);
		}
		fprintf(out, "],\"violation_count\":%u", rep->nviolations);
	}
	fprintf(out, "}\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"topo", required_argument, NULL, 't'},      {"local", no_argument, NULL, 'l'},
		{"sysfs", required_argument, NULL, 's'},     {"partition", required_argument, NULL, 'p'},
		{"nic", required_argument, NULL, 'n'},       {"root", required_argument, NULL, 'r'},
		{"strategy", required_argument, NULL, 'S'},  {"check", no_argument, NULL, 'c'},
		{"json", no_argument, NULL, 'j'},            {"dump-topo", no_argument, NULL, 'd'},
		{"help", no_argument, NULL, 'h'},            {"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	const char *topo_file = NULL, *sysfs = "/", *nic = NULL;
	bool local = false, check = false, json = false, dump = false;
	struct sg_gpu_plan_opts o = {0};
	struct sg_gpu_report *rep = NULL;
	struct sg_gpu_topo *t = NULL;
	struct sg_gpu_plan *p = NULL;
	char err[256], gdr[256];
	uint32_t v;
	int c, rc = 1;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 't':
			topo_file = optarg;
			break;
		case 'l':
			local = true;
			break;
		case 's':
			sysfs = optarg;
			break;
		case 'p':
			if (parse_u32(optarg, 1u << 30, &v) < 0 || v == 0) {
				fprintf(stderr, "sigma-plan: --partition '%s': want 1..2^30 bytes\n",
					optarg);
				return 2;
			}
			o.partition_bytes = v;
			break;
		case 'n':
			nic = optarg;
			break;
		case 'r':
			if (parse_u32(optarg, SG_GPU_MAX_GPUS - 1, &v) < 0) {
				fprintf(stderr, "sigma-plan: --root '%s': want a GPU index\n", optarg);
				return 2;
			}
			o.root = (int)v + 1;
			break;
		case 'S':
			if (sg_gpu_strategy_from_name(optarg, &o.strategy) < 0) {
				fprintf(stderr, "sigma-plan: unknown strategy '%s'\n", optarg);
				return 2;
			}
			break;
		case 'c':
			check = true;
			break;
		case 'j':
			json = true;
			break;
		case 'd':
			dump = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			fputs(SG_VERSION_TEXT("sigma-plan"), stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || (topo_file == NULL) == !local) {
		fprintf(stderr, "sigma-plan: give exactly one of --topo FILE and --local\n");
		usage(stderr);
		return 2;
	}
	if (topo_file != NULL) {
		t = sg_gpu_topo_load(topo_file, err, sizeof(err));
	} else {
		t = sg_gpu_topo_discover(sysfs, err, sizeof(err));
		if (t != NULL && sg_gpu_topo_add_cuda_info(t, err, sizeof(err)) < 0)
			fprintf(stderr, "sigma-plan: note: no CUDA details (%s)\n", err);
		if (t != NULL && t->ngpus == 0 && !dump) {
			snprintf(err, sizeof(err), "no NVIDIA GPU under %s/sys/bus/pci/devices",
				 strcmp(sysfs, "/") == 0 ? "" : sysfs);
			sg_gpu_topo_free(t);
			t = NULL;
		}
	}
	if (t == NULL) {
		fprintf(stderr, "sigma-plan: %s\n", err);
		return 1;
	}
	if (dump) {
		rc = sg_gpu_topo_write(t, stdout) == 0 ? 0 : 1;
		goto out;
	}
	if (nic != NULL) {
		int n = sg_gpu_topo_find(t, nic);

		if (n >= 0 && t->nodes[n].kind == SG_GPU_NODE_NIC)
			o.nic = t->nodes[n].index;
		else if (parse_u32(nic, SG_GPU_MAX_NICS - 1, &v) == 0)
			o.nic = (int)v;
		else {
			fprintf(stderr, "sigma-plan: no NIC '%s' in the topology\n", nic);
			goto out;
		}
	}
	p = sg_gpu_plan_build(t, &o, err, sizeof(err));
	if (p == NULL) {
		fprintf(stderr, "sigma-plan: cannot plan: %s\n", err);
		goto out;
	}
	rep = malloc(sizeof(*rep));
	if (rep == NULL || sg_gpu_plan_check(t, p, rep, err, sizeof(err)) < 0) {
		fprintf(stderr, "sigma-plan: checker: %s\n", rep ? err : "out of memory");
		goto out;
	}
	/* Only the local machine has a NIC and GPUs to try GPUDirect RDMA on. */
	if (local)
		sg_gpu_gdr_probe(gdr, sizeof(gdr));
	if (json) {
		print_json(t, p, rep, check, local ? gdr : NULL, stdout);
	} else {
		printf("topology %s: %u GPUs, %u NICs, %u nodes, %u NVLink edges\n", t->name,
		       t->ngpus, t->nnics, t->nnodes, t->nnvlinks);
		sg_gpu_plan_print(t, p, stdout);
		sg_gpu_report_print(t, rep, check, stdout);
		if (local)
			printf("gpudirect: %s\n", gdr);
	}
	rc = check && rep->nviolations > 0 ? 3 : 0;
out:
	free(rep);
	sg_gpu_plan_free(p);
	sg_gpu_topo_free(t);
	return rc;
}
