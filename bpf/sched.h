// SPDX-License-Identifier: GPL-2.0
/*
 * sched_switch/sched_wakeup: the books of each thread's CPU, run-queue and
 * blocked time. Included by looptrace.bpf.c, in order.
 */
#pragma once

static __always_inline long task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state);
	return BPF_CORE_READ((struct task_struct___old *)t, state);
}

#define LT_PF_KTHREAD 0x00200000 /* task_struct.flags: a kernel thread */

/*
 * The current thread (st), inside a span, blocks: record where, with its
 * user stack (and the copy of it for CFI unwinding) and kernel stack, for
 * every span: a dispatch that blocks at once is as slow as one that blocks
 * late. The analyser drops the records of spans that end fast (the span's
 * drop record, as for samples). Capped per span.
 */
static __always_inline void on_block(void *ctx, struct lt_thread *st, __u64 now)
{
	__u32 early = st->early_seq, d = st->depth;
	struct lt_offcpu_rec *rec;
	struct lt_frame *f;
	long n;

	st->early_seq = 0;
	if (!d)
		return;
	if (d > LT_MAX_DEPTH)
		d = LT_MAX_DEPTH;
	f = &st->stack[(d - 1) & (LT_MAX_DEPTH - 1)];
	if (f->nblocks >= LT_MAX_BLOCKS) {
		count(LT_CNT_OFFCPU_CAPPED);
		return;
	}
	/* One size per run (rodata): the verifier wants a constant. */
	rec = bpf_ringbuf_reserve(&lt_events,
				  lt_cfg.stack_copy ? sizeof(struct lt_offcpu_copy_rec)
						    : sizeof(struct lt_offcpu_rec),
				  0);
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
	fill_header(&rec->hdr, LT_REC_OFFCPU,
		    lt_cfg.stack_copy ? sizeof(struct lt_offcpu_copy_rec)
				      : sizeof(struct lt_offcpu_rec),
		    now);
	rec->span_id = f->span_id;
	rec->probe_id = f->probe_id;
	if (early && early == st->block_seq) {
		/* Its wakeup is already recorded (lt_sched_waking). */
		rec->seq = st->block_seq;
		st->block_pending = 0;
	} else {
		rec->seq = ++st->block_seq;
		st->block_pending = 1;
	}
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

	if (!prev->bpf_storage && !next->bpf_storage)
		return 0;
	now = bpf_ktime_get_ns();
	steal = steal_now(prev); /* prev and next share this CPU's rq */
	st = bpf_task_storage_get(&lt_threads, prev, 0, 0);
	if (st) {
		st->switches++;
		/* An early wakeup is for this switch-out only. */
		if (st->early_seq && (preempt || task_state(prev) == 0))
			st->early_seq = 0;
	}
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
		st->off_runnable = preempt || task_state(prev) == 0;
		if (!st->off_runnable && lt_cfg.offcpu_on)
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
 * Who wakes a thread whose blocking point was recorded: in the waker's
 * context (sched_waking, unlike sched_wakeup, always runs there), its
 * identity and stacks. From an interrupt (a timer, a device) no thread
 * woke it: the kernel stack says what did (interrupt entry frames), and
 * when the interrupt hit the idle task it is flagged here. (The preempt
 * count that would tell an interrupt apart is a per-CPU variable BPF can
 * only find through kallsyms, where kernels without KALLSYMS_ALL lack it.)
 */
SEC("tp_btf/sched_waking")
int BPF_PROG(lt_sched_waking, struct task_struct *p)
{
	struct task_struct *cur;
	struct lt_wake_rec *rec;
	struct lt_thread *st;
	__u64 pid_tgid, off_ns;
	__u32 seq, i;
	int irq;
	long n;

	if (!p->bpf_storage)
		return 0;
	st = bpf_task_storage_get(&lt_threads, p, 0, 0);
	if (!st || !lt_cfg.offcpu_on)
		return 0;
	if (st->block_pending) {
		/* One wakeup per blocking point, if two wakers race. */
		if (!__sync_lock_test_and_set(&st->block_pending, 0))
			return 0;
		off_ns = st->block_off_ns;
		seq = st->block_seq;
	} else if (st->depth && !st->early_seq && p->on_cpu && !p->on_rq) {
		/* Still on its CPU but off the run queue: inside schedule(),
		 * about to switch out blocked, and woken before its switch-out
		 * is recorded. The blocking point will take this seq. */
		if (st->depth > LT_MAX_DEPTH ||
		    st->stack[(st->depth - 1) & (LT_MAX_DEPTH - 1)].nblocks >= LT_MAX_BLOCKS)
			return 0;
		seq = ++st->block_seq;
		st->early_seq = seq;
		off_ns = 0; /* not yet */
	} else {
		return 0;
	}
	rec = bpf_ringbuf_reserve(
	    &lt_events,
	    lt_cfg.stack_copy ? sizeof(struct lt_wake_copy_rec) : sizeof(struct lt_wake_rec), 0);
	if (!rec) {
		count(LT_CNT_RB_FULL);
		return 0;
	}
	rec->hdr.type = LT_REC_WAKE;
	rec->hdr.size =
	    lt_cfg.stack_copy ? sizeof(struct lt_wake_copy_rec) : sizeof(struct lt_wake_rec);
	rec->hdr.ts_ns = bpf_ktime_get_ns();
	rec->hdr.pid = p->tgid;
	rec->hdr.tid = p->pid;
	rec->off_ns = off_ns;
	rec->seq = seq;
	pid_tgid = bpf_get_current_pid_tgid();
	rec->waker_pid = pid_tgid >> 32;
	rec->waker_tid = (__u32)pid_tgid;
	bpf_get_current_comm(rec->waker_comm, sizeof(rec->waker_comm));
	n = bpf_get_stack(ctx, rec->kframes, sizeof(rec->kframes), 0);
	rec->nkframes = n > 0 ? n / sizeof(__u64) : 0;
	/* From an interrupt: the idle task woke nobody itself, and a stack
	 * through the interrupt entry is an interrupt's, whatever it hit; the
	 * frames under the entry are the stranger's, cut off. */
	irq = pid_tgid == 0;
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
	rec->nframes = 0;
	cur = bpf_get_current_task_btf();
	/* A kernel thread has no user stack; an interrupt's is a stranger's. */
	if (!irq && !(cur->flags & LT_PF_KTHREAD)) {
		n = bpf_get_stack(ctx, rec->frames, sizeof(rec->frames), BPF_F_USER_STACK);
		rec->nframes = n > 0 ? n / sizeof(__u64) : 0;
	}
	if (lt_cfg.stack_copy) {
		struct lt_ucopy *u = &((struct lt_wake_copy_rec *)rec)->u;

		if (!irq && !(cur->flags & LT_PF_KTHREAD))
			fill_ucopy(u, thread_state(0));
		else
			u->stack_len = u->nret = 0;
	}
	bpf_ringbuf_submit(rec, 0);
	return 0;
}
