/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Topology discovery from sysfs. Each PCI device's sysfs directory sits under
 * its parent bridges (devices/pci0000:00/<root port>/<switch up>/<switch
 * down>/<device>), so the path alone gives the root port and the switches.
 * The root of the tree is a parameter so that tests can build a fake one.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sg_gpu_internal.h"
#include "sg_parse.h"

#define PCI_VENDOR_NVIDIA 0x10de
#define MAX_DEVS (SG_GPU_MAX_GPUS + SG_GPU_MAX_NICS)
#define MAX_HOPS 16

struct pci_dev {
	char bdf[16];
	char ifname[SG_GPU_NAME_LEN];
	bool gpu;
	int numa;
	unsigned gbps;
	unsigned nbridges;
	char bridges[MAX_HOPS][16]; /* root port first */
};

static bool is_bdf(const char *s)
{
	unsigned d, b, dev, f;
	char tail;

	return strlen(s) == 12 && sscanf(s, "%4x:%2x:%2x.%1x%c", &d, &b, &dev, &f, &tail) == 4;
}

/* Read a small text file holding one number (hex with 0x, or decimal). */
static int read_num(const char *dir, const char *file, long *out)
{
	char path[PATH_MAX], buf[64];
	int64_t v;
	FILE *f;
	size_t n;

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	f = fopen(path, "r");
	if (f == NULL)
		return -errno;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	/* sysfs ends its values with a newline */
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		n--;
	buf[n] = '\0';
	/* "-1" (numa_node), "0x10de" (vendor), "100000" (speed) */
	if (buf[0] == '-') {
		if (sg_parse_i64(buf, LONG_MIN, LONG_MAX, &v) != 0)
			return -EINVAL;
	} else {
		uint64_t u;

		if (sg_parse_u64x(buf, 0, LONG_MAX, &u) != 0)
			return -EINVAL;
		v = (int64_t)u;
	}
	*out = (long)v;
	return 0;
}

/* First entry name of a subdirectory (net/<ifname>, infiniband/<dev>). */
static void first_entry(const char *dir, const char *sub, char *out, size_t len)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;

	if (snprintf(path, sizeof(path), "%s/%s", dir, sub) >= (int)sizeof(path))
		return;
	d = opendir(path);
	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' || strlen(de->d_name) >= len)
			continue;
		snprintf(out, len, "%s", de->d_name);
		break;
	}
	closedir(d);
}

/* Fill the bridge list from the resolved sysfs path of the device. */
static int parse_path(struct pci_dev *pd, const char *real)
{
	const char *p = strstr(real, "/devices/pci");
	char comp[NAME_MAX + 1];

	if (p == NULL)
		return -EINVAL;
	p = strchr(p + strlen("/devices/"), '/'); /* skip the host bridge "pci0000:00" */
	pd->nbridges = 0;
	while (p != NULL && *p == '/') {
		const char *next = strchr(p + 1, '/');
		size_t len = next ? (size_t)(next - p - 1) : strlen(p + 1);

		if (len >= sizeof(comp))
			return -EINVAL;
		memcpy(comp, p + 1, len);
		comp[len] = '\0';
		p = next;
		if (!is_bdf(comp))
			return -EINVAL;
		if (strcmp(comp, pd->bdf) == 0)
			return p == NULL ? 0 : -EINVAL;
		if (pd->nbridges == MAX_HOPS)
			return -E2BIG;
		snprintf(pd->bridges[pd->nbridges++], 16, "%s", comp);
	}
	return -EINVAL;
}

static int cmp_dev(const void *a, const void *b)
{
	const struct pci_dev *x = a, *y = b;

	if (x->gpu != y->gpu)
		return x->gpu ? -1 : 1; /* GPUs first, so GPU i is the i-th by address */
	return strcmp(x->bdf, y->bdf);
}

/* Find or add a node by name. */
static int get_node(struct sg_gpu_topo *t, enum sg_gpu_node_kind kind, const char *name,
		    int parent, char *err, size_t errlen)
{
	int n = sg_gpu_topo_find(t, name);

	if (n >= 0)
		return n;
	return sg_gpu_topo_add_node(t, kind, name, parent, err, errlen);
}

