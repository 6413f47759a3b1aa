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

/* The current thread's CPU and steal time up to now (it is running). */
static __always_inline void times_now(struct lt_thread *st, __u64 now, __u64 *cpu, __u64 *steal)
{
	__u64 cur = steal_now(bpf_get_current_task_btf());
	__u64 ran = now - st->oncpu_since;
	__u64 oncpu = oncpu_delta(st, now, cur);

	*cpu = st->cpu_acc + oncpu;
	*steal = st->steal_acc + (ran - oncpu);
}
