// SPDX-License-Identifier: GPL-2.0
/*
 * Spans: the uprobe/uretprobe pair around dispatch and idle functions (and
 * the point roles: barrier post/remove, enqueue, delivery lag). Included by
 * looptrace.bpf.c, in order.
 */
#pragma once

/* The string a probe's str key points to, into a span record. Read at the
 * end (only slow spans are recorded): an object's name, alive while it is
 * dispatched. LT_SPAN_KEY_STR_CUT when it is longer than the record holds
 * (the byte after the part read is not its end), else 0. */
static __always_inline __u32 read_key_str(char *out, __u32 probe_id, struct lt_frame *f)
{
	__u32 k = lt_cfg.probes[probe_id & (LT_MAX_PROBES - 1)].str_key;
	__u64 ptr;
	char next = 0;
	long n;

	out[0] = 0;
	if (!k || k > LT_MAX_KEYS || (f->key_fault_mask & (1u << (k - 1))))
		return 0;
	ptr = f->keys[(k - 1) & (LT_MAX_KEYS - 1)];
	if (!ptr)
		return 0;
	n = bpf_probe_read_user_str(out, LT_KEY_STR_LEN, (void *)ptr);
	if (n < 0) {
		out[0] = 0;
		return 0;
	}
	/* A full buffer: the string ended there or goes on. */
	if (n == LT_KEY_STR_LEN &&
	    bpf_probe_read_user(&next, 1, (void *)(ptr + LT_KEY_STR_LEN - 1)) == 0 && next)
		return LT_SPAN_KEY_STR_CUT;
	return 0;
}

/* A span whose type key says it handles a display input event: recorded
 * whatever its length, for userspace to match the event to. */
static __always_inline int handles_input(const volatile struct lt_probe_cfg *cfg,
					 struct lt_frame *f)
{
	__u32 k = cfg->input_key;
	__u64 v;

	if (k == 0 || k > LT_MAX_KEYS)
		return 0;
	v = f->keys[(k - 1) & (LT_MAX_KEYS - 1)];
	return v < 64 && ((cfg->input_types >> v) & 1);
}

/* The address of span f's str key's string (cfg's), 0 when it has none or
 * its read faulted. */
static __always_inline __u64 frame_name_ptr(const volatile struct lt_probe_cfg *cfg,
					    struct lt_frame *f)
{
	__u32 k = cfg->str_key;

	if (!k || k > LT_MAX_KEYS || (f->key_fault_mask & (1u << (k - 1))))
		return 0;
	return f->keys[(k - 1) & (LT_MAX_KEYS - 1)];
}

/* Whether the string at ptr (a span's str key) is one of probe probe_id's
 * frame_names: 1 or 0, -1 when it could not be read. A global function:
 * its loops are verified once, not at each state of lt_span_return that
 * reaches them (the probe's names are not known to the verifier there:
 * that took 0.35 s of every attach). */
__noinline int name_is_frame(__u32 probe_id, __u64 ptr)
{
	const volatile struct lt_probe_cfg *cfg = &lt_cfg.probes[probe_id & (LT_MAX_PROBES - 1)];
	char name[LT_FRAME_NAME_LEN];
	__u32 nn = cfg->frame_nnames, j, i;

	if (!ptr || bpf_probe_read_user_str(name, sizeof(name), (void *)ptr) <= 0)
		return -1;
	for (j = 0; j < LT_FRAME_NAMES && j < nn; j++) {
		for (i = 0; i < LT_FRAME_NAME_LEN; i++) {
			if (name[i] != cfg->frame_names[j][i])
				break;
			if (!name[i])
				return 1;
		}
	}
	return 0;
}

/* The value of frame_by key k (index + 1) of span f; 0 for none. */
static __always_inline __u64 frame_by_value(__u32 k, struct lt_frame *f)
{
	if (!k || k > LT_MAX_KEYS)
		return 0;
	return f->keys[(k - 1) & (LT_MAX_KEYS - 1)];
}

