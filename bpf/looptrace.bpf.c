// SPDX-License-Identifier: GPL-2.0
/*
 * looptrace span tracing: uprobe/uretprobe pairs around a loop's dispatch
 * (and idle) functions, CPU-time accounting from sched_switch, and a
 * perf-event stack sampler for spans that run long.
 *
 * Fast spans only update a per-thread histogram; slow spans, stack samples
 * and sample drops cross the ring buffer. Everything lost is counted.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "looptrace/abi.h"

char LICENSE[] SEC("license") = "GPL";

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

#define LT_E2BIG 7 /* a full hash map refuses an update with -E2BIG */

/* Traced processes (tgid -> 1) with -p or a command: the target, and the
 * processes it forks (lt_fork); a process leaves when its last thread exits
 * (lt_exit). Spans (span_tgid_filter) and input calls (input_tgid_filter)
 * of other processes are dropped first thing. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} lt_tgids SEC(".maps");

static __always_inline int tgid_traced(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	return bpf_map_lookup_elem(&lt_tgids, &tgid) != 0;
}

/* Submit flags for the rare records (slow spans, drops, points): input
 * records are submitted without a wakeup (input_io.h), and a record behind
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

/*
 * Virtual machines: time the hypervisor ran something else while our vCPU
 * was "on CPU" is subtracted from CPU time, as the scheduler does for
 * CLOCK_THREAD_CPUTIME_ID. The run queue of the CPU the task runs on keeps
 * the steal clock as of its last clock update (at most a tick old; fresh at
 * every context switch). `t` must be running on this CPU.
 */
static __always_inline __u64 steal_now(struct task_struct *t)
{
	if (!lt_cfg.use_steal)
		return 0;
	if (!bpf_core_field_exists(struct rq, prev_steal_time_rq) ||
	    !bpf_core_field_exists(struct cfs_rq, rq))
		return 0;
	return t->se.cfs_rq->rq->prev_steal_time_rq;
}

/* On-CPU time from oncpu_since to now, less what the hypervisor stole. */
static __always_inline __u64 oncpu_delta(struct lt_thread *st, __u64 now, __u64 steal)
{
	__u64 ran = now - st->oncpu_since;
	__u64 stolen = steal - st->steal_since;

	return stolen < ran ? ran - stolen : 0;
}

/* The current thread's CPU and steal time up to now (it is running). */
static __always_inline void times_now(struct lt_thread *st, __u64 now, __u64 *cpu, __u64 *steal)
{
	__u64 cur = steal_now(bpf_get_current_task_btf());
	__u64 ran = now - st->oncpu_since;
	__u64 oncpu = oncpu_delta(st, now, cur);

	*cpu = st->cpu_acc + oncpu;
	*steal = st->steal_acc + (ran - oncpu);
}

/*
 * The key bases, read once per entry at constant ctx offsets (the verifier
 * rejects a ctx access at a variable offset, which is what a switch on the
 * base would compile to).
 */
static __always_inline void load_regs(struct pt_regs *ctx, __u64 regs[8])
{
	regs[LT_KEY_NONE] = 0;
	regs[LT_KEY_ARG0] = PT_REGS_PARM1(ctx);
	regs[LT_KEY_ARG0 + 1] = PT_REGS_PARM2(ctx);
	regs[LT_KEY_ARG0 + 2] = PT_REGS_PARM3(ctx);
	regs[LT_KEY_ARG0 + 3] = PT_REGS_PARM4(ctx);
	regs[LT_KEY_ARG0 + 4] = PT_REGS_PARM5(ctx);
#if defined(PT_REGS_PARM6)
	regs[LT_KEY_ARG5] = PT_REGS_PARM6(ctx);
#elif defined(__TARGET_ARCH_x86)
	regs[LT_KEY_ARG5] = ctx->r9; /* libbpf 1.1 has no PT_REGS_PARM6 */
#else
	regs[LT_KEY_ARG5] = 0;
#endif
	regs[LT_KEY_SP] = PT_REGS_SP(ctx);
}

