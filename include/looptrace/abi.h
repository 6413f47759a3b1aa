/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * looptrace ABI: every record and map value shared by the BPF programs and
 * the C++ loader. This is the only header both sides include.
 *
 * Rules: fixed-width types only, explicit padding, no bool/enum-typed fields.
 * BPF includes it after vmlinux.h; C++ gets the types from <linux/types.h>.
 */
#ifndef LOOPTRACE_ABI_H
#define LOOPTRACE_ABI_H

#ifndef __bpf__
#include <linux/types.h> /* BPF gets the same types from vmlinux.h */
#endif

#define LT_ABI_VERSION 1

/* Key values read at span entry; 4 covers Android's target/callback/what
 * plus one spare. */
#define LT_MAX_KEYS 4
/* Dereferences per key expression: `**(*(arg1+8)+16)` is 3. */
#define LT_MAX_DEREF 3
/* Probe points per run (span entries); the attach cookie indexes them. */
#define LT_MAX_PROBES 32
/* In-flight spans per thread: GLib/Qt nest main loops a few levels deep. */
#define LT_MAX_DEPTH 8
/* User frames per stack sample; deeper stacks are truncated. */
#define LT_MAX_STACK 64
/* Log-linear histogram: 64 powers of two x 4 linear sub-buckets. */
#define LT_HIST_SUB_BITS 2
#define LT_HIST_SUB (1 << LT_HIST_SUB_BITS)
#define LT_HIST_SLOTS (64 * LT_HIST_SUB)
#define LT_COMM_LEN 16

/* What a probe point means (DESIGN.md, "role"). */
enum lt_role {
	LT_ROLE_DISPATCH = 0,
	LT_ROLE_IDLE = 1,
	/* Not a probe's role: the lag from a message's due time to the start of
	 * its dispatch, measured when a dispatch probe has a "msg" key and an
	 * enqueue probe recorded that message. Reported like a span. */
	LT_ROLE_DELIVERY = 2,
	LT_ROLE_MAX = 3, /* span-like roles are below this */
	/* Point roles: one record per call, no span. */
	LT_ROLE_BARRIER_POST = 16,   /* token = return value; stack at post */
	LT_ROLE_BARRIER_REMOVE = 17, /* token from a key, at entry */
	LT_ROLE_ENQUEUE = 18,	     /* message + due time, kept in lt_pending */
};

/* Ring-buffer record types. */
enum lt_record_type {
	LT_REC_SPAN = 1,      /* a span that crossed its slow threshold */
	LT_REC_SAMPLE = 2,    /* a user stack sampled inside a long span */
	LT_REC_SPAN_DROP = 3, /* a sampled span ended fast: drop its samples */
	LT_REC_POINT = 4,     /* a call of a point-role probe */
};

/* Base of a key expression. */
enum lt_key_base {
	LT_KEY_NONE = 0,
	LT_KEY_ARG0 = 1, /* ... LT_KEY_ARG5 = 6, System V argument registers */
	LT_KEY_ARG5 = 6,
	LT_KEY_SP = 7,
};

/*
 * A key expression: v = base; for i < nderef: v = *(u64 *)(v + off[i]);
 * v += add; and if size != 0 and nderef > 0 the last read is `size` bytes
 * (1, 2, 4 or 8) zero-extended.
 */
struct lt_key_spec {
	__u8 base;
	__u8 nderef;
	__u8 size;
	__u8 pad0;
	__s32 add;
	__s32 off[LT_MAX_DEREF];
	__u32 pad1;
};

struct lt_probe_cfg {
	__u32 role;
	__u32 nkeys;
	/* Key index + 1 of named keys the kernel uses (0: none): dispatch
	 * "msg"; enqueue "msg", "when", "queue", "flags". */
	__u32 msg_key;
	__u32 when_key;
	__u32 queue_key;
	__u32 flags_key;
	__u32 async_mask; /* enqueue: flags bits that make a message async */
	__u32 pad;
	struct lt_key_spec keys[LT_MAX_KEYS];
};

/* A message enqueued and not yet dispatched (LRU hash lt_pending). */
struct lt_pending_key {
	__u32 pid;
	__u32 pad;
	__u64 msg;
};

struct lt_pending_val {
	__u64 when_ns; /* due time */
	__u64 queue;
	__u32 async;	/* 1: passes sync barriers */
	__u32 probe_id; /* the enqueue probe */
};

/* Per-run knobs; the loader fills them in .rodata before load. */
struct lt_config {
	__u64 slow_ns[LT_ROLE_MAX]; /* span duration that makes it slow */
	__u64 sample_after_ns;	    /* sample stacks of spans older than this */
	__u32 record_all;	    /* 1: every span crosses the ring buffer */
	__u32 nprobes;
	__u32 hist_max;	 /* entries in lt_hists (<= its max_entries) */
	__u32 use_steal; /* 1: subtract KVM steal time from CPU time */
	/* Android's slow-delivery hysteresis: after a slow delivery, a thread
	 * reports no other until one's lag is below this (0: off). */
	__u64 delivery_drain_ns;
	struct lt_probe_cfg probes[LT_MAX_PROBES];
};

/* Loss and health counters (per-CPU array lt_counters, summed by the loader). */
enum lt_counter {
	LT_CNT_RB_FULL = 0,	   /* ring-buffer reservation failed */
	LT_CNT_HIST_FULL = 1,	   /* no free histogram slot for a thread */
	LT_CNT_DEPTH_OVERFLOW = 2, /* nesting deeper than LT_MAX_DEPTH */
	LT_CNT_RET_UNMATCHED = 3,  /* return with no matching entry */
	LT_CNT_STORAGE_FAIL = 4,   /* task storage could not be created */
	LT_CNT_KEY_FAULT = 5,	   /* a key dereference faulted */
	LT_CNT_STACK_FAIL = 6,	   /* bpf_get_stack failed */
	LT_CNT_SAMPLES = 7,	   /* stack samples emitted */
	LT_CNT_MAX = 8,
};