/* A span that draws a frame: every span of a frame_all probe, or one whose
 * str key's string is one of the probe's frame_names. Recorded whatever its
 * length (userspace times every frame). Only probes with frame names pay,
 * only for spans below their threshold, and with frame_by keys the name is
 * read once per distinct pair of their values on a thread (the answer
 * remembered in the thread's frame_memo): a dispatch that is no frame pays
 * a few compares. */
static __always_inline int is_frame(struct lt_thread *st, const volatile struct lt_probe_cfg *cfg,
				    struct lt_frame *f, __u32 probe_id)
{
	__u64 a, b;
	__u32 slot;
	int r;

	if (cfg->frame_all)
		return 1;
	if (!cfg->frame_nnames)
		return 0;
	if (!cfg->frame_by[0])
		return name_is_frame(probe_id, frame_name_ptr(cfg, f)) > 0;
	a = frame_by_value(cfg->frame_by[0], f);
	b = frame_by_value(cfg->frame_by[1], f);
	slot = (__u32)((a >> 4) ^ (b >> 4) ^ probe_id) & (LT_FRAME_MEMO - 1);
	if (st->frame_memo[slot].probe == probe_id + 1 && st->frame_memo[slot].by[0] == a &&
	    st->frame_memo[slot].by[1] == b)
		return st->frame_memo[slot].frame;
	r = name_is_frame(probe_id, frame_name_ptr(cfg, f));
	if (r < 0)
		return 0; /* unread: not remembered */
	st->frame_memo[slot].by[0] = a;
	st->frame_memo[slot].by[1] = b;
	st->frame_memo[slot].probe = probe_id + 1;
	st->frame_memo[slot].frame = r;
	return r;
}

/* The message's tag (its msg_tag key's low 32 bits), 0 without one. */
static __always_inline __u32 msg_tag(const volatile struct lt_probe_cfg *cfg, struct lt_frame *f)
{
	__u32 tk = cfg->tag_key;

	if (!tk || tk > LT_MAX_KEYS)
		return 0;
	return (__u32)f->keys[(tk - 1) & (LT_MAX_KEYS - 1)];
}

/* An enqueue: remember the message's due time until it is dispatched. */
static __always_inline void on_enqueue(const volatile struct lt_probe_cfg *cfg, struct lt_frame *f)
{
	struct lt_pending_key key = {};
	struct lt_pending_val val = {};
	__u32 mk = cfg->msg_key, wk = cfg->when_key, qk = cfg->queue_key, fk = cfg->flags_key;

	if (!mk || !wk || mk > LT_MAX_KEYS || wk > LT_MAX_KEYS)
		return;
	key.pid = current_ids() >> 32;
	key.msg = f->keys[(mk - 1) & (LT_MAX_KEYS - 1)];
	key.tag = msg_tag(cfg, f);
	val.when_ns = f->keys[(wk - 1) & (LT_MAX_KEYS - 1)];
	if (qk && qk <= LT_MAX_KEYS)
		val.queue = f->keys[(qk - 1) & (LT_MAX_KEYS - 1)];
	if (fk && fk <= LT_MAX_KEYS)
		val.async = (f->keys[(fk - 1) & (LT_MAX_KEYS - 1)] & cfg->async_mask) != 0;
	val.probe_id = f->probe_id;
	bpf_map_update_elem(&lt_pending, &key, &val, BPF_ANY);
}

/*
 * A dispatch that was due at `due`: its delivery lag (start - due) goes to
 * histogram h and, when slow, through the ring buffer as a DELIVERY span
 * from the due time to the dispatch start.
 */
