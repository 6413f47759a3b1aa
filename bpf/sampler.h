// SPDX-License-Identifier: GPL-2.0
/*
 * The stack sampler: a cpu-clock perf event on every CPU. Included by
 * looptrace.bpf.c, in order.
 */
#pragma once

/* A sample for unwinding in userspace: the frame-pointer frames (used as
 * they are where they are whole) and the copy of the user stack; then the
 * Python frames in a CPython process (pys, walked by py_stack) or the
 * JavaScript frames in a V8 one (jss, js_stack). */
static __noinline int sample_ustack(struct bpf_perf_event_data *ctx, struct lt_thread *st,
				    struct lt_frame *f, __u64 now, const struct lt_pystack *pys)
{
	const struct lt_jsstack *jss = pys ? 0 : js_stack(js_proc(), LT_JS_SLOT_SAMPLE);
	__u32 size = sizeof(struct lt_ustack_rec);
	struct lt_ustack_rec *rec;
	long n;

	if (pys) {
		size = sizeof(struct lt_py_ustack_rec);
		rec = bpf_ringbuf_reserve(&lt_events, sizeof(struct lt_py_ustack_rec), 0);
	} else if (jss) {
		size = sizeof(struct lt_js_ustack_rec);
		rec = bpf_ringbuf_reserve(&lt_events, sizeof(struct lt_js_ustack_rec), 0);
	} else {
		rec = bpf_ringbuf_reserve(&lt_events, sizeof(struct lt_ustack_rec), 0);
	}
	if (!rec) {
		count(LT_CNT_RB_FULL);
		return 0;
	}
	n = bpf_get_stack(ctx, rec->s.frames, sizeof(rec->s.frames), BPF_F_USER_STACK);
	rec->s.nframes = n > 0 ? n / sizeof(__u64) : 0;
	if (!fill_ucopy(&rec->u, st) && !rec->s.nframes) {
		count(LT_CNT_STACK_FAIL);
		bpf_ringbuf_discard(rec, 0);
		return 0;
	}
	if (pys)
		py_copy(&((struct lt_py_ustack_rec *)rec)->py, pys);
	else if (jss)
		js_copy(&((struct lt_js_ustack_rec *)rec)->js, jss);
	fill_header(&rec->s.hdr, LT_REC_USTACK, size, now);
	rec->s.span_id = f->span_id;
	rec->s.probe_id = f->probe_id;
	f->sampled = 1;
	count(LT_CNT_SAMPLES);
	bpf_ringbuf_submit(rec, 0);
	return 0;
}

/* Stack sampler: a cpu-clock perf event on every CPU. */
SEC("perf_event")
int lt_sample(struct bpf_perf_event_data *ctx)
{
	const struct lt_py_proc *py;
	struct lt_pystack *pys = 0;
	struct lt_jsstack *jss = 0;
	struct lt_sample_rec *rec;
	struct lt_thread *st;
	__u32 size;
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
	if (wait_frame(f))
		return 0;
	now = bpf_ktime_get_ns();
	if (now - f->start_ns < lt_cfg.sample_after_ns)
		return 0;
	py = py_proc_cached(st);
	if (py)
		pys = py_stack(py, LT_PY_SLOT_SAMPLE);
	if (lt_cfg.stack_copy)
		return sample_ustack(ctx, st, f, now, pys);
	if (!pys)
		jss = js_stack(js_proc(), LT_JS_SLOT_SAMPLE);
	size = pys   ? sizeof(struct lt_py_sample_rec)
	       : jss ? sizeof(struct lt_js_sample_rec)
		     : sizeof(*rec);
	if (pys)
		rec = bpf_ringbuf_reserve(&lt_events, sizeof(struct lt_py_sample_rec), 0);
	else if (jss)
		rec = bpf_ringbuf_reserve(&lt_events, sizeof(struct lt_js_sample_rec), 0);
	else
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
	if (pys)
		py_copy(&((struct lt_py_sample_rec *)rec)->py, pys);
	else if (jss)
		js_copy(&((struct lt_js_sample_rec *)rec)->js, jss);
	fill_header(&rec->hdr, LT_REC_SAMPLE, size, now);
	rec->span_id = f->span_id;
	rec->probe_id = f->probe_id;
	rec->nframes = n / sizeof(__u64);
	f->sampled = 1;
	count(LT_CNT_SAMPLES);
	bpf_ringbuf_submit(rec, 0);
	return 0;
}