struct lt_rec_header {
	__u32 type;  /* enum lt_record_type */
	__u32 size;  /* bytes of the whole record */
	__u64 ts_ns; /* CLOCK_MONOTONIC */
	__u32 pid;   /* tgid */
	__u32 tid;
};

struct lt_span_rec {
	struct lt_rec_header hdr; /* ts_ns = span end */
	__u64 span_id;		  /* per-thread sequence number */
	__u64 start_ns;
	__u64 duration_ns;
	__u64 cpu_ns;	/* on CPU during the span (less steal) */
	__u64 runq_ns;	/* runnable, waiting for a CPU */
	__u64 steal_ns; /* "on CPU" while the hypervisor ran others */
	__u32 probe_id;
	__u32 role;
	__u32 depth;	      /* 0 = outermost */
	__u32 key_fault_mask; /* bit i: key i could not be read */
	__u64 keys[LT_MAX_KEYS];
	char comm[LT_COMM_LEN];
};

struct lt_sample_rec {
	struct lt_rec_header hdr; /* ts_ns = sample time */
	__u64 span_id;
	__u32 probe_id;
	__u32 nframes;
	__u64 frames[LT_MAX_STACK];
};

struct lt_span_drop_rec {
	struct lt_rec_header hdr;
	__u64 span_id;
};

/* One in-flight span (task storage; userspace reads it for spans still
 * running when tracing stops). */
struct lt_frame {
	__u64 start_ns;
	__u64 cpu_at_start;
	__u64 steal_at_start;
	__u64 runq_at_start;
	__u64 span_id;
	__u64 keys[LT_MAX_KEYS];
	__u32 probe_id;
	__u32 key_fault_mask;
	__u32 sampled;
	__u32 pad;
};

/* Per-thread state, in task-local storage lt_threads: no hash lookup on the
 * hot path. */
struct lt_thread {
	__u64 oncpu_since; /* when the thread last went on CPU */
	__u64 steal_since; /* this CPU's steal clock then */
	__u64 off_since;   /* when it left the CPU or was woken; 0: running */
	__u64 cpu_acc;	   /* ns on CPU, accumulated at switch-out */
	__u64 steal_acc;   /* ns "on CPU" that the hypervisor stole */
	__u64 runq_acc;	   /* ns runnable but waiting for a CPU */
	__u64 next_span_id;
	__u32 depth;	    /* in-flight spans, may exceed LT_MAX_DEPTH */
	__u32 off_runnable; /* since off_since it has been runnable */
	/* index + 1 into lt_hists per probe; 0: none yet; -1: map full */
	__s32 hist_slot[LT_MAX_PROBES];
	__u32 delivery_quiet; /* hysteresis: a slow delivery was reported */
	__u32 pad;
	struct lt_frame stack[LT_MAX_DEPTH];
};

/* A call of a point-role probe (barrier post/remove). ts_ns = its entry. */
struct lt_point_rec {
	struct lt_rec_header hdr;
	__u32 probe_id;
	__u32 role;
	__u64 keys[LT_MAX_KEYS]; /* read at entry */
	__u64 ret;		 /* return value (barrier.post), else 0 */
	__u32 key_fault_mask;
	__u32 nframes; /* user stack of the caller (barrier.post) */
	__u64 frames[LT_MAX_STACK];
};

/* One histogram per (thread, probe), in the array map lt_hists. */
struct lt_hist {
	__u32 pid;
	__u32 tid;
	__u32 probe_id;
	__u32 role;
	char comm[LT_COMM_LEN];
	__u64 count;
	__u64 sum_ns;
	__u64 max_ns;
	__u64 slots[LT_HIST_SLOTS];
};

/*
 * Histogram slot of a duration in ns: values below LT_HIST_SUB get their own
 * slot; above, slot = (msb << SUB_BITS) | the SUB_BITS bits below the msb, so
 * each power of two is split into LT_HIST_SUB linear parts (error < 25%).
 * Shared so that BPF and C++ agree on bucket bounds.
 */
static inline __u32 lt_hist_slot(__u64 v)
{
	__u32 msb = 0;
	__u64 t = v;

	if (v < LT_HIST_SUB)
		return (__u32)v;
	if (t >> 32) {
		msb += 32;
		t >>= 32;
	}
	if (t >> 16) {
		msb += 16;
		t >>= 16;
	}
	if (t >> 8) {
		msb += 8;
		t >>= 8;
	}
	if (t >> 4) {
		msb += 4;
		t >>= 4;
	}
	if (t >> 2) {
		msb += 2;
		t >>= 2;
	}
	if (t >> 1) {
		msb += 1;
	}
	return (msb << LT_HIST_SUB_BITS) |
	       (__u32)((v >> (msb - LT_HIST_SUB_BITS)) & (LT_HIST_SUB - 1));
}

/* Smallest value that falls in `slot` (inverse of lt_hist_slot). */
static inline __u64 lt_hist_slot_low(__u32 slot)
{
	__u32 msb = slot >> LT_HIST_SUB_BITS;
	__u64 sub = slot & (LT_HIST_SUB - 1);

	if (slot < LT_HIST_SUB)
		return slot;
	if (msb < LT_HIST_SUB_BITS) /* slots never produced by lt_hist_slot */
		return LT_HIST_SUB;
	return (1ULL << msb) | (sub << (msb - LT_HIST_SUB_BITS));
}

#endif /* LOOPTRACE_ABI_H */