static __always_inline void deliver(struct lt_thread *st, struct lt_frame *f, struct lt_hist *h,
				    __u64 due, __u32 depth)
{
	struct lt_span_rec *rec;
	__u64 lag;

	lag = f->start_ns > due ? f->start_ns - due : 0;
	hist_add(h, lag);
	if (lt_cfg.delivery_drain_ns) {
		/* Quiet after a report until the lag has drained (Android). */
		if (st->delivery_quiet) {
			if (lag < lt_cfg.delivery_drain_ns)
				st->delivery_quiet = 0;
			if (!h)
				count(LT_CNT_HIST_FULL);
			return;
		}
	}
	if (lag < lt_cfg.slow_ns[LT_ROLE_DELIVERY]) {
		if (!h)
			count(LT_CNT_HIST_FULL);
		return;
	}
	if (lt_cfg.delivery_drain_ns)
		st->delivery_quiet = 1;
	rec = bpf_ringbuf_reserve(&lt_events, sizeof(*rec), 0);
	if (!rec) {
		count(LT_CNT_RB_FULL);
		if (!h)
			count(LT_CNT_HIST_FULL);
		return;
	}
	fill_header(&rec->hdr, LT_REC_SPAN, sizeof(*rec), f->start_ns);
	rec->span_id = f->span_id;
	rec->start_ns = f->start_ns - lag;
	rec->duration_ns = lag;
	rec->cpu_ns = 0;
	rec->runq_ns = 0;
	rec->steal_ns = 0;
	rec->stopped_ns = 0;
	rec->probe_id = f->probe_id;
	rec->role = LT_ROLE_DELIVERY;
	rec->depth = depth;
	rec->key_fault_mask = f->key_fault_mask;
	rec->pad = 0;
	__builtin_memcpy(rec->keys, f->keys, sizeof(rec->keys));
	rec->flags = read_key_str(rec->key_str, f->probe_id, f);
	bpf_get_current_comm(rec->comm, sizeof(rec->comm));
	bpf_ringbuf_submit(rec, rb_flags());
}

/* A dispatch of a message an enqueue probe saw (its due time kept in
 * lt_pending), into the enqueue probe's delivery histogram. */
static __always_inline void on_delivery(struct lt_thread *st,
					const volatile struct lt_probe_cfg *cfg, struct lt_frame *f,
					__u32 depth)
{
	struct lt_pending_key key = {};
	struct lt_pending_val *val;
	struct lt_hist *h;
	__u32 mk = cfg->msg_key;
	__u64 due;

	if (mk > LT_MAX_KEYS)
		return;
	key.pid = current_ids() >> 32;
	key.msg = f->keys[(mk - 1) & (LT_MAX_KEYS - 1)];
	key.tag = msg_tag(cfg, f);
	val = bpf_map_lookup_elem(&lt_pending, &key);
	if (!val) {
		count(LT_CNT_DELIVERY_UNMATCHED);
		return;
	}
	due = val->when_ns;
	h = thread_hist(st, val->probe_id & (LT_MAX_PROBES - 1), LT_ROLE_DELIVERY);
	bpf_map_delete_elem(&lt_pending, &key);
	deliver(st, f, h, due, depth);
}

/* A dispatch whose due time a key read at its entry (GLib's timeout: its
 * GSource's ready time, in us), into its own delivery histogram. A time
 * of 0 or less is none (a source without one). */
static __always_inline void on_due(struct lt_thread *st, const volatile struct lt_probe_cfg *cfg,
				   struct lt_frame *f, __u32 depth)
{
	__u32 k = cfg->due_key;
	__s64 v;

	if (!k || k > LT_MAX_KEYS || (f->key_fault_mask & (1u << (k - 1))))
		return;
	v = (__s64)f->keys[(k - 1) & (LT_MAX_KEYS - 1)];
	if (v <= 0 || (__u64)v > ~0ULL / 1000)
		return;
	deliver(st, f, thread_hist(st, f->probe_id & (LT_MAX_PROBES - 1), LT_ROLE_DELIVERY),
		(__u64)v * cfg->due_scale, depth);
}

/* Emits a point record from a completed frame (keys read at entry); with
 * its caller's stack, and in a CPython process its Python frames after the
 * record. */
