// SPDX-License-Identifier: GPL-2.0
/*
 * sched_switch/sched_wakeup: the books of each thread's CPU, run-queue and
 * blocked time. Included by looptrace.bpf.c, in order.
 */
#pragma once

/* task_struct before 5.14 named __state `state` (CO-RE picks the one the
 * running kernel has). */
struct task_struct___old {
	long state;
} __attribute__((preserve_access_index));

static __always_inline long task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state);
	return BPF_CORE_READ((struct task_struct___old *)t, state);
}

#define LT_PF_KTHREAD 0x00200000 /* task_struct.flags: a kernel thread */

/* task_struct.__state bits (include/linux/sched.h): stopped by a signal,
 * stopped by a tracer, frozen by the (cgroup v1 or suspend) freezer. */
#define LT_TASK_STOPPED 0x0004
#define LT_TASK_TRACED 0x0008
#define LT_TASK_FROZEN 0x8000

/* `t`, switching out in `state`, is stopped or frozen: SIGSTOP, a ptrace
 * stop, a freezer. The cgroup v2 freezer parks a task in an interruptible
 * sleep and marks it `frozen`. Nothing the program asked for: not lag. */
static __always_inline int task_stopped(struct task_struct *t, long state)
{
	if (state & (LT_TASK_STOPPED | LT_TASK_TRACED | LT_TASK_FROZEN))
		return 1;
	if (bpf_core_field_exists(t->frozen))
		return BPF_CORE_READ_BITFIELD_PROBED(t, frozen);
	return 0;
}

/* A stopped thread (st) is continued or thawed at `now`: its stopped time
 * goes to the books and the interval to userspace, which sets it apart
 * from the lag of messages due meanwhile. */
static __always_inline void on_continued(struct task_struct *p, struct lt_thread *st, __u64 now)
{
	struct lt_stop_rec *rec;
	__u64 ids;

	st->stop_acc += now - st->off_since;
	st->off_stopped = 0;
	rec = bpf_ringbuf_reserve(&lt_events, sizeof(*rec), 0);
	if (!rec) {
		count(LT_CNT_RB_FULL);
		return;
	}
	ids = task_ids(p);
	rec->hdr.type = LT_REC_STOP;
	rec->hdr.size = sizeof(*rec);
	rec->hdr.ts_ns = now;
	rec->hdr.pid = ids >> 32;
	rec->hdr.tid = (__u32)ids;
	rec->start_ns = st->off_since;
	bpf_ringbuf_submit(rec, rb_flags());
}

/* The size of the current thread's blocking point record: the stack copy
 * (one size per run, rodata: the verifier wants constants) and, in a
 * CPython process (py), its Python frames after it. */
static __always_inline __u32 offcpu_base(void)
{
	return lt_cfg.stack_copy ? sizeof(struct lt_offcpu_copy_rec) : sizeof(struct lt_offcpu_rec);
}

/*
 * The current thread (st), inside a span, blocks: record where, with its
 * user stack (and the copy of it for CFI unwinding), kernel stack and, in a
 * CPython process, its Python frames (it is still `current` here), for
 * every span: a dispatch that blocks at once is as slow as one that blocks
 * late. The analyser drops the records of spans that end fast (the span's
 * drop record, as for samples). Capped per span.
 */
