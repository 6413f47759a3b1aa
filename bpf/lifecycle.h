// SPDX-License-Identifier: GPL-2.0
/*
 * Thread exit, fork and exec: spans cut short, children followed. Included
 * by looptrace.bpf.c, in order.
 */
#pragma once

/*
 * A thread that exits or execs inside spans never returns from them (their
 * uretprobes cannot fire): report each one now, with what it had (its age,
 * CPU split; its samples already crossed the ring buffer), flagged as cut
 * short by `why`, before its task storage goes away. This is the hang of an
 * app killed for hanging.
 */
static __always_inline void cut_short(struct lt_thread *st, __u32 why)
{
	__u32 depth = st->depth, d;
	struct books_now b;

	books_read(st, bpf_get_current_task_btf(), st->switches, bpf_ktime_get_ns(), &b);
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
		submit_span(rec, st, f, &b, f->probe_id, role, d, f->flags | why);
	}
	/* Reported: tracing that stops meanwhile must not report them again. */
	st->depth = 0;
}

/* Every thread's exit, in its own context (do_exit), killed ones included. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(lt_exit, struct task_struct *p)
{
	struct lt_thread *st;
	__u32 tgid = task_ids(p) >> 32;

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
	/* Copied in parts: the whole struct is too large for one inline copy. */
	__builtin_memcpy(cst, pst, __builtin_offsetof(struct lt_thread, stack));
	for (i = 0; i < LT_MAX_DEPTH; i++)
		cst->stack[i] = pst->stack[i];
	cst->io = pst->io;
	cst->oncpu_since = 0;
	cst->off_since = bpf_ktime_get_ns();
	cst->off_runnable = 1;
	for (i = 0; i < 2 * LT_MAX_PROBES; i++) /* a new thread: its own histograms */
		cst->hist_slot[i] = 0;
	cst->input_next = 0;
	cst->io.chan = 0;
	cst->traced = 0; /* its own process: looked up again at its first span */
}

/* A new process. With a target, a traced process's children are traced (a
 * command's helpers, forked servers, a daemon's child), as
 * `perf record -- COMMAND` inherits. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(lt_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid, ctgid, one = 1;

	if (child->pid != child->tgid) /* a thread, not a process */
		return 0;
	if (lt_cfg.span_tgid_filter || lt_cfg.input_tgid_filter) {
		ptgid = task_ids(parent) >> 32;
		ctgid = task_ids(child) >> 32;
		if (!bpf_map_lookup_elem(&lt_tgids, &ptgid))
			return 0;
		long e = bpf_map_update_elem(&lt_tgids, &ctgid, &one, BPF_ANY);

		if (e) { /* not followed: nothing of the parent's is handed over */
			if (e == -LT_E2BIG)
				count(LT_CNT_WATCH_FULL);
			return 0;
		}
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
	__u32 tgid = task_ids(p) >> 32;
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
	for (i = 0; i < 2 * LT_MAX_PROBES; i++)
		st->hist_slot[i] = 0;
	st->delivery_quiet = 0;
	st->input_next = 0;
	st->io.chan = 0;
	/* The names remembered were the old program's callbacks'. */
	for (i = 0; i < LT_FRAME_MEMO; i++)
		st->frame_memo[i].probe = 0;
	return 0;
}