static int add_dev(struct sg_gpu_topo *t, const struct pci_dev *pd, char *err, size_t errlen)
{
	char name[SG_GPU_NAME_LEN];
	int parent, n;

	snprintf(name, sizeof(name), "cpu%d", pd->numa);
	parent = get_node(t, SG_GPU_NODE_SOCKET, name, -1, err, errlen);
	if (parent < 0)
		return parent;
	t->nodes[parent].numa = pd->numa;
	/*
	 * A device straight on the root complex has no root port bridge; give it
	 * a virtual one per socket so that the tree keeps its shape.
	 */
	if (pd->nbridges == 0)
		snprintf(name, sizeof(name), "rp-cpu%d", pd->numa);
	else
		snprintf(name, sizeof(name), "rp-%s", pd->bridges[0]);
	parent = get_node(t, SG_GPU_NODE_ROOT, name, parent, err, errlen);
	/* Below the root port, bridges come in (upstream, downstream) pairs per switch. */
	for (unsigned i = 1; parent >= 0 && i < pd->nbridges; i += 2) {
		snprintf(name, sizeof(name), "sw-%s", pd->bridges[i]);
		parent = get_node(t, SG_GPU_NODE_SWITCH, name, parent, err, errlen);
	}
	if (parent < 0)
		return parent;
	if (pd->gpu)
		snprintf(name, sizeof(name), "gpu%u", t->ngpus);
	else if (pd->ifname[0] != '\0' && sg_gpu_topo_find(t, pd->ifname) < 0)
		snprintf(name, sizeof(name), "%s", pd->ifname);
	else
		snprintf(name, sizeof(name), "nic-%s", pd->bdf);
	n = sg_gpu_topo_add_node(t, pd->gpu ? SG_GPU_NODE_GPU : SG_GPU_NODE_NIC, name, parent,
				 err, errlen);
	if (n < 0)
		return n;
	snprintf(t->nodes[n].pci, sizeof(t->nodes[n].pci), "%s", pd->bdf);
	t->nodes[n].gbps = pd->gbps;
	return 0;
}

/* Classify one sysfs device; 1 if it is a GPU or NIC we keep. */
static int probe_dev(const char *devdir, const char *bdf, struct pci_dev *pd)
{
	char real[PATH_MAX], netdir[PATH_MAX];
	long cls, vendor, numa = 0, speed;
	unsigned base;

	if (read_num(devdir, "class", &cls) < 0 || read_num(devdir, "vendor", &vendor) < 0)
		return 0; /* not a device we can classify: ignore it */
	if (snprintf(real, sizeof(real), "%s/physfn", devdir) >= (int)sizeof(real) ||
	    access(real, F_OK) == 0)
		return 0; /* an SR-IOV virtual function shares its parent's place */
	base = (unsigned)(cls >> 8) & 0xffff;
	memset(pd, 0, sizeof(*pd));
	if ((base == 0x0302 || base == 0x0300) && vendor == PCI_VENDOR_NVIDIA)
		pd->gpu = true;
	else if (base != 0x0200 && base != 0x0207)
		return 0;
	snprintf(pd->bdf, sizeof(pd->bdf), "%s", bdf);
	if (read_num(devdir, "numa_node", &numa) < 0 || numa < 0 || numa > 1023)
		numa = 0; /* -1 (no NUMA information) means a single node */
	pd->numa = (int)numa;
	if (!pd->gpu) {
		first_entry(devdir, "net", pd->ifname, sizeof(pd->ifname));
		if (pd->ifname[0] != '\0') {
			if (snprintf(netdir, sizeof(netdir), "%s/net/%s", devdir, pd->ifname) <
				    (int)sizeof(netdir) &&
			    read_num(netdir, "speed", &speed) == 0 && speed > 0)
				pd->gbps = (unsigned)(speed / 1000);
		} else {
			first_entry(devdir, "infiniband", pd->ifname, sizeof(pd->ifname));
		}
	}
	if (realpath(devdir, real) == NULL || parse_path(pd, real) < 0)
		return -EINVAL;
	return 1;
}

struct sg_gpu_topo *sg_gpu_topo_discover(const char *sysfs_root, char *err, size_t errlen)
{
	char dir[PATH_MAX], devdir[PATH_MAX];
	struct pci_dev *devs, one;
	struct sg_gpu_topo *t;
	struct dirent *de;
	unsigned ndev = 0;
	DIR *d;
	int rc = 0;