/* Evaluates one key expression; returns 0 on success, -1 on a fault. */
static __always_inline int read_key(const __u64 regs[8], const volatile struct lt_key_spec *spec,
				    __u64 *out)
{
	__u64 v = regs[spec->base & 7];
	__u8 nderef = spec->nderef;
	__u8 size = spec->size;
	int i;

	for (i = 0; i < LT_MAX_DEREF; i++) {
		void *addr;
		__u64 next = 0;
		long err;

		if (i >= nderef)
			break;
		addr = (void *)(v + (__s64)spec->off[i]);
		/* Only the last read may be narrower than a pointer. */
		if (i == nderef - 1 && size == 4)
			err = bpf_probe_read_user(&next, 4, addr);
		else if (i == nderef - 1 && size == 2)
			err = bpf_probe_read_user(&next, 2, addr);
		else if (i == nderef - 1 && size == 1)
			err = bpf_probe_read_user(&next, 1, addr);
		else
			err = bpf_probe_read_user(&next, 8, addr);
		if (err)
			return -1;
		v = next;
	}
	*out = v + (__s64)spec->add;
	return 0;
}

static __always_inline struct lt_thread *thread_state(int create)
{
	struct task_struct *task = bpf_get_current_task_btf();

	return bpf_task_storage_get(&lt_threads, task, 0,
				    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

/* The thread's histogram for a probe; 0 when the table is full. A span that
 * gets none is counted by its record if it crosses the ring buffer (the
 * analyser counts the spans it sees), else in LT_CNT_HIST_FULL: each span is
 * counted once, in a histogram, a record or the loss counter. */
static __always_inline struct lt_hist *thread_hist(struct lt_thread *st, __u32 probe_id, __u32 role)
{
	struct task_struct *task;
	struct lt_hist *h;
	__s32 slot;
	__u32 idx;

	probe_id &= LT_MAX_PROBES - 1;
	slot = st->hist_slot[probe_id];
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
		st->hist_slot[probe_id] = -1;
		return 0;
	}
	h = bpf_map_lookup_elem(&lt_hists, &idx);
	if (!h)
		return 0;
	task = bpf_get_current_task_btf();
	h->pid = BPF_CORE_READ(task, tgid);
	h->tid = BPF_CORE_READ(task, pid);
	h->probe_id = probe_id;
	h->role = role;
	bpf_get_current_comm(h->comm, sizeof(h->comm));
	st->hist_slot[probe_id] = idx + 1;
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

/* An enqueue: remember the message's due time until it is dispatched. */
static __always_inline void on_enqueue(const volatile struct lt_probe_cfg *cfg, struct lt_frame *f)
{
	struct lt_pending_key key = {};
	struct lt_pending_val val = {};
	__u32 mk = cfg->msg_key, wk = cfg->when_key, qk = cfg->queue_key, fk = cfg->flags_key;

	if (!mk || !wk || mk > LT_MAX_KEYS || wk > LT_MAX_KEYS)
		return;
	key.pid = bpf_get_current_pid_tgid() >> 32;
	key.msg = f->keys[(mk - 1) & (LT_MAX_KEYS - 1)];
	val.when_ns = f->keys[(wk - 1) & (LT_MAX_KEYS - 1)];
	if (qk && qk <= LT_MAX_KEYS)
		val.queue = f->keys[(qk - 1) & (LT_MAX_KEYS - 1)];
	if (fk && fk <= LT_MAX_KEYS)
		val.async = (f->keys[(fk - 1) & (LT_MAX_KEYS - 1)] & cfg->async_mask) != 0;
	val.probe_id = f->probe_id;
	bpf_map_update_elem(&lt_pending, &key, &val, BPF_ANY);
}

/*
 * A dispatch of a message an enqueue probe saw: its delivery lag (start -
 * due) goes to the thread's delivery histogram and, when slow, through the
 * ring buffer as a DELIVERY span from the due time to the dispatch start.
 */
static __always_inline void on_delivery(struct lt_thread *st,
					const volatile struct lt_probe_cfg *cfg, struct lt_frame *f,
					__u32 depth)
{
	struct lt_pending_key key = {};
	struct lt_pending_val *val;
	struct lt_span_rec *rec;
	struct lt_hist *h;
	__u32 mk = cfg->msg_key;
	__u64 due, lag;

	if (mk > LT_MAX_KEYS)
		return;
	key.pid = bpf_get_current_pid_tgid() >> 32;
	key.msg = f->keys[(mk - 1) & (LT_MAX_KEYS - 1)];
	val = bpf_map_lookup_elem(&lt_pending, &key);
	if (!val)
		return;
	due = val->when_ns;
	h = thread_hist(st, val->probe_id & (LT_MAX_PROBES - 1), LT_ROLE_DELIVERY);
	bpf_map_delete_elem(&lt_pending, &key);
	lag = f->start_ns > due ? f->start_ns - due : 0;
	hist_add(h, lag);
	if (lt_cfg.delivery_drain_ns) {
		/* Quiet after a report until the lag has drained (Android). */
		if (st->delivery_quiet) {
			if (lag < lt_cfg.delivery_drain_ns)
				st->delivery_quiet = 0;
			if (!h)
				count(LT_CNT_HIST_FULL);
			return;
		}
	}
	if (lag < lt_cfg.slow_ns[LT_ROLE_DELIVERY]) {
		if (!h)
			count(LT_CNT_HIST_FULL);
		return;
	}
	if (lt_cfg.delivery_drain_ns)
		st->delivery_quiet = 1;
	rec = bpf_ringbuf_reserve(&lt_events, sizeof(*rec), 0);
	if (!rec) {
		count(LT_CNT_RB_FULL);
		if (!h)
			count(LT_CNT_HIST_FULL);
		return;
	}
	fill_header(&rec->hdr, LT_REC_SPAN, sizeof(*rec), f->start_ns);
	rec->span_id = f->span_id;
	rec->start_ns = f->start_ns - lag;
	rec->duration_ns = lag;
	rec->cpu_ns = 0;
	rec->runq_ns = 0;
	rec->steal_ns = 0;
	rec->probe_id = f->probe_id;
	rec->role = LT_ROLE_DELIVERY;
	rec->depth = depth;
	rec->key_fault_mask = f->key_fault_mask;
	rec->flags = 0;
	rec->pad = 0;
	__builtin_memcpy(rec->keys, f->keys, sizeof(rec->keys));
	bpf_get_current_comm(rec->comm, sizeof(rec->comm));
	bpf_ringbuf_submit(rec, rb_flags());
}

/* Emits a point record from a completed frame (keys read at entry). */
static __always_inline void emit_point(void *ctx, struct lt_frame *f, __u32 role, __u64 ret,
				       int with_stack)
{
	struct lt_point_rec *rec = bpf_ringbuf_reserve(&lt_events, sizeof(*rec), 0);
	long n = 0;

	if (!rec) {
		count(LT_CNT_RB_FULL);
		return;
	}
	fill_header(&rec->hdr, LT_REC_POINT, sizeof(*rec), f->start_ns);
	rec->probe_id = f->probe_id;
	rec->role = role;
	__builtin_memcpy(rec->keys, f->keys, sizeof(rec->keys));
	rec->ret = ret;
	rec->key_fault_mask = f->key_fault_mask;
	if (with_stack) {
		n = bpf_get_stack(ctx, rec->frames, sizeof(rec->frames), BPF_F_USER_STACK);
		if (n < 0) {
			count(LT_CNT_STACK_FAIL);
			n = 0;
		}
	}
	rec->nframes = n / sizeof(__u64);
	bpf_ringbuf_submit(rec, rb_flags());
}

SEC("uprobe")
int BPF_KPROBE(lt_span_entry)
{
	__u32 probe_id = (__u32)bpf_get_attach_cookie(ctx);
	const volatile struct lt_probe_cfg *cfg;
	struct lt_thread *st;
	struct lt_frame *f;
	__u64 regs[8];
	__u64 now;
	__u32 d, i;

	if (!lt_ready || probe_id >= LT_MAX_PROBES)
		return 0;
	probe_id &= LT_MAX_PROBES - 1; /* keeps the verifier's bound */
	st = thread_state(0);
	/* Another process (the probes fire in every one): dropped. A thread
	 * remembers the answer; its process stays in the set until it exits. */
	if (lt_cfg.span_tgid_filter && !(st && st->traced == 1)) {
		if (!tgid_traced()) {
			if (st)
				st->traced = 2;
			return 0;
		}
		if (!st)
			st = thread_state(1);
		if (st)
			st->traced = 1;
	}
	if (!st)
		st = thread_state(1);
	if (!st) {
		count(LT_CNT_STORAGE_FAIL);
		return 0;
	}
	now = bpf_ktime_get_ns();
	if (!st->oncpu_since) { /* just created: the thread is running now */
		st->oncpu_since = now;
		st->steal_since = steal_now(bpf_get_current_task_btf());
	}
	d = st->depth;
	if (d >= LT_MAX_DEPTH) {
		st->depth = d + 1; /* still paired with its return */
		count(LT_CNT_DEPTH_OVERFLOW);
		return 0;
	}
	f = &st->stack[d];
	f->start_ns = now;
	times_now(st, now, &f->cpu_at_start, &f->steal_at_start);
	f->runq_at_start = st->runq_acc;
	f->span_id = ++st->next_span_id;
	f->probe_id = probe_id;
	f->key_fault_mask = 0;
	f->sampled = 0;
	f->flags = 0;
	if (st->input_next && d == 0) {
		f->flags = LT_SPAN_INPUT;
		st->input_next = 0;
	}

	cfg = &lt_cfg.probes[probe_id];
	if (cfg->nkeys)
		load_regs(ctx, regs);
	for (i = 0; i < LT_MAX_KEYS; i++) {
		if (i >= cfg->nkeys)
			break;
		if (read_key(regs, &cfg->keys[i], &f->keys[i])) {
			f->keys[i] = 0;
			f->key_fault_mask |= 1u << i;
			count(LT_CNT_KEY_FAULT);
		}
	}
	if (cfg->role == LT_ROLE_ENQUEUE) {
		on_enqueue(cfg, f);
		return 0;
	}
	if (cfg->msg_key)
		on_delivery(st, cfg, f, d);
	/* A barrier removal is a point: reported now, never a span. */
	if (cfg->role == LT_ROLE_BARRIER_REMOVE) {
		emit_point(ctx, f, LT_ROLE_BARRIER_REMOVE, 0, 0);
		return 0;
	}
	/* Publish the frame only once it is complete: the sampler reads it. */
	barrier();
	st->depth = d + 1;
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(lt_span_return)
{
	__u32 probe_id = (__u32)bpf_get_attach_cookie(ctx);
	struct lt_span_rec *rec;
	struct lt_thread *st;
	struct lt_frame *f;
	struct lt_hist *h;
	__u64 now, dur, cpu, steal;
	__u32 d, role;

	if (!lt_ready || probe_id >= LT_MAX_PROBES)
		return 0;
	probe_id &= LT_MAX_PROBES - 1; /* keeps the verifier's bound */
	st = thread_state(0);
	if (!st || !st->depth) {
		/* Another process's return (the probes fire in every process
		 * with the filter on) is not a loss. */
		if (!lt_cfg.span_tgid_filter || tgid_traced())
			count(LT_CNT_RET_UNMATCHED);
		return 0;
	}
	now = bpf_ktime_get_ns();
	d = --st->depth;
	if (d >= LT_MAX_DEPTH)
		return 0; /* its entry overflowed and was counted then */
	f = &st->stack[d];
	if (f->probe_id != probe_id)
		count(LT_CNT_RET_UNMATCHED);
	dur = now - f->start_ns;
	role = lt_cfg.probes[probe_id].role;
	if (role == LT_ROLE_BARRIER_POST) {
		/* The token is the return value; the stack is the poster's. */
		emit_point(ctx, f, LT_ROLE_BARRIER_POST, PT_REGS_RC(ctx), 1);
		return 0;
	}
	if (role >= LT_ROLE_MAX)
		role = LT_ROLE_DISPATCH;

	h = thread_hist(st, probe_id, role);
	hist_add(h, dur);

	if (dur < lt_cfg.slow_ns[role] && !lt_cfg.record_all && !(f->flags & LT_SPAN_INPUT)) {
		struct lt_span_drop_rec *drop;

		if (!h)
			count(LT_CNT_HIST_FULL);
		if (!f->sampled)
			return 0;
		drop = bpf_ringbuf_reserve(&lt_events, sizeof(*drop), 0);
		if (!drop) {
			count(LT_CNT_RB_FULL);
			return 0;
		}
		fill_header(&drop->hdr, LT_REC_SPAN_DROP, sizeof(*drop), now);
		drop->span_id = f->span_id;
		bpf_ringbuf_submit(drop, rb_flags());
		return 0;
	}

	rec = bpf_ringbuf_reserve(&lt_events, sizeof(*rec), 0);
	if (!rec) {
		count(LT_CNT_RB_FULL);
		if (!h)
			count(LT_CNT_HIST_FULL);
		return 0;
	}
	fill_header(&rec->hdr, LT_REC_SPAN, sizeof(*rec), now);
	rec->span_id = f->span_id;
	rec->start_ns = f->start_ns;
	rec->duration_ns = dur;
	/*
	 * Steal seen at a context switch may predate the entry, where the run
	 * queue had not accounted it yet: never let that make CPU time negative.
	 */
	times_now(st, now, &cpu, &steal);
	rec->cpu_ns = cpu > f->cpu_at_start ? cpu - f->cpu_at_start : 0;
	rec->steal_ns = steal > f->steal_at_start ? steal - f->steal_at_start : 0;
	rec->runq_ns = st->runq_acc - f->runq_at_start;
	rec->probe_id = probe_id;
	rec->role = role;
	rec->depth = d;
	rec->key_fault_mask = f->key_fault_mask;
	rec->flags = f->flags;
	rec->pad = 0;
	__builtin_memcpy(rec->keys, f->keys, sizeof(rec->keys));
	bpf_get_current_comm(rec->comm, sizeof(rec->comm));
	bpf_ringbuf_submit(rec, rb_flags());
	return 0;
}

struct task_struct___old {
	long state;
} __attribute__((preserve_access_index));

static __always_inline long task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state);
	return BPF_CORE_READ((struct task_struct___old *)t, state);
}

/*
 * Time accounting for threads that have state: on CPU (less steal), stolen,
 * and runnable-but-waiting (preempted, or woken and not yet running). The
 * rest of a span's wall time is blocked.
 */
SEC("tp_btf/sched_switch")
int BPF_PROG(lt_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	struct lt_thread *st;
	__u64 now, steal;

	if (!prev->bpf_storage && !next->bpf_storage)
		return 0;
	now = bpf_ktime_get_ns();
	steal = steal_now(prev); /* prev and next share this CPU's rq */
	st = bpf_task_storage_get(&lt_threads, prev, 0, 0);
	if (st && st->oncpu_since) {
		__u64 oncpu = oncpu_delta(st, now, steal);

		st->cpu_acc += oncpu;
		st->steal_acc += (now - st->oncpu_since) - oncpu;
		st->off_since = now;
		st->off_runnable = task_state(prev) == 0; /* TASK_RUNNING: preempted */
	}
	st = bpf_task_storage_get(&lt_threads, next, 0, 0);
	if (st) {
		if (st->off_since && st->off_runnable)
			st->runq_acc += now - st->off_since;
		st->off_since = 0;
		st->oncpu_since = now;
		st->steal_since = steal;
	}
	return 0;
}

/* A blocked thread is woken: from now on it waits for a CPU. */
static __always_inline void on_wakeup(struct task_struct *p)
{
	struct lt_thread *st;

	if (!p->bpf_storage)
		return;
	st = bpf_task_storage_get(&lt_threads, p, 0, 0);
	if (st && st->off_since && !st->off_runnable) {
		st->off_since = bpf_ktime_get_ns();
		st->off_runnable = 1;
	}
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(lt_sched_wakeup, struct task_struct *p)
{
	on_wakeup(p);
	return 0;
}

/*
 * A thread that exits or execs inside spans never returns from them (their
 * uretprobes cannot fire): report each one now, with what it had (its age,
 * CPU split; its samples already crossed the ring buffer), flagged as cut
 * short by `why`, before its task storage goes away. This is the hang of an
 * app killed for hanging.
 */
static __always_inline void cut_short(struct lt_thread *st, __u32 why)
{
	__u64 now = bpf_ktime_get_ns(), cpu, steal;
	__u32 depth = st->depth, d;

	times_now(st, now, &cpu, &steal);
	for (d = 0; d < LT_MAX_DEPTH; d++) {
		struct lt_span_rec *rec;
		struct lt_frame *f;
		__u32 role;

		if (d >= depth)
			break;
		f = &st->stack[d];
		role = lt_cfg.probes[f->probe_id & (LT_MAX_PROBES - 1)].role;
		if (role >= LT_ROLE_MAX) /* a barrier post in progress: a point */
			continue;
		rec = bpf_ringbuf_reserve(&lt_events, sizeof(*rec), 0);
		if (!rec) {
			count(LT_CNT_RB_FULL);
			continue;
		}
		fill_header(&rec->hdr, LT_REC_SPAN, sizeof(*rec), now);
		rec->span_id = f->span_id;
		rec->start_ns = f->start_ns;
		rec->duration_ns = now - f->start_ns;
		rec->cpu_ns = cpu > f->cpu_at_start ? cpu - f->cpu_at_start : 0;
		rec->steal_ns = steal > f->steal_at_start ? steal - f->steal_at_start : 0;
		rec->runq_ns = st->runq_acc - f->runq_at_start;
		rec->probe_id = f->probe_id;
		rec->role = role;
		rec->depth = d;
		rec->key_fault_mask = f->key_fault_mask;
		rec->flags = f->flags | why;
		rec->pad = 0;
		__builtin_memcpy(rec->keys, f->keys, sizeof(rec->keys));
		bpf_get_current_comm(rec->comm, sizeof(rec->comm));
		bpf_ringbuf_submit(rec, rb_flags());
	}
	/* Reported: tracing that stops meanwhile must not report them again. */
	st->depth = 0;
}

/* Every thread's exit, in its own context (do_exit), killed ones included. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(lt_exit, struct task_struct *p)
{
	struct lt_thread *st;
	__u32 tgid = p->tgid;

	if (!lt_ready)
		return 0;
	/* The last thread of a process (signal->live was just decremented):
	 * it leaves the traced set, and its pid may be reused by a stranger. */
	if ((lt_cfg.span_tgid_filter || lt_cfg.input_tgid_filter) &&
	    BPF_CORE_READ(p, signal, live.counter) == 0)
		bpf_map_delete_elem(&lt_tgids, &tgid);
	if (!p->bpf_storage)
		return 0;
	st = bpf_task_storage_get(&lt_threads, p, 0, 0);
	if (st && st->depth)
		cut_short(st, LT_SPAN_EXIT);
	return 0;
}

/*
 * A fork inside spans: the child returns from them too (its copy of the
 * stack holds the uretprobes' return addresses), so it gets the parent's
 * in-flight spans and those returns pair up; each such span ends twice,
 * once per process, from the same start. Its CPU time so far is the
 * parent's; from now on the child is runnable, waiting for a CPU.
 */
static __always_inline void inherit_spans(struct task_struct *parent, struct task_struct *child)
{
	struct lt_thread *pst, *cst;
	__u32 i;

	if (!parent->bpf_storage)
		return;
	pst = bpf_task_storage_get(&lt_threads, parent, 0, 0);
	if (!pst || !pst->depth)
		return;
	cst = bpf_task_storage_get(&lt_threads, child, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!cst) {
		count(LT_CNT_STORAGE_FAIL);
		return;
	}
	*cst = *pst;
	cst->oncpu_since = 0;
	cst->off_since = bpf_ktime_get_ns();
	cst->off_runnable = 1;
	for (i = 0; i < LT_MAX_PROBES; i++) /* a new thread: its own histograms */
		cst->hist_slot[i] = 0;
	cst->input_next = 0;
	cst->io.chan = 0;
}

/* A new process. With a target, a traced process's children are traced (a
 * command's helpers, forked servers, a daemon's child), as
 * `perf record -- COMMAND` inherits. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(lt_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid, one = 1;

	if (child->pid != ctgid) /* a thread, not a process */
		return 0;
	if (lt_cfg.span_tgid_filter || lt_cfg.input_tgid_filter) {
		if (!bpf_map_lookup_elem(&lt_tgids, &ptgid))
			return 0;
		if (bpf_map_update_elem(&lt_tgids, &ctgid, &one, BPF_ANY) == -LT_E2BIG)
			count(LT_CNT_WATCH_FULL);
	}
	if (lt_ready)
		inherit_spans(parent, child);
	return 0;
}