static __always_inline void on_block(void *ctx, struct lt_thread *st, __u64 now)
{
	struct lt_pystack *pys = 0;
	struct lt_jsstack *jss = 0;
	const struct lt_py_proc *py;
	struct lt_offcpu_rec *rec;
	__u32 d = st->depth;
	struct lt_frame *f;
	long n;

	if (!d)
		return;
	if (d > LT_MAX_DEPTH)
		d = LT_MAX_DEPTH;
	f = &st->stack[(d - 1) & (LT_MAX_DEPTH - 1)];
	if (wait_frame(f))
		return; /* a loop waiting for work is not blocked */
	if (f->nblocks >= LT_MAX_BLOCKS) {
		count(LT_CNT_OFFCPU_CAPPED);
		return;
	}
	py = py_proc_cached(st);
	if (py)
		pys = py_stack(py, LT_PY_SLOT_SCHED);
	else
		jss = js_stack(js_proc(), LT_JS_SLOT_SCHED);
	if (py)
		rec = bpf_ringbuf_reserve(&lt_events, offcpu_base() + sizeof(struct lt_pystack), 0);
	else if (jss)
		rec = bpf_ringbuf_reserve(&lt_events, offcpu_base() + sizeof(struct lt_jsstack), 0);
	else
		rec = bpf_ringbuf_reserve(&lt_events, offcpu_base(), 0);
	if (!rec) {
		count(LT_CNT_RB_FULL);
		return;
	}
	n = bpf_get_stack(ctx, rec->frames, sizeof(rec->frames), BPF_F_USER_STACK);
	rec->nframes = n > 0 ? n / sizeof(__u64) : 0;
	n = bpf_get_stack(ctx, rec->kframes, sizeof(rec->kframes), 0);
	rec->nkframes = n > 0 ? n / sizeof(__u64) : 0;
	if (lt_cfg.stack_copy)
		fill_ucopy(&((struct lt_offcpu_copy_rec *)rec)->u, st);
	if (py)
		py_copy((struct lt_pystack *)((char *)rec + offcpu_base()), pys);
	else if (jss)
		js_copy((struct lt_jsstack *)((char *)rec + offcpu_base()), jss);
	fill_header(&rec->hdr, LT_REC_OFFCPU,
		    offcpu_base() + (py	   ? sizeof(struct lt_pystack)
				     : jss ? sizeof(struct lt_jsstack)
					   : 0),
		    now);
	rec->span_id = f->span_id;
	rec->probe_id = f->probe_id;
	rec->seq = ++st->block_seq;
	st->block_pending = 1;
	st->block_off_ns = now;
	f->nblocks++;
	f->sampled = 1; /* a fast end sends a drop */
	bpf_ringbuf_submit(rec, 0);
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
	long state;

	if (!prev->bpf_storage && !next->bpf_storage)
		return 0;
	now = bpf_ktime_get_ns();
	steal = steal_now(prev); /* prev and next share this CPU's rq */
	st = bpf_task_storage_get(&lt_threads, prev, 0, 0);
	if (st)
		st->switches++;
	if (st && st->oncpu_since) {
		if (st->off_since) {
			/* Books that say it is off CPU missed its switch-in:
			 * when it went on CPU is not known. */
			st->sched_unseen++;
			count(LT_CNT_SCHED_UNSEEN);
		} else {
			__u64 oncpu = oncpu_delta(st, now, steal);

			st->cpu_acc += oncpu;
			st->steal_acc += (now - st->oncpu_since) - oncpu;
		}
		st->off_since = now;
		/* Preempted (even while it was about to sleep): it stays on
		 * the run queue. */
		state = task_state(prev);
		st->off_runnable = preempt || state == 0;
		/* Stopped is not blocked: no blocking point, its own time. */
		st->off_stopped = !st->off_runnable && task_stopped(prev, state);
		if (!st->off_runnable && !st->off_stopped && lt_cfg.offcpu_on)
			on_block(ctx, st, now);
	}
	st = bpf_task_storage_get(&lt_threads, next, 0, 0);
	if (st) {
		st->switches++;
		if (!st->off_since && st->oncpu_since) {
			/* Books that say it already runs missed its switch-out. */
			st->sched_unseen++;
			count(LT_CNT_SCHED_UNSEEN);
		} else if (st->off_since && st->off_runnable) {
			st->runq_acc += now - st->off_since;
		}
		/* (Books not started yet, oncpu_since 0, start here.) */
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
	__u64 now;

	if (!p->bpf_storage)
		return;
	st = bpf_task_storage_get(&lt_threads, p, 0, 0);
	if (st && st->off_since && !st->off_runnable) {
		now = bpf_ktime_get_ns();
		if (st->off_stopped)
			on_continued(p, st, now);
		st->off_since = now;
		st->off_runnable = 1;
	}
}

/*
 * The thread is back on a run queue. For a blocking point of it recorded,
 * say which wakeup ended it: the thread's latest (sched_waking runs before
 * sched_wakeup in the same try_to_wake_up, and nobody else can wake it in
 * between). sched_wakeup always comes after the thread's switch-out, so
 * the pair is never missed, whatever order the waker and the sleeper's
 * CPU got there in; but it may run on the woken thread's CPU, not the
 * waker's, hence the two records.
 */
static __always_inline void on_woken(struct task_struct *p)
{
	struct lt_woken_rec *rec;
	struct lt_thread *st;
	__u64 ids;

	if (!lt_cfg.offcpu_on || !p->bpf_storage)
		return;
	st = bpf_task_storage_get(&lt_threads, p, 0, 0);
	if (!st || !st->block_pending)
		return;
	if (!__sync_lock_test_and_set(&st->block_pending, 0))
		return;
	rec = bpf_ringbuf_reserve(&lt_events, sizeof(*rec), 0);
	if (!rec) {
		count(LT_CNT_RB_FULL);
		return;
	}
	rec->hdr.type = LT_REC_WOKEN;
	rec->hdr.size = sizeof(*rec);
	rec->hdr.ts_ns = bpf_ktime_get_ns();
	ids = task_ids(p);
	rec->hdr.pid = ids >> 32;
	rec->hdr.tid = (__u32)ids;
	rec->seq = st->block_seq;
	rec->wake_id = st->wake_seq;
	bpf_ringbuf_submit(rec, 0);
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(lt_sched_wakeup, struct task_struct *p)
{
	on_wakeup(p);
	on_woken(p);
	return 0;
}

/*
 * Who wakes a thread inside a span: in the waker's context (sched_waking,
 * unlike sched_wakeup, always runs there), its identity and stacks. From
 * an interrupt (a timer, a device) no thread woke it: the idle task was
 * running, or the kernel stack passes through the interrupt entry code
 * (lt_config.irqentry_*; the preempt count that would say so directly is a
 * per-CPU variable BPF finds only through kallsyms, which kernels without
 * KALLSYMS_ALL lack).
 */
/* The size of a wakeup record before the waker's Python frames: the stack
 * copy or not (one size per run). */
static __always_inline __u32 wake_base(void)
{
	return lt_cfg.stack_copy ? sizeof(struct lt_wake_copy_rec) : sizeof(struct lt_wake_rec);
}

/* The waker's interpreter, if it runs CPython: a traced thread keeps the
 * answer (py_proc_cached); the idle task, from an interrupt, has none. */
static __always_inline const struct lt_py_proc *waker_py(void)
{
	struct lt_thread *w;

	if (!bpf_get_current_pid_tgid())
		return 0;
	w = thread_state(0);
	return w ? py_proc_cached(w) : py_proc();
}

/* The waker's user stack into its wakeup record (and the copy of it, and
 * its Python frames pys when the record has room for them: py): none from
 * an interrupt (a stranger's) or a kernel thread. */
static __always_inline void waker_user_stacks(void *ctx, struct lt_wake_rec *rec, int irq,
					      const struct lt_pystack *pys, int py)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	int user = !irq && !(cur->flags & LT_PF_KTHREAD);
	long n;

	rec->nframes = 0;
	if (user) {
		n = bpf_get_stack(ctx, rec->frames, sizeof(rec->frames), BPF_F_USER_STACK);
		rec->nframes = n > 0 ? n / sizeof(__u64) : 0;
	}
	if (lt_cfg.stack_copy) {
		struct lt_ucopy *u = &((struct lt_wake_copy_rec *)rec)->u;

		if (user)
			fill_ucopy(u, thread_state(0));
		else
			u->stack_len = u->nret = 0;
	}
	if (py)
		py_copy((struct lt_pystack *)((char *)rec + wake_base()), user ? pys : 0);
}

SEC("tp_btf/sched_waking")
int BPF_PROG(lt_sched_waking, struct task_struct *p)
{
	const struct lt_py_proc *py;
	struct lt_pystack *pys = 0;
	struct lt_wake_rec *rec;
	struct lt_thread *st;
	struct lt_frame *f;
	__u64 pid_tgid, ids;
	__u32 i, id, size;
	int irq;
	long n;

	if (!p->bpf_storage)
		return 0;
	st = bpf_task_storage_get(&lt_threads, p, 0, 0);
	/* Only threads inside a span: the others' wakeups end nothing we
	 * report. */
	if (!st || !lt_cfg.offcpu_on || !st->depth)
		return 0;
	/* A loop waiting for work: only whether the first waker inside a
	 * wake call woke it, and since when that call ran (end_wait counts
	 * it). */
	f = top_frame(st);
	if (f && wait_frame(f)) {
		struct lt_thread *w = thread_state(0);
		struct lt_frame *wf = w ? top_frame(w) : 0;
		__u32 wid;

		if (!wf || st->woken_by)
			return 0;
		wid = wf->probe_id & (LT_MAX_PROBES - 1);
		if (lt_cfg.probes[wid].role == LT_ROLE_WAKE) {
			st->woken_by = wid + 1;
			st->wake_call_ns = wf->start_ns;
		}
		return 0;
	}
	/* Taken even if the record is lost: its LT_REC_WOKEN must not name an
	 * older wakeup. */
	id = ++st->wake_seq;
	/* A waker in a CPython process: its Python frames (dropped below if
	 * it turns out to be an interrupt's stranger). */
	py = waker_py();
	if (py)
		pys = py_stack(py, LT_PY_SLOT_SCHED);
	size = wake_base() + (py ? sizeof(struct lt_pystack) : 0);
	if (py)
		rec = bpf_ringbuf_reserve(&lt_events, wake_base() + sizeof(struct lt_pystack), 0);
	else
		rec = bpf_ringbuf_reserve(&lt_events, wake_base(), 0);
	if (!rec) {
		count(LT_CNT_RB_FULL);
		return 0;
	}
	rec->hdr.type = LT_REC_WAKE;
	rec->hdr.size = size;
	rec->hdr.ts_ns = bpf_ktime_get_ns();
	ids = task_ids(p);
	rec->hdr.pid = ids >> 32;
	rec->hdr.tid = (__u32)ids;
	rec->wake_id = id;
	pid_tgid = current_ids(); /* 0 for a task outside looptrace's namespace */
	rec->waker_pid = pid_tgid >> 32;
	rec->waker_tid = (__u32)pid_tgid;
	bpf_get_current_comm(rec->waker_comm, sizeof(rec->waker_comm));
	n = bpf_get_stack(ctx, rec->kframes, sizeof(rec->kframes), 0);
	rec->nkframes = n > 0 ? n / sizeof(__u64) : 0;
	/* From an interrupt: the idle task woke nobody itself, and a stack
	 * through the interrupt entry is an interrupt's, whatever it hit; the
	 * frames under the entry are the stranger's, cut off. */
	irq = bpf_get_current_pid_tgid() == 0;
	for (i = 0; i < LT_MAX_KSTACK && lt_cfg.irqentry_end; i++) {
		if (i >= rec->nkframes)
			break;
		if (rec->kframes[i] >= lt_cfg.irqentry_start &&
		    rec->kframes[i] < lt_cfg.irqentry_end) {
			irq = 1;
			rec->nkframes = i + 1;
			break;
		}
	}
	rec->flags = irq ? LT_WAKE_IRQ : 0;
	waker_user_stacks(ctx, rec, irq, py ? pys : 0, py != 0);
	bpf_ringbuf_submit(rec, 0);
	return 0;
}
