/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The shared-memory rings between a worker and a node (sg_shm.h): records
 * put and got in place, the sleep/wake-up handshake, the hello and its fds,
 * and mapping a node's memfd. Used by libsigma's shared-memory transport and
 * by sigma-udpd's --shm.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sg_shm.h"

static uint64_t rec_bytes(uint32_t len)
{
	return (SG_SHM_REC_HDR + (uint64_t)len + 7) & ~7ull;
}

void sg_shm_ring_init(struct sg_shm_ring *r, struct sg_shm_ring_ctl *ctl, uint8_t *data,
		      uint32_t size, uint32_t max_len, int efd)
{
	*r = (struct sg_shm_ring){.ctl = ctl, .data = data, .size = size, .max_len = max_len,
				  .efd = efd};
}

uint8_t *sg_shm_put(struct sg_shm_ring *r, uint32_t len)
{
	uint32_t off = (uint32_t)r->pos & (r->size - 1);
	uint64_t need = rec_bytes(len), skip = off + need > r->size ? r->size - off : 0;
	uint8_t *rec;

	if (len == 0 || len > r->max_len)
		return NULL;
	if (r->pos + skip + need > r->limit) {
		r->limit = atomic_load_explicit(&r->ctl->tail, memory_order_acquire) + r->size;
		if (r->pos + skip + need > r->limit)
			return NULL;
	}
	if (skip) {
		uint32_t pad = SG_SHM_PAD;

		memcpy(r->data + off, &pad, sizeof(pad));
		r->pos += skip;
		off = 0;
	}
	rec = r->data + off;
	memcpy(rec, &len, sizeof(len));
	memset(rec + sizeof(len), 0, SG_SHM_REC_HDR - sizeof(len));
	r->pos += need;
	return rec + SG_SHM_REC_HDR;
}

bool sg_shm_publish(struct sg_shm_ring *r)
{
	uint64_t one = 1;

	/* seq_cst: the head's store is ordered before the flag's load (sg_shm.h) */
	atomic_store_explicit(&r->ctl->head, r->pos, memory_order_seq_cst);
	if (!atomic_load_explicit(&r->ctl->sleeping, memory_order_seq_cst))
		return false;
	return write(r->efd, &one, sizeof(one)) == (ssize_t)sizeof(one);
}

const uint8_t *sg_shm_get(struct sg_shm_ring *r, uint32_t *len, uint64_t *bad)
{
	for (;;) {
		uint32_t off = (uint32_t)r->pos & (r->size - 1), l;

		if (r->pos == r->limit) {
			r->limit = atomic_load_explicit(&r->ctl->head, memory_order_acquire);
			if (r->pos == r->limit)
				return NULL;
		}
		/* the other side writes this memory: nothing it says is trusted */
		if (r->limit - r->pos > r->size)
			goto skip;
		memcpy(&l, r->data + off, sizeof(l));
		if (l == SG_SHM_PAD) {
			if (r->size - off > r->limit - r->pos)
				goto skip;
			r->pos += r->size - off;
			continue;
		}
		if (l == 0 || l > r->max_len || off + rec_bytes(l) > r->size ||
		    rec_bytes(l) > r->limit - r->pos)
			goto skip;
		r->pos += rec_bytes(l);
		*len = l;
		return r->data + off + SG_SHM_REC_HDR;
skip:
		/* no way to find the next record: drop everything published so far */
		if (bad != NULL)
			(*bad)++;
		r->pos = r->limit;
		return NULL;
	}
}

void sg_shm_release(struct sg_shm_ring *r)
{
	atomic_store_explicit(&r->ctl->tail, r->pos, memory_order_release);
}

bool sg_shm_sleep_prepare(struct sg_shm_ring *r)
{
	atomic_store_explicit(&r->ctl->sleeping, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&r->ctl->head, memory_order_seq_cst) == r->pos)
		return true;
	atomic_store_explicit(&r->ctl->sleeping, 0, memory_order_relaxed);
	return false;
}

void sg_shm_awake(struct sg_shm_ring *r)
{
	uint64_t v;

	atomic_store_explicit(&r->ctl->sleeping, 0, memory_order_relaxed);
	/*
	 * One read takes an eventfd's whole count; one only, since the node
	 * passed this fd and a regular file in its place would never run dry. A
	 * count left behind only costs one early wake-up, and an empty one
	 * (EAGAIN) is fine.
	 */
	(void)!read(r->efd, &v, sizeof(v));
}

struct sg_shm_layout *sg_shm_map(int memfd, uint64_t mem_bytes, uint32_t ring_bytes)
{
	struct stat st;
	int seals = fcntl(memfd, F_GET_SEALS);
	void *m;

	/* a memfd shorter than the rings, or one its owner could shrink later, would
	 * kill us with SIGBUS at the first touch past its end */
	if (ring_bytes < 4096 || (ring_bytes & (ring_bytes - 1)) != 0 || ring_bytes > (1u << 30) ||
	    mem_bytes != sg_shm_mem_bytes(ring_bytes) || fstat(memfd, &st) != 0 ||
	    (uint64_t)st.st_size != mem_bytes || seals < 0 || !(seals & F_SEAL_SHRINK)) {
		errno = EINVAL;
		return NULL;
	}
	m = mmap(NULL, mem_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	return m == MAP_FAILED ? NULL : m;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
}

int sg_shm_hello_recv(int sock, int timeout_ms, struct sg_shm_hello *h, int fds[3])
{
	union {
		struct cmsghdr align;
		uint8_t buf[CMSG_SPACE(3 * sizeof(int))];
	} ctl;
	struct iovec iov = {h, sizeof(*h)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf)};
	struct pollfd pfd = {.fd = sock, .events = POLLIN};
	struct cmsghdr *cm;
	int rc = poll(&pfd, 1, timeout_ms);
	size_t nfd = 0;
	ssize_t got;

	fds[0] = fds[1] = fds[2] = -1;
	if (rc <= 0)
		return rc < 0 ? -errno : -ETIMEDOUT;
	got = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (got < 0)
		return -errno;
	if (got == 0)
		return -ECONNRESET;
	cm = CMSG_FIRSTHDR(&mh);
	if (cm != NULL && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
		nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
	for (size_t i = 0; i < nfd; i++) {
		int fd;

		memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
		if (i < 3)
			fds[i] = fd;
		else
			close(fd); /* more than a node sends: not ours to keep */
	}
	/*
	 * The eventfds are non-blocking whatever the node made them: a blocking
	 * one would hang our wake-up's read (or a write to a full pipe in its
	 * place) for good.
	 */
	if (got == (ssize_t)sizeof(*h) && !(mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) &&
	    h->magic == SG_SHM_MAGIC && h->version == SG_SHM_VERSION && fds[0] >= 0 &&
	    fds[1] >= 0 && fds[2] >= 0 && set_nonblock(fds[1]) == 0 && set_nonblock(fds[2]) == 0)
		return 0;
	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	fds[0] = fds[1] = fds[2] = -1;
	return -EPROTO;
}
