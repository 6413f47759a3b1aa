// SPDX-License-Identifier: GPL-2.0
/*
 * Python frames at sample time: the interpreter frame chain of the sampled
 * thread of a CPython process, read from its memory (code object and
 * instruction of each frame; userspace names them). Included by
 * looptrace.bpf.c, in order.
 */
#pragma once

/* Processes running CPython: where their _PyRuntime is and the layout of
 * their interpreter's structures (the loader fills it as it finds them). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct lt_py_proc);
} lt_py_procs SEC(".maps");

/* Bumped by the loader after each process it adds to lt_py_procs: a
 * thread's cached "not there" (lt_thread.py_absent) holds while it stays. */
volatile __u32 lt_py_gen = 0;

/* A thread's PyThreadState (tid -> address), found once by walking the
 * interpreter's thread list, checked at each use. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} lt_py_tstates SEC(".maps");

static __always_inline __u64 py_read(__u64 addr)
{
	__u64 v = 0;

	if (bpf_probe_read_user(&v, sizeof(v), (const void *)addr))
		return 0;
	return v;
}

/* The current thread's PyThreadState, or 0. */
static __noinline __u64 py_tstate(const struct lt_py_proc *p, __u32 tid)
{
	__u64 *cached = bpf_map_lookup_elem(&lt_py_tstates, &tid);
	__u64 ts, interp;
	__u32 i;

	if (cached && *cached && py_read(*cached + p->off.tstate_native_tid) == tid)
		return *cached;
	interp = py_read(p->runtime + p->off.runtime_interp_head);
	if (!interp)
		return 0;
	ts = py_read(interp + p->off.interp_threads_head);
	for (i = 0; i < LT_PY_MAX_THREADS && ts; i++) {
		if (py_read(ts + p->off.tstate_native_tid) == tid) {
			bpf_map_update_elem(&lt_py_tstates, &tid, &ts, BPF_ANY);
			return ts;
		}
		ts = py_read(ts + p->off.tstate_next);
	}
	return 0;
}

/* One interpreter frame's fields, read with one copy of its window: the
 * loader checked that each lies within it, 8-byte aligned but the entry
 * byte (read if has_entry). Returns the previous frame, 0 at the end or
 * when unreadable. */
static __always_inline __u64 py_frame(__u64 fr, const struct lt_py_offsets *o, int has_entry,
				      struct lt_pyframe *out)
{
	__u64 w[LT_PY_FRAME_WINDOW / 8];
	__u32 len = o->frame_window_len;

	out->code = 0;
	out->instr = 0;
	if (!len || len > LT_PY_FRAME_WINDOW ||
	    bpf_probe_read_user(w, len, (const void *)(fr + o->frame_window)))
		return 0;
	/* (The masks keep the verifier's bounds.) */
	out->code = w[(o->frame_code >> 3) & (LT_PY_FRAME_WINDOW / 8 - 1)] & ~LT_PYFRAME_ENTRY;
	if (has_entry && ((__u8 *)w)[o->frame_is_entry & (LT_PY_FRAME_WINDOW - 1)])
		out->code |= LT_PYFRAME_ENTRY;
	out->instr = w[(o->frame_prev_instr >> 3) & (LT_PY_FRAME_WINDOW / 8 - 1)];
	return w[(o->frame_previous >> 3) & (LT_PY_FRAME_WINDOW / 8 - 1)];
}

/* The thread's Python frames into out, innermost first: one read of each
 * frame (py_frame). */
static __noinline int py_walk(struct lt_pystack *out, const struct lt_py_proc *p)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), i;
	struct lt_py_offsets o = p->off;
	int has_entry = o.frame_is_entry != LT_PY_NONE;
	__u64 ts, fr;

	out->nframes = 0;
	out->flags = 0;
	ts = py_tstate(p, tid);
	if (!ts) {
		out->flags = LT_PY_NOSTATE;
		return 0;
	}
	if (o.tstate_cframe != LT_PY_NONE)
		ts = py_read(ts + o.tstate_cframe);
	fr = ts ? py_read(ts + o.cframe_current_frame) : 0;
	/* The four fields as offsets in the window. */
	o.frame_code -= o.frame_window;
	o.frame_previous -= o.frame_window;
	o.frame_prev_instr -= o.frame_window;
	o.frame_is_entry -= o.frame_window;
	for (i = 0; i < LT_MAX_PYFRAMES && fr; i++) {
		fr = py_frame(fr, &o, has_entry, &out->frames[i]);
		out->nframes = i + 1;
	}
	if (fr) {
		out->flags |= LT_PY_CUT;
		count(LT_CNT_PY_CUT);
	}
	return 0;
}

/* The current process's interpreter, if it runs CPython. */
static __always_inline const struct lt_py_proc *py_proc(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	return bpf_map_lookup_elem(&lt_py_procs, &tgid);
}

/* The current process's interpreter as py_proc, for the thread whose state
 * is st: a process without one is looked up once per thread, then again
 * only once the loader has added a process (lt_py_gen). */
static __always_inline const struct lt_py_proc *py_proc_cached(struct lt_thread *st)
{
	const struct lt_py_proc *p;
	__u32 gen = lt_py_gen;

	if (st->py_absent == gen + 1)
		return 0;
	p = py_proc();
	if (!p)
		st->py_absent = gen + 1;
	return p;
}

/* The code object of a Python callable of the current process (a function,
 * or a bound method's function): a loop callback's identity. 0 for a
 * process that runs no CPython looptrace reads, or any other object. st:
 * the thread's state. */
static __noinline __u64 py_callable_code(struct lt_thread *st, __u64 obj)
{
	const struct lt_py_proc *p;
	__u64 type;

	if (!obj)
		return 0;
	p = py_proc_cached(st);
	if (!p || !p->function_type)
		return 0;
	type = py_read(obj + p->off.ob_type);
	if (type && type == p->method_type) {
		obj = py_read(obj + p->off.method_func);
		type = obj ? py_read(obj + p->off.ob_type) : 0;
	}
	if (type != p->function_type)
		return 0;
	return py_read(obj + p->off.func_code);
}
