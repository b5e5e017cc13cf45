/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libsigma over kernel UDP inside a network namespace this test creates
 * (unshare(CLONE_NEWNET) in a child, loopback brought up there): two workers
 * and one node sum a multi-partition tensor for a few rounds, checked
 * against a reference. Skips, with the reason, where namespaces are refused.
 */
#include <net/if.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client_util.h"

static int lo_up(void)
{
	struct ifreq ifr = {0};
	int fd = socket(AF_INET, SOCK_DGRAM, 0), rc;

	if (fd < 0)
		return -errno;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	rc = ioctl(fd, SIOCGIFFLAGS, &ifr);
	if (rc == 0) {
		ifr.ifr_flags |= IFF_UP;
		rc = ioctl(fd, SIOCSIFFLAGS, &ifr);
	}
	close(fd);
	return rc < 0 ? -errno : 0;
}

static int child(void)
{
	enum { NE = 300000, ROUNDS = 3 };
	struct sigma_udpd_conf dc = {0};
	struct sigma_conf c = {.job = 21, .token = 0x5eed, .chunk_bytes = 8920};
	struct cu_group g = {0};
	struct sigma_tensor *t[2];
	int32_t *in[2], *out[2];
	size_t bad = 0;

	SG_CHECK_EQ(cu_nodes(&g, 1, &dc), 0);
	SG_CHECK_EQ(cu_sessions(&g, 2, &c), 0);
	for (unsigned int r = 0; r < 2; r++) {
		t[r] = sigma_tensor_register(g.s[r], "ns", 4, SG_DTYPE_INT32, NE, 0);
		in[r] = malloc(NE * 4);
		out[r] = malloc(NE * 4);
	}
	SG_CHECK_EQ(cu_start(&g, NULL), 0);
	for (int k = 0; k < ROUNDS; k++) {
		for (unsigned int r = 0; r < 2; r++) {
			for (size_t i = 0; i < NE; i++)
				in[r][i] = (int32_t)(i * (r + 1) + (size_t)k);
			SG_CHECK_EQ(sigma_push_pull(t[r], in[r], out[r], NULL, NULL), 0);
		}
		cu_drive(&g, t, 2);
		for (unsigned int r = 0; r < 2; r++) {
			SG_CHECK(sigma_test(t[r]) == 0, "%s", sigma_last_error(g.s[r]));
			for (size_t i = 0; i < NE; i++)
				bad += (uint32_t)out[r][i] != (uint32_t)(3 * i + 2 * (size_t)k);
		}
	}
	SG_CHECK(bad == 0, "%zu elements differ", bad);
	for (unsigned int r = 0; r < 2; r++) {
		free(in[r]);
		free(out[r]);
	}
	cu_free(&g);
	return sg_test_finish("client_netns");
}

int main(void)
{
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		if (unshare(CLONE_NEWNET) < 0) {
			printf("SKIP: unshare(CLONE_NEWNET): %s\n", strerror(errno));
			_exit(SG_TEST_SKIP);
		}
		if (lo_up() < 0) {
			printf("SKIP: cannot bring up lo in the new namespace\n");
			_exit(SG_TEST_SKIP);
		}
		fflush(stdout);
		st = child();
		fflush(stdout);
		_exit(st);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return 1;
	return WEXITSTATUS(st);
}