static __always_inline void emit_point(void *ctx, struct lt_frame *f, __u32 role, __u64 ret,
				       int with_stack)
{
	const struct lt_py_proc *py = with_stack ? py_proc() : 0;
	struct lt_pystack *pys = py ? py_stack(py, LT_PY_SLOT_PROBE) : 0;
	struct lt_point_rec *rec;
	long n = 0;

	if (py)
		rec = bpf_ringbuf_reserve(&lt_events, sizeof(*rec) + sizeof(struct lt_pystack), 0);
	else
		rec = bpf_ringbuf_reserve(&lt_events, sizeof(*rec), 0);
	if (!rec) {
		count(LT_CNT_RB_FULL);
		return;
	}
	fill_header(&rec->hdr, LT_REC_POINT, sizeof(*rec) + (py ? sizeof(struct lt_pystack) : 0),
		    f->start_ns);
	rec->probe_id = f->probe_id;
	rec->role = role;
	__builtin_memcpy(rec->keys, f->keys, sizeof(rec->keys));
	rec->ret = ret;
	rec->key_fault_mask = f->key_fault_mask;
	if (with_stack) {
		n = bpf_get_stack(ctx, rec->frames, sizeof(rec->frames), BPF_F_USER_STACK);
		if (n < 0) {
			count(LT_CNT_STACK_FAIL);
			n = 0;
		}
	}
	rec->nframes = n / sizeof(__u64);
	if (py)
		py_copy((struct lt_pystack *)(rec + 1), pys);
	bpf_ringbuf_submit(rec, rb_flags());
}

/*
 * Frames of spans that will never return. The kernel keeps a uretprobe
 * instance alive while the stack still holds its frame: a new call at stack
 * pointer `sp` shows every instance entered deeper dead, and one entered at
 * the same place too unless this call is a tail call from it (the return
 * address there is then the uretprobe trampoline, at the start of the
 * process's XOL area). Do as it does (arch_uretprobe_is_alive). Rare: it
 * reads memory only for a frame at the same place.
 */
static __always_inline int is_tail_call(struct task_struct *task, __u64 sp)
{
	struct xol_area *area = BPF_CORE_READ(task, mm, uprobes_state.xol_area);
	__u64 ra = 0;

	if (!area)
		return 0; /* no trampoline yet: nothing can be chained */
	if (bpf_probe_read_user(&ra, sizeof(ra), (void *)sp))
		return 1; /* unknown: keep the frame */
	return ra == BPF_CORE_READ(area, vaddr);
}

/* Tells userspace, at `ts`, that span `span_id` is not recorded: what it
 * sent (samples, blocking points) is dropped with it. */
static __always_inline void emit_span_drop(__u64 span_id, __u64 ts)
{
	struct lt_span_drop_rec *drop = bpf_ringbuf_reserve(&lt_events, sizeof(*drop), 0);

	if (!drop) {
		count(LT_CNT_RB_FULL);
		return;
	}
	fill_header(&drop->hdr, LT_REC_SPAN_DROP, sizeof(*drop), ts);
	drop->span_id = span_id;
	bpf_ringbuf_submit(drop, rb_flags());
}

/* Frame `f` will never return: counted, and what it sent (samples,
 * blocking points) is dropped with it as with a fast span. */
static __always_inline void abandon(struct lt_frame *f)
{
	count(LT_CNT_ABANDONED);
	if (f->sampled)
		emit_span_drop(f->span_id, bpf_ktime_get_ns());
}

static __always_inline void drop_abandoned(struct lt_thread *st, struct task_struct *task, __u64 sp)
{
	__u32 d = st->depth;
	int k;

	for (k = 0; k < LT_MAX_DEPTH; k++) {
		__u64 fsp;

		if (d == 0 || d > LT_MAX_DEPTH)
			break;
		fsp = st->stack[(d - 1) & (LT_MAX_DEPTH - 1)].entry_sp;
		if (fsp > sp || (fsp == sp && is_tail_call(task, sp)))
			break;
		d--;
		/* Unpublished before its drop: a sample taken after the drop
		 * would wait for a span that never ends. */
		st->depth = d;
		barrier();
		abandon(&st->stack[d & (LT_MAX_DEPTH - 1)]);
	}
}

/* Whether a span of probe `id` is in flight on the thread, and the probe
 * wants only its outermost calls: a call then is part of that span. */
static __always_inline int inside_outermost(struct lt_thread *st, __u32 id)
{
	__u32 i;

	if (!(lt_cfg.probes[id & (LT_MAX_PROBES - 1)].flags & LT_PROBE_OUTERMOST))
		return 0;
	for (i = 0; i < LT_MAX_DEPTH; i++) {
		if (i >= st->depth)
			break;
		if (st->stack[i].probe_id == id)
			return 1;
	}
	return 0;
}

