// SPDX-License-Identifier: BSD-3-Clause
/*
 * net_af_xdp ports: sigmad's own XDP program (sg_dp_xdp.bpf.c, built with
 * clang -target bpf) on the port's interface, docs/sigmad.md "AF_XDP".
 *
 * - Before EAL probes the vdevs, each net_af_xdp vdev without xdp_prog= gets
 *   xdp_prog=<sigma_xdp.o>, and a sigma_xdp program that a dead sigmad left on
 *   the interface (after SIGKILL) is detached: the PMD attaches with
 *   XDP_FLAGS_UPDATE_IF_NOEXIST and would otherwise be refused.
 * - Once a port has started, the program's sigma_cfg map gets the address and
 *   UDP ports to steer, and this process's pid (which tells a live owner from
 *   a stale one).
 * - After EAL's clean-up, a sigma_xdp program of ours still attached (the PMD
 *   detaches it when the port closes) is detached.
 * Nothing here runs on the data path.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_ethdev.h>
#include <rte_kvargs.h>

#include "sg_dp_lcore.h"
#include "sg_dp_xdp.h"
#include "sg_dp_xdp_cfg.h"

#ifndef AF_XDP
#define AF_XDP 44
#endif

#define XDP_MAX_IFACES 16

static char xdp_ifaces[XDP_MAX_IFACES][IF_NAMESIZE];
static unsigned int xdp_n_ifaces;
static char **xdp_argv;
static char *xdp_args_made[XDP_MAX_IFACES];
static unsigned int xdp_n_made;

/* The program file: $SIGMA_XDP_PROG, the build tree's for a program run from
 * the build tree, else the installed one. */
static const char *xdp_prog_path(void)
{
	static char exe[PATH_MAX];
	const char *env = getenv("SIGMA_XDP_PROG");
	ssize_t n;

	if (env != NULL && env[0] != '\0')
		return env;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		if (!strncmp(exe, SG_DP_XDP_BUILD_ROOT "/", strlen(SG_DP_XDP_BUILD_ROOT) + 1) &&
		    access(SG_DP_XDP_PROG_BUILD, R_OK) == 0)
			return SG_DP_XDP_PROG_BUILD;
	}
	return SG_DP_XDP_PROG_INSTALL;
}

/* iface= of a net_af_xdp devargs string ("net_af_xdp0,iface=X,..."), into @p out. */
static bool devargs_iface(const char *args, char *out)
{
	const char *s = strstr(args, "iface=");
	size_t n;

	if (s == NULL || (s != args && s[-1] != ','))
		return false;
	s += strlen("iface=");
	n = strcspn(s, ",");
	if (n == 0 || n >= IF_NAMESIZE)
		return false;
	memcpy(out, s, n);
	out[n] = '\0';
	return true;
}

/* The id of the XDP program on @p ifindex (0: none), and its name in @p name. */
static uint32_t attached_prog(int ifindex, char *name, size_t namelen, int *fd_out)
{
	struct bpf_prog_info info;
	uint32_t id = 0, len = sizeof(info);
	int fd;

	name[0] = '\0';
	*fd_out = -1;
	if (bpf_xdp_query_id(ifindex, 0, &id) != 0 || id == 0)
		return 0;
	fd = bpf_prog_get_fd_by_id(id);
	if (fd < 0)
		return id;
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0)
		snprintf(name, namelen, "%s", info.name);
	*fd_out = fd;
	return id;
}

/* The fd of the sigma_cfg map of program @p prog_fd, or -1. */
static int cfg_map_fd(int prog_fd)
{
	struct bpf_prog_info info;
	uint32_t ids[16], len = sizeof(info);
	int fd = -1;

	memset(&info, 0, sizeof(info));
	info.nr_map_ids = RTE_DIM(ids);
	info.map_ids = (uint64_t)(uintptr_t)ids;
	if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0)
		return -1;
	for (uint32_t i = 0; i < info.nr_map_ids && i < RTE_DIM(ids) && fd < 0; i++) {
		struct bpf_map_info mi;
		uint32_t mlen = sizeof(mi);
		int mfd = bpf_map_get_fd_by_id(ids[i]);

		if (mfd < 0)
			continue;
		memset(&mi, 0, sizeof(mi));
		if (bpf_obj_get_info_by_fd(mfd, &mi, &mlen) == 0 &&
		    !strcmp(mi.name, SG_DP_XDP_CFG_MAP) &&
		    mi.value_size == sizeof(struct sg_dp_xdp_cfg))
			fd = mfd;
		else
			close(mfd);
	}
	return fd;
}

