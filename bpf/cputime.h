// SPDX-License-Identifier: GPL-2.0
/*
 * CPU and steal time of the current thread, for the CPU/run-queue/blocked
 * split of a span (sched.h keeps the books). Included by looptrace.bpf.c, in
 * order.
 */
#pragma once

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

/* The CPU and steal time of `task`, the current thread, up to now. */
static __always_inline void times_now(struct lt_thread *st, struct task_struct *task, __u64 now,
				      __u64 *cpu, __u64 *steal)
{
	__u64 cur = steal_now(task);
	__u64 ran = now - st->oncpu_since;
	__u64 oncpu = oncpu_delta(st, now, cur);

	*cpu = st->cpu_acc + oncpu;
	*steal = st->steal_acc + (ran - oncpu);
}

/*
 * The thread runs (this is one of its probes): books that say it is off CPU
 * missed its switch-in. Count it and restart the books from now; a span
 * across it takes its split from the kernel's counters (kernel_times).
 */
static __always_inline void books_check(struct lt_thread *st, struct task_struct *task, __u64 now)
{
	if (!st->off_since)
		return;
	st->sched_unseen++;
	count(LT_CNT_SCHED_UNSEEN);
	st->off_since = 0;
	st->oncpu_since = now;
	st->steal_since = steal_now(task);
}

/* The clock and the current thread's books at one instant. */
struct books_now {
	__u64 now;
	__u64 cpu;
	__u64 steal;
	__u64 runq;
	__u64 stop;
};

/*
 * Reads the books of `task`, the current thread, at `now`, a clock read
 * made after the thread's switch count was `sw`. Uprobe programs run
 * preemptible: a switch between the clock read and the books makes the
 * books newer than the clock, and the wait would be taken for CPU time.
 * Then the clock is read again.
 */
static __always_inline void books_read(struct lt_thread *st, struct task_struct *task, __u32 sw,
				       __u64 now, struct books_now *b)
{
	int i;

	for (i = 0; i < 3; i++) {
		b->now = now;
		books_check(st, task, now);
		times_now(st, task, now, &b->cpu, &b->steal);
		b->runq = st->runq_acc;
		b->stop = st->stop_acc;
		barrier();
		if (*(volatile __u32 *)&st->switches == sw)
			return;
		sw = *(volatile __u32 *)&st->switches;
		barrier();
		now = bpf_ktime_get_ns();
	}
}

/*
 * The kernel's own counters of `t`, the current thread: CPU time
 * (se.sum_exec_runtime, brought up to date at each context switch and
 * scheduler tick, not in between) and run-queue wait (sched_info.run_delay,
 * exact while the thread runs). 0 where the kernel lacks them.
 */
static __always_inline void kernel_times(struct task_struct *t, __u64 *cpu, __u64 *delay)
{
	*cpu = t->se.sum_exec_runtime;
	*delay = 0;
	if (bpf_core_field_exists(t->sched_info))
		*delay = t->sched_info.run_delay;
}

/*
 * The CPU/run-queue/steal split of a span ending at b->now
 * (rec->duration_ns set). Steal seen at a context switch may predate
 * the entry, where the run queue had not accounted it yet: never let that
 * make CPU time negative. A span across a switch the books missed takes its
 * split from the kernel's counters (LT_SPAN_SPLIT_KERNEL).
 */
static __always_inline void span_split(struct lt_thread *st, struct lt_frame *f,
				       struct lt_span_rec *rec, const struct books_now *b)
{
	__u64 kcpu, kdelay, cpu, dur = rec->duration_ns;

	/* Stopped time is measured at the wakeup that ends it, whatever else
	 * the books missed. */
	rec->stopped_ns = b->stop - f->stop_at_start;
	if (rec->stopped_ns > dur)
		rec->stopped_ns = dur;
	dur -= rec->stopped_ns;
	if (st->sched_unseen == f->unseen_at_start) {
		rec->cpu_ns = b->cpu > f->cpu_at_start ? b->cpu - f->cpu_at_start : 0;
		rec->steal_ns = b->steal > f->steal_at_start ? b->steal - f->steal_at_start : 0;
		rec->runq_ns = b->runq - f->runq_at_start;
		return;
	}
	kernel_times(bpf_get_current_task_btf(), &kcpu, &kdelay);
	cpu = kcpu > f->kcpu_at_start ? kcpu - f->kcpu_at_start : 0;
	rec->cpu_ns = cpu < dur ? cpu : dur;
	rec->runq_ns = kdelay > f->kdelay_at_start ? kdelay - f->kdelay_at_start : 0;
	if (rec->runq_ns > dur - rec->cpu_ns)
		rec->runq_ns = dur - rec->cpu_ns;
	/* The kernel's CPU time leaves out what the hypervisor stole
	 * (paravirt steal accounting): the books' steal, bounded, rather than
	 * letting it pass for blocked time. */
	rec->steal_ns = b->steal > f->steal_at_start ? b->steal - f->steal_at_start : 0;
	if (rec->steal_ns > dur - rec->cpu_ns - rec->runq_ns)
		rec->steal_ns = dur - rec->cpu_ns - rec->runq_ns;
	rec->flags |= LT_SPAN_SPLIT_KERNEL;
}
