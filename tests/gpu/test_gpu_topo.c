/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Topology: the reference files, the text format's errors (line and
 * reason), round trips, random garbage, and sysfs discovery on a fake tree
 * that the test builds under /tmp.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu_test.h"
#include "sg_gpu_internal.h"

static unsigned count_kind(const struct sg_gpu_topo *t, enum sg_gpu_node_kind k)
{
	unsigned n = 0;

	for (unsigned i = 0; i < t->nnodes; i++)
		n += t->nodes[i].kind == k;
	return n;
}

static unsigned nvlink_total(const struct sg_gpu_topo *t)
{
	unsigned n = 0;

	for (unsigned i = 0; i < t->nnvlinks; i++)
		n += t->nvlinks[i].count;
	return n;
}

static void test_reference_files(void)
{
	struct sg_gpu_topo *t;

	t = load_ref("pcie-8gpu.topo");
	if (t != NULL) {
		SG_CHECK_EQ(t->ngpus, 8);
		SG_CHECK_EQ(t->nnics, 1);
		SG_CHECK_EQ(count_kind(t, SG_GPU_NODE_SOCKET), 2);
		SG_CHECK_EQ(count_kind(t, SG_GPU_NODE_SWITCH), 4);
		SG_CHECK_EQ(t->nnvlinks, 0);
		SG_CHECK(sg_gpu_topo_same_switch(t, 0, 1), "gpu0 and gpu1 share sw0");
		SG_CHECK(!sg_gpu_topo_same_switch(t, 1, 2), "gpu1 and gpu2 do not");
		SG_CHECK(!sg_gpu_topo_same_switch(t, 0, 0 + 16), "out of range is false");
		SG_CHECK_EQ(sg_gpu_topo_top_switch(t, t->nic[0]), sg_gpu_topo_find(t, "sw0"));
		SG_CHECK_EQ(sg_gpu_topo_socket_of(t, t->gpu[7]), sg_gpu_topo_find(t, "cpu1"));
		SG_CHECK_EQ(t->nodes[t->gpu[5]].numa, 1);
		SG_CHECK_EQ(t->nodes[t->nic[0]].gbps, 100);
		SG_CHECK(!sg_gpu_topo_nvlink_path(t, 0, 1), "no NVLink on a PCIe-only box");
	}
	sg_gpu_topo_free(t);

	t = load_ref("dgx1-nvlink.topo");
	if (t != NULL) {
		SG_CHECK_EQ(t->ngpus, 8);
		SG_CHECK_EQ(t->nnics, 4);
		SG_CHECK_EQ(t->nnvlinks, 16);
		SG_CHECK_EQ(nvlink_total(t), 24); /* 6 links per GPU, 8 GPUs, 2 ends */
		for (unsigned g = 0; g < 8; g++) {
			unsigned links = 0;

			for (unsigned h = 0; h < 8; h++)
				links += sg_gpu_topo_nvlinks(t, t->gpu[g], t->gpu[h]);
			SG_CHECK(links == 6, "gpu%u has %u NVLinks, wants 6", g, links);
		}
		SG_CHECK(sg_gpu_topo_nvlink_path(t, 0, 4), "gpu0-gpu4 NVLink");
		SG_CHECK(!sg_gpu_topo_nvlink_path(t, 0, 5), "gpu0-gpu5 has no direct NVLink");
		SG_CHECK_EQ(sg_gpu_topo_nvlinks(t, t->gpu[0], t->gpu[3]), 2);
	}
	sg_gpu_topo_free(t);

	t = load_ref("dgx-h100-nvswitch.topo");
	if (t != NULL) {
		SG_CHECK_EQ(t->ngpus, 8);
		SG_CHECK_EQ(t->nnics, 8);
		SG_CHECK_EQ(count_kind(t, SG_GPU_NODE_NVSWITCH), 4);
		SG_CHECK_EQ(nvlink_total(t), 8 * 18);
		SG_CHECK(sg_gpu_topo_nvlink_path(t, 0, 7), "every pair via NVSwitch");
		SG_CHECK(!sg_gpu_topo_same_switch(t, 0, 1), "one GPU per PCIe switch");
	}
	sg_gpu_topo_free(t);

	t = load_ref("ws-4gpu.topo");
	if (t != NULL) {
		SG_CHECK_EQ(t->ngpus, 4);
		SG_CHECK(sg_gpu_topo_same_switch(t, 0, 3), "all four under sw0");
		SG_CHECK_EQ(sg_gpu_topo_top_switch(t, t->nic[0]), -ENOENT);
	}
	sg_gpu_topo_free(t);
}

