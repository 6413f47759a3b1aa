// SPDX-License-Identifier: GPL-2.0
/*
 * JavaScript frames at sample time: the frame-pointer chain of a V8 (Node)
 * thread walked from its user registers, each JavaScript frame's function
 * (SharedFunctionInfo) and bytecode position read from its slots with the
 * layout the V8 build describes itself (lt_v8_proc; userspace names them).
 * Included by looptrace.bpf.c, in order.
 */
#pragma once

/* Processes running V8: where their frames keep what they run (the loader
 * fills it as it finds them). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct lt_v8_proc);
} lt_v8_procs SEC(".maps");

/* Where a thread's JavaScript frames are walked before its record is
 * reserved: one per CPU and hook (the sampler may interrupt the switch). */
#define LT_JS_SLOT_SAMPLE 0
#define LT_JS_SLOT_SCHED 1
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct lt_jsstack);
} lt_js_scratch SEC(".maps");

/* A walk's state between the steps of bpf_loop. */
struct js_walk_ctx {
	struct lt_v8_proc p;
	__u64 fp;
	__u64 pc;
	__u32 slot; /* the scratch walked into */
	__u32 n;    /* JavaScript frames found */
};

/* One frame of the walk: its window read in one copy and, when its marker
 * slot holds a context (a heap object, not a Smi frame type), its
 * function's SharedFunctionInfo. 1 ends the walk. */
static int js_step(__u32 index, void *data)
{
	struct js_walk_ctx *c = data;
	struct lt_jsstack *out = bpf_map_lookup_elem(&lt_js_scratch, &c->slot);
	__u64 w[LT_JS_WINDOW / 8];
	__u64 marker, fn, next, sfi = 0;
	__u32 len = c->p.window_len, n = c->n;
	struct lt_jsframe *f;

	/* (Kept for the verifier.) */
	asm volatile("" : "+r"(len));
	if (!out || !c->fp || !len || len > LT_JS_WINDOW ||
	    bpf_probe_read_user(w, len, (const void *)(c->fp + c->p.window)))
		return 1;
	marker = w[c->p.slot_marker & (LT_JS_WINDOW / 8 - 1)];
	fn = w[c->p.slot_function & (LT_JS_WINDOW / 8 - 1)];
	if ((marker & c->p.heap_object_tag_mask) == c->p.heap_object_tag &&
	    (fn & c->p.heap_object_tag_mask) == c->p.heap_object_tag) {
		if (n >= LT_MAX_JSFRAMES) {
			out->flags |= LT_JS_CUT;
			count(LT_CNT_JS_CUT);
			return 1;
		}
		bpf_probe_read_user(
		    &sfi, sizeof(sfi),
		    (const void *)(fn - c->p.heap_object_tag + c->p.js_function_shared));
		f = &out->frames[n];
		f->pc = c->pc;
		f->sfi = sfi;
		f->function = fn;
		f->bytecode_array = w[c->p.slot_bytecode_array & (LT_JS_WINDOW / 8 - 1)];
		f->bytecode_offset = w[c->p.slot_bytecode_offset & (LT_JS_WINDOW / 8 - 1)];
		c->n = ++n;
		out->nframes = n;
	}
	next = w[c->p.slot_saved_fp & (LT_JS_WINDOW / 8 - 1)];
	c->pc = w[c->p.slot_ret & (LT_JS_WINDOW / 8 - 1)];
	/* The stack grows down: a caller's frame is above. */
	if (next <= c->fp)
		return 1;
	c->fp = next;
	return 0;
}

/* The current thread's JavaScript frames into the scratch of `slot`,
 * innermost first: the frame-pointer chain from its user registers (the
 * kernel's own walk, so each frame's pc is one of the stack's), one step
 * per frame (bpf_loop: verified once). The walk ends where the chain does
 * (native code built without frame pointers, the stack's base) or after
 * LT_JS_WALK frames. */
static __always_inline void js_walk(struct lt_jsstack *out, const struct lt_v8_proc *p, __u32 slot)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	struct js_walk_ctx c = {};

	out->nframes = 0;
	out->flags = 0;
	c.p = *p;
	c.fp = BPF_CORE_READ(regs, bp);
	c.pc = BPF_CORE_READ(regs, ip);
	c.slot = slot;
	bpf_loop(LT_JS_WALK, js_step, &c, 0);
}

/* The current thread's JavaScript frames, walked into the scratch of `slot`.
 * A global function: verified once per program. 1 if walked. */
__noinline int js_stack_walk(__u32 slot)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	const struct lt_v8_proc *p = bpf_map_lookup_elem(&lt_v8_procs, &tgid);
	struct lt_jsstack *s = bpf_map_lookup_elem(&lt_js_scratch, &slot);

	if (!p || !s)
		return 0;
	js_walk(s, p, slot);
	return 1;
}

/* The current process's V8 layout, if it runs V8 looptrace reads. */
static __always_inline const struct lt_v8_proc *js_proc(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (!lt_cfg.v8_on)
		return 0;
	return bpf_map_lookup_elem(&lt_v8_procs, &tgid);
}

/* js_stack_walk's frames (then js_copy them into the record); 0 if none. */
static __always_inline struct lt_jsstack *js_stack(const struct lt_v8_proc *p, __u32 slot)
{
	if (!p || !js_stack_walk(slot))
		return 0;
	return bpf_map_lookup_elem(&lt_js_scratch, &slot);
}

/* The frames js_stack walked (s, 0 for none) into a record. */
static __always_inline void js_copy(struct lt_jsstack *dst, const struct lt_jsstack *s)
{
	__u32 n, size;

	if (!s) {
		dst->nframes = 0;
		dst->flags = 0;
		return;
	}
	n = s->nframes;
	if (n > LT_MAX_JSFRAMES)
		n = LT_MAX_JSFRAMES;
	size = __builtin_offsetof(struct lt_jsstack, frames) + n * sizeof(struct lt_jsframe);
	/* (A bound the verifier keeps: LT_MAX_JSFRAMES is no power of 2.) */
	asm volatile("" : "+r"(size));
	if (size > sizeof(struct lt_jsstack))
		size = sizeof(struct lt_jsstack);
	bpf_probe_read_kernel(dst, size, s);
}
