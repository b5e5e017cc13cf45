/* SPDX-License-Identifier: BSD-3-Clause */
/* Straggler tables: sums of several engines' and what a reader derives from them. */
#include "sg_late.h"

uint64_t sg_late_pushes(const struct sg_late_rank *r)
{
	uint64_t n = 0;

	for (unsigned int b = 0; b < SG_LATE_BUCKETS; b++)
		n += r->hist[b];
	return n;
}

void sg_late_add(struct sg_late *to, const struct sg_late *from)
{
	uint32_t n = from->nranks < SG_MAX_WORKERS ? from->nranks : SG_MAX_WORKERS;

	for (uint32_t i = 0; i < n; i++) {
		struct sg_late_rank *t = &to->rank[i];
		const struct sg_late_rank *f = &from->rank[i];
		uint64_t nt = sg_late_pushes(t), nf = sg_late_pushes(f);

		/* each engine's average stands for the pushes it saw */
		if (nt + nf != 0)
			t->avg_ns = (uint64_t)(((double)t->avg_ns * (double)nt +
						(double)f->avg_ns * (double)nf) /
					       (double)(nt + nf));
		for (unsigned int b = 0; b < SG_LATE_BUCKETS; b++)
			t->hist[b] += f->hist[b];
		t->sum_ns += f->sum_ns;
		t->last += f->last;
	}
	to->rounds += from->rounds;
	if (n > to->nranks)
		to->nranks = n;
}

int sg_late_straggler(const struct sg_late *l)
{
	int best = -1;

	for (uint32_t i = 0; i < l->nranks && i < SG_MAX_WORKERS; i++)
		if (l->rank[i].last != 0 && (best < 0 || l->rank[i].last > l->rank[best].last))
			best = (int)i;
	return best;
}

uint64_t sg_late_quantile_ns(const struct sg_late_rank *r, double q)
{
	uint64_t n = sg_late_pushes(r), seen = 0;
	double want;

	if (n == 0)
		return 0;
	q = q < 0 ? 0 : q > 1 ? 1 : q;
	want = q * (double)n;
	for (unsigned int b = 0; b < SG_LATE_BUCKETS; b++) {
		double lo = b == 0 ? 0 : (double)(1ull << (b - 1)) * 1000.0;
		double hi = (double)sg_late_bucket_us(b) * 1000.0;

		if (r->hist[b] == 0 || (double)(seen + r->hist[b]) < want) {
			seen += r->hist[b];
			continue;
		}
		if (b == SG_LATE_BUCKETS - 1)
			return (uint64_t)lo; /* no upper bound: its lower one, as Prometheus */
		return (uint64_t)(lo + (hi - lo) * (want - (double)seen) / (double)r->hist[b]);
	}
	return (uint64_t)((double)(1ull << (SG_LATE_BUCKETS - 2)) * 1000.0);
}