static void test_round_trip(void)
{
	for (unsigned i = 0; i < NREF; i++) {
		struct sg_gpu_topo *t = load_ref(ref_files[i]), *u;
		char *a = NULL, *b = NULL, err[256];
		size_t alen = 0, blen = 0;
		FILE *f;

		f = open_memstream(&a, &alen);
		SG_CHECK_EQ(sg_gpu_topo_write(t, f), 0);
		fclose(f);
		u = sg_gpu_topo_parse(a, "written", err, sizeof(err));
		SG_CHECK(u != NULL, "reparse %s: %s", ref_files[i], err);
		if (u != NULL) {
			f = open_memstream(&b, &blen);
			sg_gpu_topo_write(u, f);
			fclose(f);
			SG_CHECK(strcmp(a, b) == 0, "%s: write/parse/write differs", ref_files[i]);
			SG_CHECK_EQ(u->nnodes, t->nnodes);
			SG_CHECK_EQ(u->nnvlinks, t->nnvlinks);
		}
		free(a);
		free(b);
		sg_gpu_topo_free(t);
		sg_gpu_topo_free(u);
	}
}

/* Each bad text fails at the given line with a reason containing 'why'. */
static void test_bad_text(void)
{
	static const struct {
		const char *text;
		unsigned line;
		const char *why;
	} bad[] = {
		{"socket cpu0\ngpux g parent=cpu0\n", 2, "unknown keyword"},
		{"socket cpu0\nroot rp0 parent=cpu0\ngpu g0 parent=rpX\n", 3, "not defined"},
		{"socket cpu0\ngpu g0 parent=cpu0\n", 2, "cannot hang off"},
		{"socket cpu0\nroot rp0\n", 2, "needs a parent"},
		{"socket cpu0 numa=abc\n", 1, "numa"},
		{"socket cpu0 numa=-1\n", 1, "numa"},
		{"socket cpu0 numa=+1\n", 1, "numa"},
		{"socket cpu0 numa=01\n", 1, "numa"}, /* a leading zero, as everywhere */
		{"socket cpu0\nsocket cpu0\n", 2, "used twice"},
		{"socket cpu0\nroot rp0 parent=cpu0\ngpu g0 parent=rp0 pci=zz:00:00.0\n", 3, "pci"},
		{"socket cpu0\nroot rp0 parent=cpu0\ngpu g0 parent=rp0 speed=3\n", 3,
		 "unknown attribute"},
		{"socket cpu0\nroot rp0 parent=cpu0\ngpu g0 parent=rp0 junk\n", 3, "key=value"},
		{"socket cpu0\nroot rp0 parent=cpu0\nnic n0 parent=rp0 gbps=99999999999\n", 3,
		 "gbps"},
		{"socket cpu0\nroot rp0 parent=cpu0\ngpu g0 parent=rp0\nnvlink g0 g1\n", 4,
		 "unknown node"},
		{"socket cpu0\nroot rp0 parent=cpu0\ngpu g0 parent=rp0\nnvlink g0 g0\n", 4,
		 "two different"},
		{"socket cpu0\nroot rp0 parent=cpu0\ngpu g0 parent=rp0\ngpu g1 parent=rp0\n"
		 "nvlink g0 g1 count=0\n",
		 5, "count"},
		{"socket cpu0\nroot rp0 parent=cpu0\ngpu g0 parent=rp0\nnvlink g0 rp0\n", 4,
		 "two different"},
		{"socket cpu0\nroot rp0 parent=cpu0\ngpu g0 parent=rp0\nnvswitch s0 parent=cpu0\n", 4,
		 "no parent"},
		{"socket cpu0\nroot rp0 parent=cpu0\ngpu g$ parent=rp0\n", 3, "bad name"},
		{"name\n", 1, "usage"},
		{"socket a b c d e f g h i\n", 1, "too many"},
		{"gpu\n", 1, "needs a name"},
	};
	char err[256];

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[32];
		struct sg_gpu_topo *t;

		err[0] = '\0';
		errno = 0;
		t = sg_gpu_topo_parse(bad[i].text, "bad.topo", err, sizeof(err));
		SG_CHECK(t == NULL, "case %u parsed: %s", i, bad[i].text);
		SG_CHECK_EQ(errno, EINVAL);
		snprintf(want, sizeof(want), "bad.topo:%u:", bad[i].line);
		SG_CHECK(strncmp(err, want, strlen(want)) == 0, "case %u: '%s' lacks '%s'", i, err,
			 want);
		SG_CHECK(strstr(err, bad[i].why) != NULL, "case %u: '%s' lacks '%s'", i, err,
			 bad[i].why);
		sg_gpu_topo_free(t);
	}
	/* Whole-file problems name the file, not a line. */
	SG_CHECK(sg_gpu_topo_parse("# nothing\n", "e.topo", err, sizeof(err)) == NULL, "empty");
	SG_CHECK(strstr(err, "no GPU") != NULL, "empty: %s", err);
	SG_CHECK(sg_gpu_topo_parse("nvswitch s0\n", "n.topo", err, sizeof(err)) == NULL, "lone");
	SG_CHECK(sg_gpu_topo_parse("socket a numa=1\nsocket b\nroot r parent=a\ngpu g parent=r\n",
				   "d.topo", err, sizeof(err)) == NULL,
		 "two sockets on NUMA node 1");
	SG_CHECK(strstr(err, "NUMA node 1") != NULL, "dup numa: %s", err);
	SG_CHECK(sg_gpu_topo_load("/nonexistent/x.topo", err, sizeof(err)) == NULL, "missing");
	SG_CHECK_EQ(errno, ENOENT);
	SG_CHECK(strstr(err, "/nonexistent/x.topo") != NULL, "missing: %s", err);
	SG_CHECK(sg_gpu_topo_parse(NULL, "x", err, sizeof(err)) == NULL, "NULL text");
}