/* A successful exec, in the new program: the old one's spans are over, and
 * userspace reads the new program's mappings while it runs. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(lt_exec, struct task_struct *p)
{
	struct lt_exec_rec *rec;
	struct lt_thread *st;
	__u32 tgid = p->tgid;
	__u32 i;

	if (!lt_ready)
		return 0;
	if (!(lt_cfg.span_tgid_filter || lt_cfg.input_tgid_filter) ||
	    bpf_map_lookup_elem(&lt_tgids, &tgid)) {
		rec = bpf_ringbuf_reserve(&lt_events, sizeof(*rec), 0);
		if (rec) {
			fill_header(&rec->hdr, LT_REC_EXEC, sizeof(*rec), bpf_ktime_get_ns());
			bpf_ringbuf_submit(rec, rb_flags());
		} else {
			count(LT_CNT_RB_FULL);
		}
	}
	if (!p->bpf_storage)
		return 0;
	st = bpf_task_storage_get(&lt_threads, p, 0, 0);
	if (!st)
		return 0;
	if (st->depth)
		cut_short(st, LT_SPAN_EXEC);
	/* A new program gets its own histograms: a thread that was not the
	 * leader now has the leader's tid. Nothing of the old one is pending. */
	for (i = 0; i < LT_MAX_PROBES; i++)
		st->hist_slot[i] = 0;
	st->delivery_quiet = 0;
	st->input_next = 0;
	st->io.chan = 0;
	return 0;
}

