// SPDX-License-Identifier: GPL-2.0
/*
 * The stack sampler: a cpu-clock perf event on every CPU. Included by
 * looptrace.bpf.c, in order.
 */
#pragma once

/*
 * A sample for unwinding in userspace: the user registers (saved at the
 * kernel entry, whether the timer hit user or kernel code) and as much of
 * the user stack above the stack pointer as can be read, halving the copy
 * until it fits below the end of the mapping. The frame-pointer frames
 * come too: where they are whole they are used as they are.
 */
static __noinline int sample_ustack(struct bpf_perf_event_data *ctx, struct lt_thread *st,
				    __u64 now)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct lt_ustack_rec *rec;
	struct pt_regs *regs;
	struct lt_frame *f;
	__u32 len = lt_cfg.stack_copy;
	__u32 depth, d, i;
	void *sp;
	long n;

	rec = bpf_ringbuf_reserve(&lt_events, sizeof(*rec), 0);
	if (!rec) {
		count(LT_CNT_RB_FULL);
		return 0;
	}
	n = bpf_get_stack(ctx, rec->frames, sizeof(rec->frames), BPF_F_USER_STACK);
	rec->nframes = n > 0 ? n / sizeof(__u64) : 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	rec->regs[0] = BPF_CORE_READ(regs, ax);
	rec->regs[1] = BPF_CORE_READ(regs, dx);
	rec->regs[2] = BPF_CORE_READ(regs, cx);
	rec->regs[3] = BPF_CORE_READ(regs, bx);
	rec->regs[4] = BPF_CORE_READ(regs, si);
	rec->regs[5] = BPF_CORE_READ(regs, di);
	rec->regs[6] = BPF_CORE_READ(regs, bp);
	rec->regs[7] = BPF_CORE_READ(regs, sp);
	rec->regs[8] = BPF_CORE_READ(regs, r8);
	rec->regs[9] = BPF_CORE_READ(regs, r9);
	rec->regs[10] = BPF_CORE_READ(regs, r10);
	rec->regs[11] = BPF_CORE_READ(regs, r11);
	rec->regs[12] = BPF_CORE_READ(regs, r12);
	rec->regs[13] = BPF_CORE_READ(regs, r13);
	rec->regs[14] = BPF_CORE_READ(regs, r14);
	rec->regs[15] = BPF_CORE_READ(regs, r15);
	rec->regs[16] = BPF_CORE_READ(regs, ip);
	sp = (void *)rec->regs[7];
	rec->stack_len = 0;
	/* Constant sizes, for the verifier: 8, 4, 2, then 1 KiB. */
	if (len >= LT_STACK_COPY && !bpf_probe_read_user(rec->stack, LT_STACK_COPY, sp))
		rec->stack_len = LT_STACK_COPY;
	else if (len >= LT_STACK_COPY / 2 &&
		 !bpf_probe_read_user(rec->stack, LT_STACK_COPY / 2, sp))
		rec->stack_len = LT_STACK_COPY / 2;
	else if (len >= LT_STACK_COPY / 4 &&
		 !bpf_probe_read_user(rec->stack, LT_STACK_COPY / 4, sp))
		rec->stack_len = LT_STACK_COPY / 4;
	else if (!bpf_probe_read_user(rec->stack, LT_STACK_COPY / 8, sp))
		rec->stack_len = LT_STACK_COPY / 8;
	if (!rec->nframes && !rec->stack_len) {
		count(LT_CNT_STACK_FAIL);
		bpf_ringbuf_discard(rec, 0);
		return 0;
	}
	depth = st->depth;
	if (depth > LT_MAX_DEPTH)
		depth = LT_MAX_DEPTH;
	rec->nret = depth;
	for (i = 0; i < LT_MAX_DEPTH; i++) {
		if (i >= depth)
			break;
		d = (depth - 1 - i) & (LT_MAX_DEPTH - 1);
		rec->ret_addrs[i] = st->stack[d].ret_addr;
	}
	f = &st->stack[(depth - 1) & (LT_MAX_DEPTH - 1)];
	fill_header(&rec->hdr, LT_REC_USTACK, sizeof(*rec), now);
	rec->span_id = f->span_id;
	rec->probe_id = f->probe_id;
	f->sampled = 1;
	count(LT_CNT_SAMPLES);
	bpf_ringbuf_submit(rec, 0);
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
	if (lt_cfg.stack_copy)
		return sample_ustack(ctx, st, now);
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