/* Random lines from topology-like tokens: never a crash, always a verdict. */
static void test_random_garbage(void)
{
	static const char *const words[] = {
		"socket", "root", "switch", "gpu", "nic", "nvswitch", "nvlink", "name", "cpu0",
		"rp0", "sw0", "g0", "g1", "parent=cpu0", "parent=rp0", "parent=sw0", "parent=g0",
		"numa=1", "pci=0000:01:00.0", "gbps=100", "count=2", "count=99", "=", "#", "\t",
		"parent=", "numa=", "\xff\xfe", "pci=0000:01:00.9", "s0", "parent=s0",
	};
	const unsigned nw = sizeof(words) / sizeof(words[0]);
	char text[2048], err[256];
	unsigned parsed = 0;

	srand(7);
	for (unsigned iter = 0; iter < 3000; iter++) {
		size_t len = 0;
		unsigned lines = 1 + (unsigned)rand() % 12;
		struct sg_gpu_topo *t;

		for (unsigned l = 0; l < lines; l++) {
			unsigned n = (unsigned)rand() % 6;

			for (unsigned w = 0; w < n && len < sizeof(text) - 64; w++)
				len += (size_t)snprintf(text + len, sizeof(text) - len, "%s ",
							words[(unsigned)rand() % nw]);
			text[len++] = '\n';
		}
		text[len] = '\0';
		err[0] = '\0';
		t = sg_gpu_topo_parse(text, "rand", err, sizeof(err));
		if (t != NULL) {
			parsed++;
			SG_CHECK(t->ngpus > 0, "a parsed topology has a GPU");
		} else {
			SG_CHECK(err[0] != '\0', "rejected without a reason: %s", text);
		}
		sg_gpu_topo_free(t);
	}
	printf("random garbage: %u of 3000 parsed\n", parsed);
}