/* The pid recorded in a sigma_xdp program's map (0: none yet). */
static uint32_t prog_owner(int prog_fd)
{
	struct sg_dp_xdp_cfg cfg = {0};
	uint32_t zero = 0;
	int mfd = cfg_map_fd(prog_fd);

	if (mfd < 0)
		return 0;
	if (bpf_map_lookup_elem(mfd, &zero, &cfg) != 0)
		cfg.pid = 0;
	close(mfd);
	return cfg.pid;
}

/* A SIGKILLed owner can stay a zombie a while (its parent was killed with it). */
static bool pid_alive(uint32_t pid)
{
	char path[64], st[256], *p;
	FILE *f;
	size_t n;

	if (pid == 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	f = fopen(path, "r");
	if (f == NULL)
		return false;
	n = fread(st, 1, sizeof(st) - 1, f);
	fclose(f);
	st[n] = '\0';
	p = strrchr(st, ')');
	return p != NULL && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

/*
 * Detach a sigma_xdp program from @p iface when its owner (a sigmad, a worker) is gone (or when
 * @p ours and it is this process's). A foreign program is left alone: the
 * PMD's attach then fails and sg_dp_xdp_explain() names it.
 */
static void detach_sigma_prog(const char *iface, bool ours)
{
	int ifindex = (int)if_nametoindex(iface), fd;
	char name[BPF_OBJ_NAME_LEN];
	uint32_t id, owner;

	if (ifindex == 0)
		return;
	id = attached_prog(ifindex, name, sizeof(name), &fd);
	if (id == 0 || strcmp(name, SG_DP_XDP_PROG_NAME) != 0) {
		if (fd >= 0)
			close(fd);
		return;
	}
	owner = prog_owner(fd);
	close(fd);
	if (ours ? owner != (uint32_t)getpid() && owner != 0
		 : pid_alive(owner) && owner != (uint32_t)getpid())
		return;
	if (bpf_xdp_detach(ifindex, 0, NULL) != 0)
		SG_DP_LOG(WARNING, "%s: cannot detach XDP program %u (%s): remove it with "
			  "ip link set dev %s xdp off", iface, id, strerror(errno), iface);
	else if (!ours)
		SG_DP_LOG(NOTICE, "%s: removed the XDP program (id %u) that pid %u, now gone, left "
			  "there", iface, id, owner);
}

int sg_dp_xdp_eal_args(int argc, char **argv, char ***out)
{
	const char *prog = xdp_prog_path();
	char **nv = calloc((size_t)argc + 1, sizeof(*nv));

	if (nv == NULL)
		return -ENOMEM;
	for (int i = 0; i < argc; i++) {
		char *a = argv[i], *args = NULL;

		nv[i] = a;
		if (!strncmp(a, "--vdev=", 7))
			args = a + 7;
		else if (i > 0 && !strcmp(argv[i - 1], "--vdev"))
			args = a;
		if (args == NULL || strncmp(args, "net_af_xdp", 10) != 0)
			continue;
		if (xdp_n_ifaces < XDP_MAX_IFACES &&
		    devargs_iface(args, xdp_ifaces[xdp_n_ifaces])) {
			detach_sigma_prog(xdp_ifaces[xdp_n_ifaces], false);
			xdp_n_ifaces++;
		}
		if (strstr(args, "xdp_prog=") != NULL)
			continue;
		if (access(prog, R_OK) != 0) {
			SG_DP_LOG(WARNING, "%s: no XDP program at %s (%s): the PMD's default one "
				  "takes every packet of the queue, so the kernel sees no ARP or "
				  "other traffic there (set SIGMA_XDP_PROG, or give the vdev "
				  "xdp_prog=)", args, prog, strerror(errno));
			continue;
		}
		if (xdp_n_made == XDP_MAX_IFACES ||
		    asprintf(&xdp_args_made[xdp_n_made], "%s,xdp_prog=%s", a, prog) < 0) {
			free(nv);
			return -ENOMEM;
		}
		nv[i] = xdp_args_made[xdp_n_made++];
	}
	free(xdp_argv);
	xdp_argv = nv;
	*out = nv;
	return argc;
}

/* iface= of @p port's devargs when it is a net_af_xdp port. */
static bool port_iface(uint16_t port, char *iface)
{
	struct rte_eth_dev_info info;
	const struct rte_devargs *da;

	if (rte_eth_dev_info_get(port, &info) < 0 || strcmp(info.driver_name, "net_af_xdp"))
		return false;
	da = rte_dev_devargs(info.device);
	return da != NULL && da->args != NULL && devargs_iface(da->args, iface);
}

bool sg_dp_xdp_port(uint16_t port)
{
	char iface[IF_NAMESIZE];

	return port_iface(port, iface);
}

int sg_dp_xdp_iface_steer(const char *iface, uint32_t ip_be, uint16_t udp_port, uint16_t nports,
			  uint32_t flags, char *err, size_t errlen)
{
	struct sg_dp_xdp_cfg cfg = {.ip = ip_be, .port = rte_cpu_to_be_16(udp_port),
				    .nports = nports, .pid = (uint32_t)getpid(), .flags = flags};
	char name[BPF_OBJ_NAME_LEN];
	int ifindex = (int)if_nametoindex(iface), fd, mfd, rc = 0;
	uint32_t zero = 0, id;

	if (ifindex == 0) {
		sg_dp_seterr(err, errlen, "no interface %s in this network namespace", iface);
		return -ENODEV;
	}
	id = attached_prog(ifindex, name, sizeof(name), &fd);
	if (id == 0) {
		sg_dp_seterr(err, errlen, "%s: no XDP program is attached", iface);
		return -ENOENT;
	}
	mfd = fd >= 0 ? cfg_map_fd(fd) : -1;
	if (fd >= 0)
		close(fd);
	if (mfd < 0) {
		sg_dp_seterr(err, errlen, "%s: XDP program %u (%s) is not sigma_xdp", iface, id,
			     name);
		return -EPERM;
	}
	if (bpf_map_update_elem(mfd, &zero, &cfg, BPF_ANY) != 0) {
		rc = -errno;
		sg_dp_seterr(err, errlen, "%s: cannot configure XDP program %u: %s", iface, id,
			     strerror(errno));
	}
	close(mfd);
	return rc;
}

int sg_dp_xdp_port_started(uint16_t port, uint32_t ip_be, uint16_t udp_port, uint16_t nports,
			   char *err, size_t errlen)
{
	char iface[IF_NAMESIZE], why[256] = "", name[BPF_OBJ_NAME_LEN];
	uint32_t id;
	int rc, fd;

	if (!port_iface(port, iface))
		return 0;
	rc = sg_dp_xdp_iface_steer(iface, ip_be, udp_port, nports, 0, why, sizeof(why));
	if (rc == -EPERM) {
		/* the vdev's own xdp_prog=: whatever it steers is what sigmad gets */
		SG_DP_LOG(NOTICE, "port %u (net_af_xdp): %s: it decides what reaches sigmad", port,
			  why);
		return 0;
	}
	if (rc < 0) {
		sg_dp_seterr(err, errlen, "port %u (net_af_xdp): %s%s", port, why,
			     rc == -ENOENT ? " after the port started" : "");
		return rc;
	}
	id = attached_prog((int)if_nametoindex(iface), name, sizeof(name), &fd);
	if (fd >= 0)
		close(fd);
	SG_DP_LOG(INFO, "port %u (net_af_xdp on %s): XDP program %u steers UDP %u..%u to AF_XDP "
		  "sockets, everything else to the kernel", port, iface, id, udp_port,
		  udp_port + nports - 1);
	return 0;
}

/* CAP_IPC_LOCK (bit 14) in this process's effective set: no memlock limit then */
static bool cap_ipc_lock(void)
{
	char line[128];
	unsigned long long eff = 0;
	FILE *f = fopen("/proc/self/status", "r");

	while (f != NULL && fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	if (f != NULL)
		fclose(f);
	return (eff >> 14) & 1;
}

void sg_dp_xdp_explain(uint16_t port, uint32_t mtu, int rc, char *err, size_t errlen)
{
	char iface[IF_NAMESIZE], name[BPF_OBJ_NAME_LEN];
	struct rlimit rl;
	uint32_t id;
	int fd, s, ifindex;

	if (!port_iface(port, iface))
		return;
	s = socket(AF_XDP, SOCK_RAW, 0);
	if (s < 0) {
		sg_dp_seterr(err, errlen, "port %u (net_af_xdp on %s): the kernel refuses an AF_XDP "
			     "socket (%s): %s", port, iface, strerror(errno),
			     errno == EAFNOSUPPORT ? "it needs CONFIG_XDP_SOCKETS=y" :
			     "run sigmad as root, or give it CAP_NET_RAW, CAP_BPF and CAP_NET_ADMIN");
		return;
	}
	close(s);
	ifindex = (int)if_nametoindex(iface);
	if (ifindex == 0) {
		sg_dp_seterr(err, errlen, "port %u (net_af_xdp): no interface %s in this network "
			     "namespace", port, iface);
		return;
	}
	id = attached_prog(ifindex, name, sizeof(name), &fd);
	if (id != 0 && strcmp(name, SG_DP_XDP_PROG_NAME) != 0) {
		LIBBPF_OPTS(bpf_xdp_query_opts, q);
		bool generic = bpf_xdp_query(ifindex, 0, &q) == 0 &&
			       q.attach_mode == XDP_ATTACHED_SKB;

		sg_dp_seterr(err, errlen, "port %u (net_af_xdp on %s): XDP program %u (%s) is "
			     "already attached there and the PMD does not replace it: remove it "
			     "with ip link set dev %s %s off", port, iface, id, name, iface,
			     generic ? "xdpgeneric" : "xdp");
	} else if (id != 0 && fd >= 0 && pid_alive(prog_owner(fd)) &&
		   prog_owner(fd) != (uint32_t)getpid()) {
		sg_dp_seterr(err, errlen, "port %u (net_af_xdp on %s): pid %u (a sigmad or a "
			     "worker) serves this interface with sigma_xdp: one per interface", port,
			     iface, prog_owner(fd));
	} else if (mtu + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN + sizeof(struct rte_mbuf) +
		   SG_DP_MBUF_PRIV_SIZE + RTE_PKTMBUF_HEADROOM + SG_DP_XDP_HEADROOM +
		   64 /* the mempool's object header */ > (uint32_t)getpagesize()) {
		sg_dp_seterr(err, errlen, "port %u (net_af_xdp on %s): [net] mtu = %u does not fit "
			     "an AF_XDP frame (one %d-byte page with its headroom): lower [net] "
			     "mtu to 3000 or less, and the interface's MTU with it", port, iface,
			     mtu, getpagesize());
	} else if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
		   rl.rlim_cur < (1ull << 30) && !cap_ipc_lock()) {
		/* the kernel charges the UMEM's pages to the limit (the PMD says only
		 * "Failed to create umem") */
		sg_dp_seterr(err, errlen, "port %u (net_af_xdp on %s): the AF_XDP memory (UMEM) "
			     "could not be locked: the memlock limit is %llu KiB; raise it "
			     "(ulimit -l unlimited, or LimitMEMLOCK=infinity in the systemd unit) "
			     "or give sigmad CAP_IPC_LOCK", port, iface, (unsigned long long)rl.rlim_cur >> 10);
	} else {
		sg_dp_seterr(err, errlen, "port %u (net_af_xdp on %s): set-up failed: %s (see the "
			     "af_xdp PMD's messages above; the XDP program is %s)", port, iface,
			     rte_strerror(-rc), xdp_prog_path());
	}
	if (fd >= 0)
		close(fd);
}

void sg_dp_xdp_cleanup(void)
{
	for (unsigned int i = 0; i < xdp_n_ifaces; i++)
		detach_sigma_prog(xdp_ifaces[i], true);
	xdp_n_ifaces = 0;
	for (unsigned int i = 0; i < xdp_n_made; i++)
		free(xdp_args_made[i]);
	xdp_n_made = 0;
	free(xdp_argv);
	xdp_argv = NULL;
}

/*
 * --idle sleep on net_af_xdp ports: an idle lcore blocks in epoll on the AF_XDP
 * sockets of the queues it polls (readable once a frame is in the RX ring)
 * and on an eventfd for hand-offs, control calls and the stop, instead of
 * napping. DPDK does not give the sockets out: each is the AF_XDP socket that
 * appeared while its queue was set up (sg_dp_xdp_queue_set_up()).
 */
#define XDP_WAIT_US 10000 /* the longest block: the engine's timers, as sockets */
#define XDP_MAX_XSK 64

struct xdp_xsk {
	uint16_t port, queue;
	int fd;
};

struct xdp_wait {
	int ep, evfd;
	int sleeping; /* atomic: in sg_dp_xdp_idle_wait(), a waker writes evfd */
	bool ok;
	unsigned int n_tx;
	int tx[SG_DP_MAX_PORTS]; /* the sockets of its TX queues */
};

static struct xdp_xsk xdp_xsks[XDP_MAX_XSK];
static unsigned int xdp_n_xsks;
static struct xdp_wait xdp_waits[SG_DP_MAX_LAYOUT];

static bool xsk_known(int fd)
{
	for (unsigned int i = 0; i < xdp_n_xsks; i++)
		if (xdp_xsks[i].fd == fd)
			return true;
	return false;
}

void sg_dp_xdp_queue_set_up(uint16_t port, uint16_t queue)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL && xdp_n_xsks < XDP_MAX_XSK) {
		int fd = atoi(e->d_name), dom = 0;
		socklen_t len = sizeof(dom);

		if (fd <= 2 || fd == dirfd(d) || xsk_known(fd) ||
		    getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &len) != 0 || dom != AF_XDP)
			continue;
		xdp_xsks[xdp_n_xsks++] = (struct xdp_xsk){.port = port, .queue = queue, .fd = fd};
		break;
	}
	closedir(d);
}

