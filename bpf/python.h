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

/* The code objects whose names (LT_REC_PYCODE) were sent, per process:
 * each is sent once, before the first record that holds a frame of it. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 32768);
	__type(key, struct lt_py_code_key);
	__type(value, __u8);
} lt_py_codes SEC(".maps");

/* Where a thread's Python frames are walked before its record is reserved
 * (the code records they need must come first in the ring buffer): one per
 * CPU and kind of hook, as one may interrupt another (the sampler a
 * uprobe, an interrupt's wakeup a uprobe). */
#define LT_PY_SLOT_SAMPLE 0
#define LT_PY_SLOT_SCHED 1
#define LT_PY_SLOT_PROBE 2
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, struct lt_pystack);
} lt_py_scratch SEC(".maps");

/* Code records sent per stack at most: the others go with a later one. */
#define LT_PY_CODES_PER_STACK 16

/* A str object's characters as stored, at most max bytes, into buf. */
static __always_inline void py_str(const struct lt_py_code_offsets *o, __u64 obj,
				   struct lt_py_str *s, __u8 *buf, __u32 max)
{
	__u32 kind, n, state = 0;
	__s64 len = 0;
	__u64 data;

	s->length = 0;
	s->state = 0;
	s->nbytes = 0;
	if (!obj ||
	    bpf_probe_read_user(&len, sizeof(len), (const void *)(obj + o->unicode_length)) ||
	    bpf_probe_read_user(&state, sizeof(state), (const void *)(obj + o->unicode_state)))
		return;
	s->length = len;
	s->state = state;
	/* interned:2, kind:3, compact:1, ascii:1 (PyASCIIObject.state). */
	kind = (state >> 2) & 7;
	if (!((state >> 5) & 1) || (kind != 1 && kind != 2 && kind != 4) || len <= 0)
		return;
	n = len > max ? max : (__u32)len * kind;
	if (n > max)
		n = max;
	data = obj + (((state >> 6) & 1) ? o->ascii_size : o->compact_size);
	if (!bpf_probe_read_user(buf, n, (const void *)data))
		s->nbytes = n;
}

/* Sends the names of code object k->code of the current process
 * (LT_REC_PYCODE) and remembers it was sent. A global function: verified
 * once, whatever calls it. */
__noinline int py_code_send(__u64 code, __u64 qualname, __u64 linetable, __s32 firstlineno)
{
	struct lt_py_code_key k = {};
	const struct lt_py_code_offsets *o;
	const struct lt_py_proc *p;
	struct lt_py_code_rec *rec;
	__s64 size = 0;
	__u8 one = 1;
	__u32 n;

	k.tgid = bpf_get_current_pid_tgid() >> 32;
	k.firstlineno = firstlineno;
	k.code = code;
	k.qualname = qualname;
	k.linetable = linetable;
	p = bpf_map_lookup_elem(&lt_py_procs, &k.tgid);
	if (!p)
		return 0;
	o = &p->code;
	/* Not a code object (a frame read as it changed): not named again. */
	if (py_read(code + o->ob_type) != p->code_type) {
		bpf_map_update_elem(&lt_py_codes, &k, &one, BPF_ANY);
		return 0;
	}
	rec = bpf_ringbuf_reserve(&lt_events, sizeof(*rec), 0);
	if (!rec) {
		count(LT_CNT_RB_FULL);
		return 0;
	}
	rec->code = code;
	rec->firstlineno = firstlineno;
	py_str(o, qualname, &rec->qualname, rec->qualname_bytes, LT_PY_NAME_BYTES);
	py_str(o, py_read(code + o->filename), &rec->filename, rec->filename_bytes,
	       LT_PY_FILE_BYTES);
	if (!linetable ||
	    bpf_probe_read_user(&size, sizeof(size), (const void *)(linetable + o->bytes_size)))
		size = 0;
	rec->table_size = size;
	n = size <= 0 ? 0 : size > LT_PY_TABLE_BYTES ? LT_PY_TABLE_BYTES : (__u32)size;
	/* (Kept for the verifier: the compiler drops its own bound.) */
	asm volatile("" : "+r"(n));
	if (n > LT_PY_TABLE_BYTES)
		n = LT_PY_TABLE_BYTES;
	if (n && bpf_probe_read_user(rec->table, n, (const void *)(linetable + o->bytes_sval)))
		n = 0;
	rec->table_nbytes = n;
	if (size > n ||
	    rec->qualname.length * ((rec->qualname.state >> 2) & 7) > rec->qualname.nbytes ||
	    rec->filename.length * ((rec->filename.state >> 2) & 7) > rec->filename.nbytes)
		count(LT_CNT_PY_NAME_CUT);
	fill_header(&rec->hdr, LT_REC_PYCODE, sizeof(*rec), bpf_ktime_get_ns());
	/* The record that holds the frame follows and wakes the reader. */
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	bpf_map_update_elem(&lt_py_codes, &k, &one, BPF_ANY);
	return 1;
}