/* Mutated reference files: each is accepted or refused with file:line or file: reason. */
static void test_mutated_files(void)
{
	char path[PATH_MAX], err[256];
	unsigned parsed = 0, total = 0;

	srand(5);
	for (unsigned f = 0; f < NREF; f++) {
		char *text = NULL, *copy;
		size_t len = 0;
		FILE *in;

		snprintf(path, sizeof(path), "%s/%s", topo_dir, ref_files[f]);
		in = fopen(path, "r");
		if (in == NULL || getdelim(&text, &len, '\0', in) < 0) {
			SG_CHECK(0, "read %s", path);
			if (in)
				fclose(in);
			free(text);
			continue;
		}
		fclose(in);
		len = strlen(text);
		copy = malloc(len + 1);
		for (unsigned iter = 0; iter < 1500; iter++) {
			struct sg_gpu_topo *t;

			memcpy(copy, text, len + 1);
			for (unsigned m = 0; m < 1 + iter % 3; m++) {
				size_t at = (size_t)rand() % len;

				copy[at] = (char)(iter % 5 == 0 ? '\n' : 1 + rand() % 255);
			}
			err[0] = '\0';
			t = sg_gpu_topo_parse(copy, "mut.topo", err, sizeof(err));
			total++;
			if (t != NULL)
				parsed++;
			else
				SG_CHECK(strncmp(err, "mut.topo:", 9) == 0, "reason: %s", err);
			sg_gpu_topo_free(t);
		}
		free(copy);
		free(text);
	}
	printf("mutated files: %u of %u still parse\n", parsed, total);
	SG_CHECK(parsed > 0 && parsed < total, "mutations both pass and fail");
}

/* ---- fake sysfs ------------------------------------------------------------ */

static void put(const char *dir, const char *file, const char *val)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "w");
	SG_CHECK(f != NULL, "create %s", path);
	if (f != NULL) {
		fputs(val, f);
		fclose(f);
	}
}

static void mkdirs(const char *path)
{
	char tmp[PATH_MAX];

	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p == '/') {
			*p = '\0';
			mkdir(tmp, 0755);
			*p = '/';
		}
	}
	mkdir(tmp, 0755);
}

/* A PCI device at devices/<rel>; rel ends with its BDF. */
static void fake_dev(const char *root, const char *rel, const char *cls, const char *vendor,
		     const char *numa)
{
	char dir[PATH_MAX], link[PATH_MAX], target[PATH_MAX];
	const char *bdf = strrchr(rel, '/') + 1;

	snprintf(dir, sizeof(dir), "%s/sys/devices/%s", root, rel);
	mkdirs(dir);
	put(dir, "class", cls);
	put(dir, "vendor", vendor);
	if (numa != NULL)
		put(dir, "numa_node", numa);
	snprintf(link, sizeof(link), "%s/sys/bus/pci/devices/%s", root, bdf);
	snprintf(target, sizeof(target), "../../../devices/%s", rel);
	SG_CHECK(symlink(target, link) == 0, "symlink %s", link);
}

static void rm_rf(const char *root)
{
	char cmd[PATH_MAX + 16];

	/* Only ever our own mkdtemp directory. */
	if (strncmp(root, "/tmp/sg-gpu-sysfs.", 18) == 0) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", root);
	}
}

static const char *plan_tool; /* sigma-plan, when meson passes it */