	if (sysfs_root == NULL || sysfs_root[0] == '\0')
		sysfs_root = "/";
	snprintf(dir, sizeof(dir), "%s/sys/bus/pci/devices", sysfs_root);
	d = opendir(dir);
	if (d == NULL) {
		rc = errno;
		sg_err(err, errlen, -rc, "%s: %s", dir, strerror(rc));
		errno = rc;
		return NULL;
	}
	devs = calloc(MAX_DEVS, sizeof(*devs));
	t = sg_gpu_topo_new();
	if (devs == NULL || t == NULL) {
		closedir(d);
		free(devs);
		sg_gpu_topo_free(t);
		errno = ENOMEM;
		return NULL;
	}
	snprintf(t->name, sizeof(t->name), "local");
	while ((de = readdir(d)) != NULL) {
		if (!is_bdf(de->d_name))
			continue;
		if (snprintf(devdir, sizeof(devdir), "%s/%s", dir, de->d_name) >= (int)sizeof(devdir))
			continue;
		rc = probe_dev(devdir, de->d_name, &one);
		if (rc < 0) {
			sg_err(err, errlen, -EINVAL,
				   "%s: cannot place it under a root port (bad sysfs path)", devdir);
			break;
		}
		/* The table is full only when a device beyond the last one shows up. */
		if (rc == 1 && ndev == MAX_DEVS) {
			rc = sg_err(err, errlen, -ENOSPC, "more than %d GPUs and NICs", MAX_DEVS);
			break;
		}
		if (rc == 1)
			devs[ndev++] = one;
		rc = 0;
	}
	closedir(d);
	qsort(devs, ndev, sizeof(*devs), cmp_dev);
	for (unsigned i = 0; rc == 0 && i < ndev; i++)
		rc = add_dev(t, &devs[i], err, errlen);
	free(devs);
	if (rc < 0) {
		sg_gpu_topo_free(t);
		errno = -rc;
		return NULL;
	}
	return t;
}

/* "16.0 GT/s PCIe" -> 16.0; "Unknown" -> 0. */
static double read_gts(const char *dir, const char *file)
{
	char path[PATH_MAX];
	double v = 0;
	FILE *f;

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return 0;
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	if (fscanf(f, "%lf", &v) != 1 || v < 0 || v > 1000)
		v = 0;
	fclose(f);
	return v;
}

static unsigned read_width(const char *dir, const char *file)
{
	long v = 0;

	return read_num(dir, file, &v) == 0 && v > 0 && v <= 32 ? (unsigned)v : 0;
}

/* The smaller of two figures, ignoring unknown (0) ones. */
static double min_known(double a, double b)
{
	return a <= 0 ? b : b <= 0 ? a : a < b ? a : b;
}

int sg_gpu_pcie_link(const char *sysfs_root, const char *bdf, struct sg_gpu_pcie_link *l)
{
	char dir[PATH_MAX], real[PATH_MAX], *slash;
	double enc;

	memset(l, 0, sizeof(*l));
	if (sysfs_root == NULL || sysfs_root[0] == '\0')
		sysfs_root = "/";
	if (bdf == NULL || !is_bdf(bdf) ||
	    snprintf(dir, sizeof(dir), "%s/sys/bus/pci/devices/%s", sysfs_root, bdf) >=
		    (int)sizeof(dir))
		return -EINVAL;
	if (realpath(dir, real) == NULL)
		return -errno;
	l->cur_gts = read_gts(real, "current_link_speed");
	l->cur_width = read_width(real, "current_link_width");
	l->max_gts = read_gts(real, "max_link_speed");
	l->max_width = read_width(real, "max_link_width");
	/* The port above (the parent directory) may be slower than the device. */
	slash = strrchr(real, '/');
	if (slash != NULL && slash != real) {
		*slash = '\0';
		if (is_bdf(strrchr(real, '/') + 1)) {
			l->max_gts = min_known(l->max_gts, read_gts(real, "max_link_speed"));
			l->max_width = (unsigned)min_known(l->max_width,
							   read_width(real, "max_link_width"));
		}
	}
	/*
	 * GPUs drop their link to a low speed when idle, so the current speed
	 * read before a transfer understates the bound: use the trained
	 * maximum of both ends, or the current figures when that is unknown.
	 */
	l->gts = l->max_gts > 0 ? l->max_gts : l->cur_gts;
	l->width = l->max_width > 0 ? l->max_width : l->cur_width;
	if (l->gts <= 0 || l->width == 0)
		return -ENOENT;
	enc = l->gts < 8 ? 8.0 / 10.0 : l->gts < 64 ? 128.0 / 130.0 : 242.0 / 256.0;
	l->gbps = l->gts * l->width * enc / 8.0;
	return 0;
}
