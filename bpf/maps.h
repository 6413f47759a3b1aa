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

/*
 * PID namespaces. Looptrace in a container names processes by the pids of
 * its own namespace (lt_cfg.pidns_ino): -p, a command's pid, /proc. The
 * kernel's task->pid and bpf_get_current_pid_tgid() are the initial
 * namespace's, so every pid taken here goes through task_ids(). (Not
 * bpf_get_ns_current_pid_tgid: it answers only for a task whose own
 * namespace is that one, not for one in a container inside it, and only
 * for the current task.)
 */
/* The level of looptrace's namespace, found at first use (0: not yet). */
__u32 lt_pidns_level = 0;

#define LT_PIDNS_MAX_LEVEL 32 /* the kernel's MAX_PID_NS_LEVEL */

static __always_inline struct upid *pid_number(struct pid *pid, __u32 level)
{
	return (struct upid *)((char *)pid + bpf_core_field_offset(struct pid, numbers)) + level;
}

/* The level of looptrace's namespace among the ancestors of the
 * namespace of `pid`; 0 when it is not one of them. */
static __always_inline __u32 pidns_level_find(struct pid *pid)
{
	struct pid_namespace *ns = NULL;
	__u32 i, level = BPF_CORE_READ(pid, level);

	if (level >= LT_PIDNS_MAX_LEVEL)
		return 0;
	bpf_probe_read_kernel(&ns, sizeof(ns), &pid_number(pid, level)->ns);
	for (i = 0; i < LT_PIDNS_MAX_LEVEL && ns; i++) {
		if (BPF_CORE_READ(ns, ns.inum) == lt_cfg.pidns_ino)
			return BPF_CORE_READ(ns, level);
		ns = BPF_CORE_READ(ns, parent);
	}
	return 0;
}

/* The number of `pid` in looptrace's namespace; 0 if it has none there. */
static __always_inline __u32 pid_nr_here(struct pid *pid)
{
	struct upid up = {};
	__u32 level = lt_pidns_level;

	if (!pid)
		return 0;
	if (!level) {
		level = pidns_level_find(pid);
		if (!level)
			return 0;
		lt_pidns_level = level;
	}
	if (level >= LT_PIDNS_MAX_LEVEL || BPF_CORE_READ(pid, level) < level)
		return 0;
	bpf_probe_read_kernel(&up, sizeof(up), pid_number(pid, level));
	if (!up.ns || BPF_CORE_READ(up.ns, ns.inum) != lt_cfg.pidns_ino)
		return 0;
	return up.nr;
}

/* tgid << 32 | tid of `t`, as bpf_get_current_pid_tgid() gives them, in
 * looptrace's namespace. */
static __always_inline __u64 task_ids(struct task_struct *t)
{
	if (!lt_cfg.pidns_ino)
		return (__u64)BPF_CORE_READ(t, tgid) << 32 | (__u32)BPF_CORE_READ(t, pid);
	return (__u64)pid_nr_here(BPF_CORE_READ(t, group_leader, thread_pid)) << 32 |
	       pid_nr_here(BPF_CORE_READ(t, thread_pid));
}

/* The current thread's: bpf_get_current_pid_tgid() in looptrace's
 * namespace. */
static __always_inline __u64 current_ids(void)
{
	if (!lt_cfg.pidns_ino)
		return bpf_get_current_pid_tgid();
	return task_ids(bpf_get_current_task_btf());
}

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
	__u32 tgid = current_ids() >> 32;

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
	__u64 ids = current_ids();
	__u32 tid = (__u32)ids, i;

	/* A process outside looptrace's PID namespace: no pid to name it. */
	if (lt_cfg.pidns_ino && !tid)
		return 0;
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
 * records and fast spans (--record-all) are submitted without a wakeup
 * (lazy_wakeup), and a record behind unconsumed ones does not wake the
 * reader by itself, so with either on these force one: a barrier post or a
 * slow span is not held back behind them. */
static __always_inline __u64 rb_flags(void)
{
	return lt_cfg.input_on || lt_cfg.record_all ? BPF_RB_FORCE_WAKEUP : 0;
}

/* The frequent records (input calls, fast spans with --record-all) wake the
 * reader once, as the bytes waiting in the ring buffer cross
 * lt_cfg.io_wakeup_bytes: below the mark its poll timeout collects them,
 * above it the reader is awake already (it drains the buffer before it
 * sleeps) or its timeout comes first. A wakeup per record is an IPI each,
 * an APIC write that is a VM exit under a hypervisor: more than the record
 * costs. `before` is what waited before this record of `size` bytes. */
static __always_inline __u64 io_wakeup(__u64 before, __u32 size)
{
	__u64 mark = lt_cfg.io_wakeup_bytes;

	return before < mark && before + size >= mark ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

/* io_wakeup for a record reserved already (the waiting bytes include it). */
static __always_inline __u64 lazy_wakeup(__u32 size)
{
	__u64 avail = bpf_ringbuf_query(&lt_events, BPF_RB_AVAIL_DATA);

	return io_wakeup(avail > size ? avail - size : 0, size);
}

/* Every ring-buffer record starts with the same header. */
static __always_inline void fill_header(struct lt_rec_header *hdr, __u32 type, __u32 size, __u64 ts)
{
	__u64 pid_tgid = current_ids();

	hdr->type = type;
	hdr->size = size;
	hdr->ts_ns = ts;
	hdr->pid = pid_tgid >> 32;
	hdr->tid = (__u32)pid_tgid;
}
