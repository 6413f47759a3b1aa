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

/* The thread's Python frames into out, innermost first. */
static __noinline int py_walk(struct lt_pystack *out, const struct lt_py_proc *p)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), i;
	__u64 ts, fr, code;
	__u8 entry;

	out->nframes = 0;
	out->flags = 0;
	ts = py_tstate(p, tid);
	if (!ts) {
		out->flags = LT_PY_NOSTATE;
		return 0;
	}
	if (p->off.tstate_cframe != LT_PY_NONE)
		ts = py_read(ts + p->off.tstate_cframe);
	fr = ts ? py_read(ts + p->off.cframe_current_frame) : 0;
	for (i = 0; i < LT_MAX_PYFRAMES && fr; i++) {
		code = py_read(fr + p->off.frame_code) & ~LT_PYFRAME_ENTRY;
		entry = 0;
		if (p->off.frame_is_entry != LT_PY_NONE)
			bpf_probe_read_user(&entry, 1, (const void *)(fr + p->off.frame_is_entry));
		out->frames[i].code = code | (entry ? LT_PYFRAME_ENTRY : 0);
		out->frames[i].instr = py_read(fr + p->off.frame_prev_instr);
		out->nframes = i + 1;
		fr = py_read(fr + p->off.frame_previous);
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

/* The code object of a Python callable of the current process (a function,
 * or a bound method's function): a loop callback's identity. 0 for a
 * process that runs no CPython looptrace reads, or any other object. */
static __noinline __u64 py_callable_code(__u64 obj)
{
	const struct lt_py_proc *p = py_proc();
	__u64 type;

	if (!p || !obj || !p->function_type)
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