/*
 * The entry of every probed function, whatever its role: the attach cookie
 * names the probe, its lt_probe_cfg the role. A dispatch or idle handler
 * pushes a frame; so does a barrier post, reported at its return; an enqueue
 * and a barrier removal are points, their keys read into the next frame
 * slot, which is not pushed; and a dispatch whose probe has a message or due
 * key is also a delivery, its lag measured here.
 *
 * One program for every role, not one per role (docs/abi.md, "Programs and
 * files"): every role needs the same first half (the thread filter, task
 * storage, frames found dead, the outermost check, the key reads), and one
 * function can hold two roles (a dispatch that is also a delivery), so
 * programs per role would each carry that half, or two would run on one
 * call. The roles differ in small tails, each a function above (on_enqueue,
 * on_delivery, on_due, emit_point); a dispatch pays four tests of its
 * probe's configuration for them.
 */
/*
 * The thread's state for a span entry, created if need be; NULL when the
 * thread is not traced or has no storage (counted).
 */
static __always_inline struct lt_thread *span_thread(struct task_struct *task)
{
	struct lt_thread *st = storage_of(task, 0);

	/* Another process (the probes fire in every one), or a thread --tid
	 * or --comm did not select: dropped. A thread remembers the answer;
	 * its process stays in the set until it exits. */
	if ((lt_cfg.span_tgid_filter || lt_cfg.thread_filter || lt_cfg.pidns_ino) &&
	    !(st && st->traced == 1)) {
		if (!span_thread_traced()) {
			if (st)
				st->traced = 2;
			return NULL;
		}
		if (!st)
			st = storage_of(task, 1);
		if (st)
			st->traced = 1;
	}
	if (!st)
		st = storage_of(task, 1);
	if (!st) {
		count(LT_CNT_STORAGE_FAIL);
		return NULL;
	}
	if (!st->oncpu_since) { /* just created: the thread is running now */
		st->oncpu_since = bpf_ktime_get_ns();
		st->steal_since = steal_now(task);
	}
	return st;
}

/* Fills frame f (depth d) of a span of probe_id entered at b->now, at stack
 * pointer sp; its keys are read next (read_keys). */
static __always_inline void start_frame(struct lt_thread *st, struct task_struct *task,
					struct lt_frame *f, const struct books_now *b, __u64 sp,
					__u32 probe_id, __u32 d)
{
	f->start_ns = b->now;
	f->cpu_at_start = b->cpu;
	f->steal_at_start = b->steal;
	f->runq_at_start = b->runq;
	f->stop_at_start = b->stop;
	kernel_times(task, &f->kcpu_at_start, &f->kdelay_at_start);
	f->unseen_at_start = st->sched_unseen;
	f->entry_sp = sp;
	f->ret_addr = 0;
	if (lt_cfg.stack_copy && bpf_probe_read_user(&f->ret_addr, sizeof(f->ret_addr), (void *)sp))
		f->ret_addr = 0;
	f->span_id = ++st->next_span_id;
	f->probe_id = probe_id;
	f->key_fault_mask = 0;
	f->sampled = 0;
	f->nblocks = 0;
	f->flags = 0;
	if (st->input_next && d == 0) {
		f->flags = LT_SPAN_INPUT;
		st->input_next = 0;
	}
}

/* The probe's keys, read at entry into frame f: one that faults is 0, its
 * bit set in the frame's fault mask, and counted. */
static __always_inline void read_keys(struct pt_regs *ctx, struct lt_thread *st,
				      const volatile struct lt_probe_cfg *cfg, struct lt_frame *f)
{
	__u64 regs[8];
	__u32 i;

	if (cfg->nkeys)
		load_regs(ctx, regs);
	for (i = 0; i < LT_MAX_KEYS; i++) {
		if (i >= cfg->nkeys)
			break;
		if (cfg->keys[i].op == LT_KEY_OP_PYCODE) {
			/* An identity if there is one: a callback's data that is
			 * no Python callable is no fault. */
			if (read_key(regs, &cfg->keys[i], &f->keys[i]))
				f->keys[i] = 0;
			f->keys[i] = py_callable_code(st, f->keys[i]);
		} else if (read_key(regs, &cfg->keys[i], &f->keys[i])) {
			f->keys[i] = 0;
			f->key_fault_mask |= 1u << i;
			count(LT_CNT_KEY_FAULT);
		}
	}
}

