// SPDX-License-Identifier: GPL-2.0
/*
 * Input channels, part 2: a socket call on a channel, from entry to return,
 * into a record. Included by looptrace.bpf.c, in order.
 */
#pragma once

static __always_inline void io_enter(__u32 fd, __u64 buf, __u32 op, const int typed)
{
	struct lt_io_pending p = {};
	struct lt_thread *st;
	__u32 tgid;
	int traced = 1;

	if (!lt_ready || !lt_cfg.input_on)
		return;
	if (lt_cfg.input_tgid_filter) {
		tgid = bpf_get_current_pid_tgid() >> 32;
		traced = bpf_map_lookup_elem(&lt_tgids, &tgid) != 0;
		if (!traced && !lt_nwatch)
			return;
	}
	if (!classify_fd(fd, traced, &p, typed))
		return;
	st = thread_state(1);
	if (!st) {
		count(LT_CNT_STORAGE_FAIL);
		return;
	}
	p.enter_ns = bpf_ktime_get_ns();
	p.buf = buf;
	p.fd = fd;
	p.op = op;
	st->io = p;
}

/* A raw-channel read: the span in flight consumes it, or the next one. */
static __always_inline void mark_consumer(struct lt_thread *st)
{
	__u32 d = st->depth;

	if (d == 0) {
		st->input_next = 1;
		return;
	}
	if (d > LT_MAX_DEPTH)
		d = LT_MAX_DEPTH;
	st->stack[(d - 1) & (LT_MAX_DEPTH - 1)].flags |= LT_SPAN_INPUT;
}

static __always_inline void io_exit(__s64 ret)
{
	struct lt_thread *st = thread_state(0);
	struct lt_io_pending p;
	struct lt_io_rec *rec;
	__u8 head[LT_IO_HEAD] = {};
	__u64 buf, now;
	__u32 w[4];
	__u32 d;
	long err = 0;

	if (!st || !st->io.chan)
		return;
	p = st->io;
	st->io.chan = 0;
	if (ret <= 0 || !lt_ready)
		return;
	now = bpf_ktime_get_ns();
	/* Raw channels (X11, Wayland): the bytes are not read at all, only
	 * that a read happened; they carry keystrokes, and nothing uses them. */
	if (p.chan == LT_CHAN_RAW) {
		if (p.op & LT_IO_SEND)
			return; /* only what the app reads is input */
		mark_consumer(st);
		goto record;
	}
	buf = p.buf;
	if (p.op & LT_IO_MSGHDR) {
		struct iovec *iov = 0;

		if (bpf_probe_read_user(
			&iov, sizeof(iov),
			(void *)(buf + __builtin_offsetof(struct user_msghdr, msg_iov))) ||
		    !iov)
			return;
		if (bpf_probe_read_user(&buf, sizeof(buf), &iov->iov_base))
			return;
	}
	/* The message's first bytes, read once: constant sizes keep the
	 * verifier's bounds; bytes past a short message (a 16-byte FOCUS) stay
	 * zero and userspace ignores them. */
	if (ret >= LT_IO_HEAD)
		err = bpf_probe_read_user(head, LT_IO_HEAD, (void *)buf);
	else if (ret >= 16)
		err = bpf_probe_read_user(head, 16, (void *)buf);
	else if (ret >= 8)
		err = bpf_probe_read_user(head, 8, (void *)buf);
	/* The filter: only whole InputMessages. */
	__builtin_memcpy(w, head, sizeof(w));
	if (err || !lt_input_layout(w[0], w[1], w[2], w[3], ret)) {
		count(LT_CNT_IO_REJECT);
		return;
	}
	/* The peer end is watched too: its process may be untraced. */
	if (p.peer_inode && lt_cfg.input_tgid_filter) {
		__u32 w = LT_WATCH_PEER;

		long e = bpf_map_update_elem(&lt_chans, &p.peer_inode, &w, BPF_NOEXIST);

		if (!e)
			__sync_fetch_and_add(&lt_nwatch, 1);
		else if (e == -LT_E2BIG)
			count(LT_CNT_WATCH_FULL);
	}
record:
	rec = bpf_ringbuf_reserve(&lt_events, sizeof(*rec), 0);
	if (!rec) {
		count(LT_CNT_RB_FULL);
		return;
	}
	fill_header(&rec->hdr, LT_REC_IO, sizeof(*rec), (p.op & LT_IO_SEND) ? p.enter_ns : now);
	rec->enter_ns = p.enter_ns;
	rec->exit_ns = now;
	rec->inode = p.inode;
	rec->peer_inode = p.peer_inode;
	rec->bytes = ret;
	rec->fd = p.fd;
	rec->op = p.op;
	rec->chan = p.chan;
	d = st->depth;
	rec->depth = d;
	rec->span_start_ns = 0;
	rec->span_id = 0;
	rec->span_probe = 0;
	rec->pad = 0;
	if (d > 0) {
		struct lt_frame *f;

		if (d > LT_MAX_DEPTH)
			d = LT_MAX_DEPTH;
		f = &st->stack[(d - 1) & (LT_MAX_DEPTH - 1)];
		rec->span_start_ns = f->start_ns;
		rec->span_id = f->span_id;
		rec->span_probe = f->probe_id;
	}
	__builtin_memcpy(rec->head, head, sizeof(rec->head));
	bpf_get_current_comm(rec->comm, sizeof(rec->comm));
	count(LT_CNT_IO);
	bpf_ringbuf_submit(rec, bpf_ringbuf_query(&lt_events, BPF_RB_AVAIL_DATA) >=
					lt_cfg.io_wakeup_bytes
				    ? BPF_RB_FORCE_WAKEUP
				    : BPF_RB_NO_WAKEUP);
}