/* sigma-plan on the fake tree: a clean plan, and a dump that parses back. */
static void run_tool(const char *root)
{
	char cmd[PATH_MAX * 2 + 64], out[PATH_MAX + 16], err[256];
	struct sg_gpu_topo *t;
	int rc;

	if (plan_tool == NULL)
		return;
	snprintf(cmd, sizeof(cmd), "'%s' --local --sysfs '%s' --check --json > /dev/null",
		 plan_tool, root);
	rc = system(cmd);
	SG_CHECK(rc == 0, "%s: status %d", cmd, rc);
	snprintf(out, sizeof(out), "%s/dump.topo", root);
	snprintf(cmd, sizeof(cmd), "'%s' --local --sysfs '%s' --dump-topo > '%s'", plan_tool,
		 root, out);
	rc = system(cmd);
	SG_CHECK(rc == 0, "%s: status %d", cmd, rc);
	t = sg_gpu_topo_load(out, err, sizeof(err));
	SG_CHECK(t != NULL && t->ngpus == 3, "dump reloads: %s", t ? "" : err);
	sg_gpu_topo_free(t);
}

static void test_discovery(void)
{
	char root[] = "/tmp/sg-gpu-sysfs.XXXXXX", path[PATH_MAX], err[256] = "";
	const char *sw0 = "pci0000:00/0000:00:01.0/0000:01:00.0";
	struct sg_gpu_topo *t;
	struct sg_gpu_plan *p;
	struct sg_gpu_report rep;
	int n;

	if (mkdtemp(root) == NULL)
		SG_TEST_SKIP_ALL("mkdtemp: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/sys/bus/pci/devices", root);
	mkdirs(path);
	/* Socket 0: a switch with two GPUs and a NIC below it. */
	snprintf(path, sizeof(path), "%s/0000:02:01.0/0000:04:00.0", sw0);
	fake_dev(root, path, "0x030200\n", "0x10de\n", "0\n");
	snprintf(path, sizeof(path), "%s/0000:02:00.0/0000:03:00.0", sw0);
	fake_dev(root, path, "0x030200\n", "0x10de\n", "-1\n");
	snprintf(path, sizeof(path), "%s/0000:02:02.0/0000:05:00.0", sw0);
	fake_dev(root, path, "0x020000\n", "0x15b3\n", "0\n");
	snprintf(path, sizeof(path), "%s/sys/devices/%s/0000:02:02.0/0000:05:00.0/net/eth5", root,
		 sw0);
	mkdirs(path);
	put(path, "speed", "100000\n");
	/* Its SR-IOV virtual function: skipped. */
	snprintf(path, sizeof(path), "%s/0000:02:02.0/0000:05:00.1", sw0);
	fake_dev(root, path, "0x020000\n", "0x15b3\n", "0\n");
	snprintf(path, sizeof(path), "%s/sys/devices/%s/0000:02:02.0/0000:05:00.1/physfn", root,
		 sw0);
	mkdirs(path);
	/* Socket 1: one GPU under another switch. */
	fake_dev(root, "pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:00.0/0000:83:00.0",
		 "0x030000\n", "0x10de\n", "1\n");
	/* Not ours: an Intel VGA, an NVIDIA audio function, a bridge. */
	fake_dev(root, "pci0000:00/0000:00:02.0", "0x030000\n", "0x8086\n", "0\n");
	fake_dev(root, "pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:00.0/0000:83:00.1",
		 "0x040300\n", "0x10de\n", "1\n");
	fake_dev(root, "pci0000:00/0000:00:1f.0", "0x060100\n", "0x8086\n", NULL);

	t = sg_gpu_topo_discover(root, err, sizeof(err));
	SG_CHECK(t != NULL, "discover: %s", err);
	if (t != NULL) {
		SG_CHECK_EQ(t->ngpus, 3);
		SG_CHECK_EQ(t->nnics, 1);
		SG_CHECK(strcmp(t->nodes[t->gpu[0]].pci, "0000:03:00.0") == 0, "gpu0 is %s",
			 t->nodes[t->gpu[0]].pci);
		SG_CHECK(strcmp(t->nodes[t->gpu[2]].pci, "0000:83:00.0") == 0, "gpu2 is %s",
			 t->nodes[t->gpu[2]].pci);
		SG_CHECK(strcmp(t->nodes[t->nic[0]].name, "eth5") == 0, "nic is %s",
			 t->nodes[t->nic[0]].name);
		SG_CHECK_EQ(t->nodes[t->nic[0]].gbps, 100);
		SG_CHECK(sg_gpu_topo_same_switch(t, 0, 1), "gpu0, gpu1 share a switch");
		SG_CHECK(!sg_gpu_topo_same_switch(t, 0, 2), "gpu2 is on the other socket");
		n = sg_gpu_topo_top_switch(t, t->nic[0]);
		SG_CHECK(n >= 0 && strcmp(t->nodes[n].name, "sw-0000:01:00.0") == 0, "NIC switch");
		SG_CHECK_EQ(t->nodes[t->gpu[0]].numa, 0); /* numa_node -1 means node 0 */
		SG_CHECK_EQ(t->nodes[t->gpu[2]].numa, 1);
		SG_CHECK_EQ(count_kind(t, SG_GPU_NODE_SOCKET), 2);
		SG_CHECK_EQ(count_kind(t, SG_GPU_NODE_SWITCH), 2);
		p = sg_gpu_plan_build(t, NULL, err, sizeof(err));
		SG_CHECK(p != NULL, "plan on discovered: %s", err);
		if (p != NULL) {
			SG_CHECK_EQ(sg_gpu_plan_check(t, p, &rep, err, sizeof(err)), 0);
			SG_CHECK_EQ(rep.nviolations, 0);
		}
		sg_gpu_plan_free(p);
		SG_CHECK(sg_gpu_topo_add_cuda_info(t, err, sizeof(err)) == -ENODEV ||
				 t->have_peer_info,
			 "CUDA info: %s", err);
	}
	sg_gpu_topo_free(t);
	run_tool(root);

	/* A device whose sysfs path is not under devices/pciXXXX: a clear error. */
	snprintf(path, sizeof(path), "%s/sys/weird/0000:09:00.0", root);
	mkdirs(path);
	put(path, "class", "0x030200\n");
	put(path, "vendor", "0x10de\n");
	snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/0000:09:00.0", root);
	SG_CHECK(symlink("../../../weird/0000:09:00.0", path) == 0, "symlink");
	t = sg_gpu_topo_discover(root, err, sizeof(err));
	SG_CHECK(t == NULL && strstr(err, "0000:09:00.0") != NULL, "weird path: %s", err);
	sg_gpu_topo_free(t);

	t = sg_gpu_topo_discover("/nonexistent-sysfs", err, sizeof(err));
	SG_CHECK(t == NULL && strstr(err, "/nonexistent-sysfs") != NULL, "missing root: %s", err);
	rm_rf(root);
}