static int xsk_fd(uint16_t port, uint16_t queue)
{
	for (unsigned int i = 0; i < xdp_n_xsks; i++)
		if (xdp_xsks[i].port == port && xdp_xsks[i].queue == queue)
			return xdp_xsks[i].fd;
	return -1;
}

static bool add_fd(int ep, int fd, uint32_t tag)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = tag};

	return fd >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0;
}

void sg_dp_xdp_wait_setup(struct sg_dp_pipeline *p)
{
	for (unsigned int i = 0; i < p->n_lc && i < SG_DP_MAX_LAYOUT; i++) {
		struct sg_dp_lcore *lc = &p->lc[i];
		struct xdp_wait *w = &xdp_waits[i];
		bool ok = true;

		*w = (struct xdp_wait){.ep = epoll_create1(EPOLL_CLOEXEC),
				       .evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
		ok = w->ep >= 0 && add_fd(w->ep, w->evfd, UINT32_MAX);
		/* every queue it polls must be an AF_XDP socket's, or it would miss input */
		if (lc->role & SG_ROLE_IO) {
			ok = ok && sg_dp_xdp_port(lc->rx_port) &&
			     add_fd(w->ep, xsk_fd(lc->rx_port, lc->rx_queue), 0);
			for (uint16_t x = 0; x < lc->n_xq && ok; x++)
				ok = sg_dp_xdp_port(lc->xq_port[x]) &&
				     add_fd(w->ep, xsk_fd(lc->xq_port[x], lc->xq[x]), 0);
		}
		for (uint16_t port = 0; port < SG_DP_MAX_PORTS; port++) {
			int fd = sg_dp_xdp_port(port) ? xsk_fd(port, (uint16_t)i) : -1;

			ok = ok && !p->port_steer[port];
			if (fd >= 0)
				w->tx[w->n_tx++] = fd;
		}
		w->ok = ok && (lc->role & SG_ROLE_IO);
		if (w->ok)
			SG_DP_LOG(INFO, "lcore %u: idle, it blocks on its AF_XDP sockets",
				  lc->lcore_id);
	}
}

bool sg_dp_xdp_idle_wait(struct sg_dp_lcore *lc, unsigned int us)
{
	struct xdp_wait *w = lc->idx < SG_DP_MAX_LAYOUT ? &xdp_waits[lc->idx] : NULL;

	if (w == NULL || !w->ok)
		return false;
	/*
	 * In copy mode the kernel sends an AF_XDP socket's TX ring only when told,
	 * at most 32 frames a time (EAGAIN: more are left): what the PMD queued
	 * last must leave before we block, or it would wait for the next wake.
	 */
	for (unsigned int t = 0; t < w->n_tx; t++)
		for (int k = 0; k < 64; k++)
			if (sendto(w->tx[t], NULL, 0, MSG_DONTWAIT, NULL, 0) >= 0 ||
			    (errno != EAGAIN && errno != EBUSY && errno != ENOBUFS))
				break;
	sg_dp_idle_block(lc, &w->sleeping, w->ep, w->evfd, RTE_MAX(us, (unsigned int)XDP_WAIT_US));
	return true;
}

void sg_dp_xdp_wake(struct sg_dp_lcore *lc)
{
	struct xdp_wait *w = lc->idx < SG_DP_MAX_LAYOUT ? &xdp_waits[lc->idx] : NULL;

	if (w != NULL && w->ok)
		sg_dp_idle_wake(&w->sleeping, w->evfd);
}

void sg_dp_xdp_wait_teardown(void)
{
	for (unsigned int i = 0; i < SG_DP_MAX_LAYOUT; i++) {
		struct xdp_wait *w = &xdp_waits[i];

		if (w->ep > 0)
			close(w->ep);
		if (w->evfd > 0)
			close(w->evfd);
		*w = (struct xdp_wait){.ep = -1, .evfd = -1};
	}
	xdp_n_xsks = 0;
}