/* The role's own part of an entry whose frame f (depth d) is filled.
 * Returns whether the frame is pushed: an enqueue and a barrier removal are
 * points, never spans. */
static __always_inline int entry_role(void *ctx, struct lt_thread *st,
				      const volatile struct lt_probe_cfg *cfg, struct lt_frame *f,
				      __u32 d)
{
	if (cfg->role == LT_ROLE_ENQUEUE) {
		on_enqueue(cfg, f);
		return 0;
	}
	if (cfg->msg_key)
		on_delivery(st, cfg, f, d);
	else if (cfg->due_key)
		on_due(st, cfg, f, d);
	/* A barrier removal is a point: reported now, never a span. */
	if (cfg->role == LT_ROLE_BARRIER_REMOVE) {
		emit_point(ctx, f, LT_ROLE_BARRIER_REMOVE, 0, 0);
		return 0;
	}
	return 1;
}

/*
 * The entry of every probed function, whatever its role: the attach cookie
 * names the probe, its lt_probe_cfg the role. A dispatch or idle handler
 * pushes a frame; so does a barrier post, reported at its return; an enqueue
 * and a barrier removal are points, their keys read into the next frame
 * slot, which is not pushed; and a dispatch whose probe has a message or due
 * key is also a delivery, its lag measured here.
 *
 * One program for every role, not one per role (docs/abi.md, "Programs and
 * files"): every role needs the same first half (the thread filter, task
 * storage, frames found dead, the outermost check, the key reads), and one
 * function can hold two roles (a dispatch that is also a delivery), so
 * programs per role would each carry that half, or two would run on one
 * call. The roles differ in small tails, each a function above (on_enqueue,
 * on_delivery, on_due, emit_point); a dispatch pays four tests of its
 * probe's configuration for them.
 */
SEC("uprobe")
int BPF_KPROBE(lt_span_entry)
{
	__u32 probe_id = (__u32)bpf_get_attach_cookie(ctx);
	const volatile struct lt_probe_cfg *cfg;
	struct task_struct *task;
	struct lt_thread *st;
	struct books_now b;
	struct lt_frame *f;
	__u32 d, sw;
	__u64 sp;

	if (!lt_ready || probe_id >= LT_MAX_PROBES)
		return 0;
	probe_id &= LT_MAX_PROBES - 1; /* keeps the verifier's bound */
	/* A call site's entry is its call instruction: its frame is where the
	 * call is about to push the return address, which the exit (a uprobe
	 * there) pops, as a function entry's and its uretprobe's. */
	sp = PT_REGS_SP(ctx);
	if (lt_cfg.probes[probe_id].flags & LT_PROBE_CALL_SITE)
		sp -= 8;
	task = bpf_get_current_task_btf();
	st = span_thread(task);
	if (!st)
		return 0;
	if (st->depth) {
		drop_abandoned(st, task, sp);
		if (inside_outermost(st, probe_id))
			return 0;
	}
	sw = st->switches;
	barrier();
	books_read(st, task, sw, bpf_ktime_get_ns(), &b);
	d = st->depth;
	if (d >= LT_MAX_DEPTH) {
		st->depth = d + 1; /* still paired with its return */
		count(LT_CNT_DEPTH_OVERFLOW);
		return 0;
	}
	f = &st->stack[d];
	start_frame(st, task, f, &b, sp, probe_id, d);
	cfg = &lt_cfg.probes[probe_id];
	if (cfg->flags & LT_PROBE_CALL_SITE)
		f->ret_addr = 0; /* not pushed yet, and no trampoline to mend */
	if (wait_frame(f)) {
		/* No span: an input mark it took stays for the next one. */
		if (f->flags & LT_SPAN_INPUT)
			st->input_next = 1;
		f->flags = 0;
		st->woken_by = 0; /* a wait's own waker, if any */
	}
	read_keys(ctx, st, cfg, f);
	if (cfg->only_key && !f->keys[(cfg->only_key - 1) & (LT_MAX_KEYS - 1)]) {
		/* No span: an input mark it took stays for the next one. */
		if (f->flags & LT_SPAN_INPUT)
			st->input_next = 1;
		return 0;
	}
	if (!entry_role(ctx, st, cfg, f, d))
		return 0;
	/* Publish the frame only once it is complete: the sampler reads it. */
	barrier();
	st->depth = d + 1;
	return 0;
}