/* Stack sampler: a cpu-clock perf event on every CPU. */
SEC("perf_event")
int lt_sample(struct bpf_perf_event_data *ctx)
{
	struct lt_sample_rec *rec;
	struct lt_thread *st;
	struct lt_frame *f;
	__u64 now;
	__u32 d;
	long n;

	if (!lt_ready)
		return 0;
	st = thread_state(0);
	if (!st || !st->depth)
		return 0;
	d = st->depth - 1;
	if (d >= LT_MAX_DEPTH)
		d = LT_MAX_DEPTH - 1;
	f = &st->stack[d];
	now = bpf_ktime_get_ns();
	if (now - f->start_ns < lt_cfg.sample_after_ns)
		return 0;
	rec = bpf_ringbuf_reserve(&lt_events, sizeof(*rec), 0);
	if (!rec) {
		count(LT_CNT_RB_FULL);
		return 0;
	}
	n = bpf_get_stack(ctx, rec->frames, sizeof(rec->frames), BPF_F_USER_STACK);
	if (n <= 0) {
		count(LT_CNT_STACK_FAIL);
		bpf_ringbuf_discard(rec, 0);
		return 0;
	}
	fill_header(&rec->hdr, LT_REC_SAMPLE, sizeof(*rec), now);
	rec->span_id = f->span_id;
	rec->probe_id = f->probe_id;
	rec->nframes = n / sizeof(__u64);
	f->sampled = 1;
	count(LT_CNT_SAMPLES);
	bpf_ringbuf_submit(rec, 0);
	return 0;
}

#include "input_io.h"
