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
		st->off_runnable = task_state(prev) == 0; /* TASK_RUNNING: preempted */
	}
	st = bpf_task_storage_get(&lt_threads, next, 0, 0);
	if (st) {
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