/* Fills and sends the record of span `f` (depth `depth`) ending at b->now. */
static __always_inline void submit_span(struct lt_span_rec *rec, struct lt_thread *st,
					struct lt_frame *f, const struct books_now *b,
					__u32 probe_id, __u32 role, __u32 depth, __u32 flags)
{
	fill_header(&rec->hdr, LT_REC_SPAN, sizeof(*rec), b->now);
	rec->span_id = f->span_id;
	rec->start_ns = f->start_ns;
	rec->duration_ns = b->now - f->start_ns;
	rec->flags = flags;
	span_split(st, f, rec, b);
	rec->probe_id = probe_id;
	rec->role = role;
	rec->depth = depth;
	rec->key_fault_mask = f->key_fault_mask;
	rec->pad = 0;
	__builtin_memcpy(rec->keys, f->keys, sizeof(rec->keys));
	rec->flags |= read_key_str(rec->key_str, probe_id, f);
	bpf_get_current_comm(rec->comm, sizeof(rec->comm));
	/* A fast span is only there because of --record-all: nobody waits. */
	if (lt_cfg.record_all && role < LT_ROLE_MAX && rec->duration_ns < lt_cfg.slow_ns[role] &&
	    !flags)
		bpf_ringbuf_submit(rec, lazy_wakeup(sizeof(*rec)));
	else
		bpf_ringbuf_submit(rec, rb_flags());
}

/*
 * The depth of the frame a return at stack pointer `sp` closes, from the
 * top `d`: the frame entered at sp - 8 (the return address is popped by
 * now). Frames entered deeper than it were abandoned (drop_abandoned) and
 * are dropped, each counted. -1 when no frame matches (its entry was not
 * recorded: before the probes were ready). A global function: its loop is
 * verified once, not at each of lt_span_return's states.
 */
__noinline int frame_of_return(struct lt_thread *st, __u32 d, __u64 sp)
{
	__u64 entry_sp = sp - 8;
	int k;

	if (!st)
		return -1;
	for (k = 0; k < LT_MAX_DEPTH; k++) {
		__u64 fsp;

		if (d == 0 || d > LT_MAX_DEPTH)
			return -1;
		fsp = st->stack[(d - 1) & (LT_MAX_DEPTH - 1)].entry_sp;
		if (fsp == entry_sp)
			return d - 1;
		if (fsp > entry_sp)
			return -1; /* the top frame is an outer one's */
		d--;
		st->depth = d; /* before the drop, as in drop_abandoned */
		barrier();
		abandon(&st->stack[d & (LT_MAX_DEPTH - 1)]);
	}
	return -1;
}

/*
 * The frame a return closes, popped: st->depth and *depth become its depth.
 * NULL when no frame is closed: its entry overflowed the stack (counted
 * then) or was not recorded, or it is the return of a call inside an
 * outermost-only span.
 */
static __always_inline struct lt_frame *pop_frame(struct pt_regs *ctx, struct lt_thread *st,
						  __u32 *depth)
{
	__u32 d = st->depth;
	int fd;

	if (d > LT_MAX_DEPTH) {
		st->depth = d - 1;
		return NULL; /* its entry overflowed and was counted then */
	}
	fd = frame_of_return(st, d, PT_REGS_SP(ctx));
	if (fd < 0) {
		/* The return of a call inside an outermost-only span, or of
		 * one its only_key left out (the cookie is read only here, off
		 * the fast path). */
		__u32 id = (__u32)bpf_get_attach_cookie(ctx);

		if (!inside_outermost(st, id) && !lt_cfg.probes[id & (LT_MAX_PROBES - 1)].only_key)
			count(LT_CNT_RET_UNMATCHED);
		return NULL;
	}
	d = fd & (LT_MAX_DEPTH - 1);
	st->depth = d;
	*depth = d;
	return &st->stack[d];
}