/* A code object's key: its first line, qualname and line table pointers
 * read with one copy (lt_py_code_offsets key_window). */
static __always_inline int py_code_key(const struct lt_py_code_offsets *o, __u64 code,
				       struct lt_py_code_key *k)
{
	__u64 w[LT_PY_CODE_WINDOW / 8];
	__u32 len = o->key_window_len;

	if (!len || len > LT_PY_CODE_WINDOW ||
	    bpf_probe_read_user(w, len, (const void *)(code + o->key_window)))
		return -1;
	/* (The masks keep the verifier's bounds.) */
	k->code = code;
	k->qualname = w[((o->qualname - o->key_window) >> 3) & (LT_PY_CODE_WINDOW / 8 - 1)];
	k->linetable = w[((o->linetable - o->key_window) >> 3) & (LT_PY_CODE_WINDOW / 8 - 1)];
	k->firstlineno =
	    ((__s32 *)w)[((o->firstlineno - o->key_window) >> 2) & (LT_PY_CODE_WINDOW / 4 - 1)];
	return 0;
}

/* Sends the names of the code objects of s's frames the process has not
 * had yet (lt_py_codes), innermost first. */
static __noinline int py_send_codes(const struct lt_pystack *s, const struct lt_py_proc *p)
{
	struct lt_py_code_key k = {};
	__u32 i, n = s->nframes, sent = 0;
	__u64 prev = 0, code;

	k.tgid = bpf_get_current_pid_tgid() >> 32;
	for (i = 0; i < LT_MAX_PYFRAMES && i < n; i++) {
		code = s->frames[i].code & ~LT_PYFRAME_ENTRY;
		/* A recursion's frames: one look. */
		if (!code || code == prev)
			continue;
		prev = code;
		if (py_code_key(&p->code, code, &k) || bpf_map_lookup_elem(&lt_py_codes, &k))
			continue;
		if (sent >= LT_PY_CODES_PER_STACK)
			break;
		sent += py_code_send(k.code, k.qualname, k.linetable, k.firstlineno);
	}
	return 0;
}

/* The current thread's Python frames, walked into the scratch of `slot`
 * with the names their code objects need sent. A global function: verified
 * once per program, not at each of its call sites with their states (the
 * walk made lt_span_return's verification 0.3 s longer). 1 if walked. */
__noinline int py_stack_walk(__u32 slot)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	const struct lt_py_proc *p = bpf_map_lookup_elem(&lt_py_procs, &tgid);
	struct lt_pystack *s = bpf_map_lookup_elem(&lt_py_scratch, &slot);

	if (!p || !s)
		return 0;
	py_walk(s, p);
	py_send_codes(s, p);
	return 1;
}

/* py_stack_walk's frames: then py_copy them into the record. 0 if the
 * scratch is missing. `p`: the current process's interpreter (the walk
 * looks it up again). */
static __always_inline struct lt_pystack *py_stack(const struct lt_py_proc *p, __u32 slot)
{
	if (!p || !py_stack_walk(slot))
		return 0;
	return bpf_map_lookup_elem(&lt_py_scratch, &slot);
}

/* The frames py_stack walked (s, 0 for none) into a record. */
static __always_inline void py_copy(struct lt_pystack *dst, const struct lt_pystack *s)
{
	__u32 n;

	if (!s) {
		dst->nframes = 0;
		dst->flags = LT_PY_NOSTATE;
		return;
	}
	n = s->nframes;
	if (n > LT_MAX_PYFRAMES)
		n = LT_MAX_PYFRAMES;
	bpf_probe_read_kernel(
	    dst, __builtin_offsetof(struct lt_pystack, frames) + n * sizeof(struct lt_pyframe), s);
}

/* The current process's interpreter, if it runs CPython. */
static __always_inline const struct lt_py_proc *py_proc(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (!lt_cfg.python_on)
		return 0;
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
