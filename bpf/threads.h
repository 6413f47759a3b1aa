// SPDX-License-Identifier: GPL-2.0
/*
 * Per-thread state and per-thread histograms. Included by looptrace.bpf.c,
 * in order.
 */
#pragma once

/* The state of `task` (the current thread, which the caller already has:
 * every helper call costs, on the dispatch fast path too). */
static __always_inline struct lt_thread *storage_of(struct task_struct *task, int create)
{
	return bpf_task_storage_get(&lt_threads, task, 0,
				    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

static __always_inline struct lt_thread *thread_state(int create)
{
	return storage_of(bpf_get_current_task_btf(), create);
}

/* The thread's histogram for a probe; 0 when the table is full. A span that
 * gets none is counted by its record if it crosses the ring buffer (the
 * analyser counts the spans it sees), else in LT_CNT_HIST_FULL: each span is
 * counted once, in a histogram, a record or the loss counter. */
static __always_inline struct lt_hist *thread_hist(struct lt_thread *st, __u32 probe_id, __u32 role)
{
	struct lt_hist *h;
	__s32 slot;
	__u32 idx, k;
	__u64 ids;

	probe_id &= LT_MAX_PROBES - 1;
	/* A dispatch probe's delivery lags (a due key) are not its spans. */
	k = (role == LT_ROLE_DELIVERY ? LT_MAX_PROBES : 0) + probe_id;
	slot = st->hist_slot[k & (2 * LT_MAX_PROBES - 1)];
	if (slot > 0) {
		idx = slot - 1;
		return bpf_map_lookup_elem(&lt_hists, &idx);
	}
	if (slot < 0)
		return 0;
	idx = __sync_fetch_and_add(&lt_hist_next, 1);
	if (idx >= lt_cfg.hist_max) {
		/* Every later span of this thread misses too: the callers count
		 * each one that reaches no histogram and no record. */
		st->hist_slot[k & (2 * LT_MAX_PROBES - 1)] = -1;
		return 0;
	}
	h = bpf_map_lookup_elem(&lt_hists, &idx);
	if (!h)
		return 0;
	ids = current_ids();
	h->pid = ids >> 32;
	h->tid = (__u32)ids;
	h->probe_id = probe_id;
	h->role = role;
	bpf_get_current_comm(h->comm, sizeof(h->comm));
	st->hist_slot[k & (2 * LT_MAX_PROBES - 1)] = idx + 1;
	return h;
}

/* Counts one value; the histogram belongs to the current thread only. */
static __always_inline void hist_add(struct lt_hist *h, __u64 v)
{
	__u32 slot = lt_hist_slot(v);

	if (!h)
		return;
	h->count++;
	h->sum_ns += v;
	if (v > h->max_ns)
		h->max_ns = v;
	if (slot < LT_HIST_SLOTS)
		h->slots[slot]++;
}

/* Whether frame f is a loop's wait for work or a wake call (LT_ROLE_WAIT,
 * LT_ROLE_WAKE): never a span, sampled or a blocking point. */
static __always_inline int wait_frame(const struct lt_frame *f)
{
	__u32 role = lt_cfg.probes[f->probe_id & (LT_MAX_PROBES - 1)].role;

	return role == LT_ROLE_WAIT || role == LT_ROLE_WAKE;
}

/* The thread's innermost frame; NULL when it has none. */
static __always_inline struct lt_frame *top_frame(struct lt_thread *st)
{
	__u32 d = st->depth;

	if (!d)
		return 0;
	if (d > LT_MAX_DEPTH)
		d = LT_MAX_DEPTH;
	return &st->stack[(d - 1) & (LT_MAX_DEPTH - 1)];
}