/* Whether span `f` of probe_id, role and length dur is recorded: a slow
 * one, or any with --record-all, or one that handles input or draws a
 * frame. */
static __always_inline int span_recorded(struct lt_thread *st, struct lt_frame *f, __u32 probe_id,
					 __u32 role, __u64 dur)
{
	return dur >= lt_cfg.slow_ns[role] || lt_cfg.record_all || (f->flags & LT_SPAN_INPUT) ||
	       handles_input(&lt_cfg.probes[probe_id], f) ||
	       is_frame(st, &lt_cfg.probes[probe_id], f, probe_id);
}

/*
 * A loop's wait for work (probe_id, LT_ROLE_WAIT) ends at `now` after dur:
 * idle time, counted on the thread's histogram of the wait probe. If a
 * thread inside a wake call woke it (lt_sched_waking noted which), the
 * time from that call to now goes to this thread's histogram of the wake
 * probe: how long a wake took to get the loop running. A wake call's own
 * return is nothing to count.
 */
static __always_inline void end_wait(struct lt_thread *st, __u32 probe_id, __u32 role, __u64 now,
				     __u64 dur)
{
	struct lt_hist *h;
	__u32 by;

	if (role != LT_ROLE_WAIT)
		return;
	h = thread_hist(st, probe_id, LT_ROLE_WAIT);
	if (!h)
		count(LT_CNT_HIST_FULL);
	hist_add(h, dur);
	by = st->woken_by;
	st->woken_by = 0;
	if (!by || now < st->wake_call_ns)
		return;
	h = thread_hist(st, by - 1, LT_ROLE_WAKE);
	if (!h)
		count(LT_CNT_HIST_FULL);
	hist_add(h, now - st->wake_call_ns);
}

SEC("uretprobe")
int BPF_KRETPROBE(lt_span_return)
{
	struct lt_span_rec *rec;
	struct lt_thread *st;
	struct books_now b;
	struct lt_frame *f;
	struct lt_hist *h;
	__u32 d = 0, role, sw, probe_id;
	__u64 now, dur;

	if (!lt_ready)
		return 0;
	st = thread_state(0);
	if (!st || !st->depth) {
		/* Another process's return (the probes fire in every process
		 * with the filter on) is not a loss. */
		if (span_thread_traced())
			count(LT_CNT_RET_UNMATCHED);
		return 0;
	}
	sw = st->switches;
	barrier();
	now = bpf_ktime_get_ns();
	f = pop_frame(ctx, st, &d);
	if (!f)
		return 0;
	/* The frame says which probe: no attach cookie on the fast path. */
	probe_id = f->probe_id & (LT_MAX_PROBES - 1);
	dur = now - f->start_ns;
	role = lt_cfg.probes[probe_id].role;
	if (role == LT_ROLE_BARRIER_POST) {
		/* The token is the return value; the stack is the poster's. */
		emit_point(ctx, f, LT_ROLE_BARRIER_POST, PT_REGS_RC(ctx), 1);
		return 0;
	}
	if (role == LT_ROLE_WAIT || role == LT_ROLE_WAKE) {
		end_wait(st, probe_id, role, now, dur);
		return 0;
	}
	if (role >= LT_ROLE_MAX)
		role = LT_ROLE_DISPATCH;

	h = thread_hist(st, probe_id, role);
	hist_add(h, dur);

	if (!span_recorded(st, f, probe_id, role, dur)) {
		if (!h)
			count(LT_CNT_HIST_FULL);
		if (f->sampled)
			emit_span_drop(f->span_id, now);
		return 0;
	}

	rec = bpf_ringbuf_reserve(&lt_events, sizeof(*rec), 0);
	if (!rec) {
		count(LT_CNT_RB_FULL);
		if (!h)
			count(LT_CNT_HIST_FULL);
		return 0;
	}
	books_read(st, bpf_get_current_task_btf(), sw, now, &b);
	submit_span(rec, st, f, &b, probe_id, role, d, f->flags);
	return 0;
}
