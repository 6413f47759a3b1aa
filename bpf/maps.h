// SPDX-License-Identifier: GPL-2.0
/*
 * Configuration, maps and the record header every part shares. Included by
 * looptrace.bpf.c, in order.
 */
#pragma once

/* Filled in by the loader before load; frozen afterwards. */
const volatile struct lt_config lt_cfg = {};

/* Set by the loader once every probe is attached. */
volatile __u32 lt_ready = 0;
/* Next free index in lt_hists. */
__u32 lt_hist_next = 0;

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct lt_thread);
} lt_threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20); /* resized by the loader */
} lt_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4096); /* resized by the loader */
	__type(key, __u32);
	__type(value, struct lt_hist);
} lt_hists SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LT_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} lt_counters SEC(".maps");

/* Messages enqueued, not yet dispatched: for delivery lag and for counting
 * what waits behind a sync barrier. LRU: messages that are never
 * dispatched (removed from their queue) age out. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536); /* resized by the loader */
	__type(key, struct lt_pending_key);
	__type(value, struct lt_pending_val);
} lt_pending SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *v = bpf_map_lookup_elem(&lt_counters, &which);

	if (v)
		*v += 1;
}

#define LT_E2BIG 7   /* a full hash map refuses an update with -E2BIG */
#define LT_EEXIST 17 /* BPF_NOEXIST finds the key there */

/* Traced processes (tgid -> 1) with -p or a command (resized by the loader,
 * --max-processes): the target, and the
 * processes it forks (lt_fork); a process leaves when its last thread exits
 * (lt_exit). Spans (span_tgid_filter) and input calls (input_tgid_filter)
 * of other processes are dropped first thing. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096); /* resized by the loader */
	__type(key, __u32);
	__type(value, __u32);
} lt_tgids SEC(".maps");

static __always_inline int tgid_traced(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	return bpf_map_lookup_elem(&lt_tgids, &tgid) != 0;
}

/* The current thread's name is one --comm gave (exact, as pidof). */
static __always_inline int comm_selected(void)
{
	char comm[LT_COMM_LEN] = {};
	__u32 i, k;

	bpf_get_current_comm(comm, sizeof(comm));
	for (i = 0; i < LT_MAX_FILTER_COMMS; i++) {
		int same = lt_cfg.filter_comms[i][0] != 0;

		for (k = 0; k < LT_COMM_LEN && same; k++) {
			if (comm[k] != lt_cfg.filter_comms[i][k])
				same = 0;
			else if (!comm[k])
				break;
		}
		if (same)
			return 1;
	}
	return 0;
}

/* Whether spans of the current thread are recorded: its process is traced
 * (with a target) and --tid or --comm selected it (when given). */
static __always_inline int span_thread_traced(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), i;

	if (lt_cfg.span_tgid_filter && !tgid_traced())
		return 0;
	if (!lt_cfg.thread_filter)
		return 1;
	for (i = 0; i < LT_MAX_FILTER_TIDS; i++)
		if (lt_cfg.filter_tids[i] && lt_cfg.filter_tids[i] == tid)
			return 1;
	return comm_selected();
}

/* Submit flags for the rare records (slow spans, drops, points): input
 * records are submitted without a wakeup (io_calls.h), and a record behind
 * unconsumed ones does not wake the reader by itself, so with input on these
 * force one: a barrier post or a slow span is not held back behind them. */
static __always_inline __u64 rb_flags(void) { return lt_cfg.input_on ? BPF_RB_FORCE_WAKEUP : 0; }

/* Every ring-buffer record starts with the same header. */
static __always_inline void fill_header(struct lt_rec_header *hdr, __u32 type, __u32 size, __u64 ts)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();

	hdr->type = type;
	hdr->size = size;
	hdr->ts_ns = ts;
	hdr->pid = pid_tgid >> 32;
	hdr->tid = (__u32)pid_tgid;
}