/*
 * A full table: 16 GPUs and 16 NICs (SG_GPU_MAX_GPUS + SG_GPU_MAX_NICS) are
 * discovered, a 33rd device is refused with a reason. Then the PCIe bound of
 * a GPU whose link runs below its maximum, under a slower port.
 */
static void test_discovery_limits(void)
{
	char root[] = "/tmp/sg-gpu-sysfs.XXXXXX", path[PATH_MAX], err[256] = "";
	struct sg_gpu_pcie_link l;
	struct sg_gpu_topo *t;
	int rc;

	if (mkdtemp(root) == NULL)
		SG_TEST_SKIP_ALL("mkdtemp: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/sys/bus/pci/devices", root);
	mkdirs(path);
	for (unsigned i = 0; i < SG_GPU_MAX_GPUS + SG_GPU_MAX_NICS; i++) {
		bool gpu = i < SG_GPU_MAX_GPUS;

		snprintf(path, sizeof(path), "pci0000:00/0000:00:%02x.0/0000:%02x:00.0", i + 1,
			 i + 0x10);
		fake_dev(root, path, gpu ? "0x030200\n" : "0x020000\n", gpu ? "0x10de\n" : "0x8086\n",
			 "0\n");
	}
	t = sg_gpu_topo_discover(root, err, sizeof(err));
	SG_CHECK(t != NULL, "32 devices: %s", err);
	if (t != NULL) {
		SG_CHECK_EQ(t->ngpus, SG_GPU_MAX_GPUS);
		SG_CHECK_EQ(t->nnics, SG_GPU_MAX_NICS);
	}
	sg_gpu_topo_free(t);
	fake_dev(root, "pci0000:00/0000:00:30.0/0000:40:00.0", "0x020000\n", "0x8086\n", "0\n");
	t = sg_gpu_topo_discover(root, err, sizeof(err));
	SG_CHECK(t == NULL && errno == ENOSPC && strstr(err, "more than 32") != NULL,
		 "33 devices: %s", err);
	sg_gpu_topo_free(t);

	/* gpu0 at 0000:10:00.0: idle at 2.5 GT/s, made for 32, under a 16 GT/s x8 port. */
	snprintf(path, sizeof(path), "%s/sys/devices/pci0000:00/0000:00:01.0/0000:10:00.0", root);
	put(path, "current_link_speed", "2.5 GT/s PCIe\n");
	put(path, "current_link_width", "16\n");
	put(path, "max_link_speed", "32.0 GT/s PCIe\n");
	put(path, "max_link_width", "16\n");
	SG_CHECK_EQ(sg_gpu_pcie_link(root, "0000:10:00.0", &l), 0);
	SG_CHECK(l.gts == 32.0 && l.width == 16 && l.cur_gts == 2.5, "no port figures: %g x%u",
		 l.gts, l.width);
	SG_CHECK(l.gbps > 63.0 && l.gbps < 63.1, "gen5 x16: %g GB/s", l.gbps);
	snprintf(path, sizeof(path), "%s/sys/devices/pci0000:00/0000:00:01.0", root);
	put(path, "max_link_speed", "16.0 GT/s PCIe\n");
	put(path, "max_link_width", "8\n");
	SG_CHECK_EQ(sg_gpu_pcie_link(root, "0000:10:00.0", &l), 0);
	SG_CHECK(l.gts == 16.0 && l.width == 8, "port bounds it: %g x%u", l.gts, l.width);
	SG_CHECK(l.gbps > 15.75 && l.gbps < 15.76, "gen4 x8: %g GB/s", l.gbps);
	/* Garbage and missing figures: an error, never a made-up bound. */
	snprintf(path, sizeof(path), "%s/sys/devices/pci0000:00/0000:00:02.0/0000:11:00.0", root);
	put(path, "max_link_speed", "Unknown\n");
	put(path, "max_link_width", "255\n");
	SG_CHECK_EQ(sg_gpu_pcie_link(root, "0000:11:00.0", &l), -ENOENT);
	SG_CHECK_EQ(l.gbps, 0);
	SG_CHECK_EQ(sg_gpu_pcie_link(root, "0000:99:00.0", &l), -ENOENT);
	SG_CHECK_EQ(sg_gpu_pcie_link(root, "../../etc", &l), -EINVAL);
	SG_CHECK_EQ(sg_gpu_pcie_link(root, NULL, &l), -EINVAL);
	rc = sg_gpu_pcie_link(root, "0000:12:00.0", &l); /* a NIC: no link files */
	SG_CHECK_EQ(rc, -ENOENT);
	rm_rf(root);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		topo_dir = argv[1];
	if (argc > 2)
		plan_tool = argv[2];
	test_reference_files();
	test_round_trip();
	test_bad_text();
	test_random_garbage();
	test_mutated_files();
	test_discovery();
	test_discovery_limits();
	return sg_test_finish("gpu_topo");
}
