// SPDX-License-Identifier: GPL-2.0
/*
 * Input channels, part 2: a socket call on a channel, from entry to return,
 * into a record. Included by looptrace.bpf.c, in order.
 */
#pragma once

/* X11 connections: the framing (x11_framing.h) reads the user's buffer. */
#define LT_X11_READ(dst, src, n) bpf_probe_read_user((dst), (n), (src))
#include "looptrace/x11_framing.h"

/* Each X11 connection's framing between reads, by socket inode. A new
 * one starts out of step: tracing may begin inside a message. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, struct lt_x11_state);
} lt_x11_states SEC(".maps");

/* An X11 read's record is built here, then copied out as long as it is. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lt_x11_rec);
} lt_x11_scratch SEC(".maps");

/* Wayland connections: the framing (wayland_framing.h) reads the user's
 * buffers. */
#define LT_WL_READ(dst, src, n) bpf_probe_read_user((dst), (n), (src))
#include "looptrace/wayland_framing.h"

/* Each Wayland connection's framing and input objects, by the client's
 * socket inode. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, struct lt_wl_state);
} lt_wl_states SEC(".maps");

/* A Wayland read's record is built here; a new connection's state starts
 * from the zeros here. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lt_wl_rec);
} lt_wl_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lt_wl_state);
} lt_wl_zero SEC(".maps");

static __always_inline void io_enter(__u32 fd, __u64 buf, __u64 len, __u32 op, const int typed)
{
	struct lt_io_pending p = {};
	struct lt_thread *st = 0;
	__u32 tgid;
	int traced = 1;

	if (!lt_ready || !lt_cfg.input_on)
		return;
	if (lt_cfg.input_tgid_filter) {
		st = thread_state(0);
		if (!st || st->io_traced != 1) {
			tgid = current_ids() >> 32;
			traced = bpf_map_lookup_elem(&lt_tgids, &tgid) != 0;
			if (!traced && !lt_nwatch)
				return;
		}
	}
	if (!classify_fd(fd, traced, &p, typed))
		return;
	if (!st)
		st = thread_state(1);
	if (!st) {
		count(LT_CNT_STORAGE_FAIL);
		return;
	}
	if (traced)
		st->io_traced = 1;
	p.enter_ns = bpf_ktime_get_ns();
	p.buf = buf;
	p.len = len > 0xffffffffull ? 0xffffffffu : (__u32)len;
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

/* The call's fields of an input record. */
static __always_inline void fill_io(struct lt_io_rec *rec, struct lt_thread *st,
				    const struct lt_io_pending *p, __s64 ret, __u64 now, __u32 size)
{
	__u32 d;

	fill_header(&rec->hdr, LT_REC_IO, size, (p->op & LT_IO_SEND) ? p->enter_ns : now);
	rec->enter_ns = p->enter_ns;
	rec->exit_ns = now;
	rec->inode = p->inode;
	rec->peer_inode = p->peer_inode;
	rec->bytes = ret;
	rec->fd = p->fd;
	rec->op = p->op;
	rec->chan = p->chan;
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
	bpf_get_current_comm(rec->comm, sizeof(rec->comm));
}

/* A framed read's record (X11's, Wayland's), built in a per-CPU scratch
 * whose call part is io: out as long as its messages make it. */
static __always_inline void emit_framed(void *rec, struct lt_io_rec *io, __u32 size,
					struct lt_thread *st, struct lt_io_pending *p, __s64 ret,
					__u64 now)
{
	fill_io(io, st, p, ret, now, size);
	__builtin_memset(io->head, 0, sizeof(io->head));
	count(LT_CNT_IO);
	if (bpf_ringbuf_output(&lt_events, rec, size,
			       io_wakeup(bpf_ringbuf_query(&lt_events, BPF_RB_AVAIL_DATA), size)))
		count(LT_CNT_RB_FULL);
}

static long x11_step(__u32 i, void *f) { return lt_x11_step(f); }

/*
 * A read of an X11 connection: its bytes framed into messages, of which
 * only the header fields leave (never a key's code). The framing state
 * carries a message cut by the read's end to the next read. Out of step
 * (tracing began inside a message, an absurd length), nothing is framed
 * until a read drains the socket (returns less than it asked for): the
 * server writes whole messages, so the next read begins with one.
 */
static __noinline void x11_read(struct lt_thread *st, struct lt_io_pending *p, __s64 ret, __u64 now)
{
	struct lt_x11_state fresh = {.lost = 1}, *xs;
	struct lt_x11_rec *rec;
	__u32 zero = 0, n = 0, size, framed = (__u32)ret;
	__u8 was_lost;

	xs = bpf_map_lookup_elem(&lt_x11_states, &p->inode);
	if (!xs) {
		if (bpf_map_update_elem(&lt_x11_states, &p->inode, &fresh, BPF_NOEXIST) ==
		    -LT_E2BIG)
			count(LT_CNT_WATCH_FULL);
		xs = bpf_map_lookup_elem(&lt_x11_states, &p->inode);
		if (!xs)
			return;
	}
	rec = bpf_map_lookup_elem(&lt_x11_scratch, &zero);
	if (!rec)
		return;
	was_lost = xs->lost;
	rec->flags = 0;
	if (!was_lost) {
		struct lt_x11_framing f;

		/* recvmsg: iov[0] only (libxcb passes one); bytes past it
		 * are not seen, so the stream is out of step after them. */
		if (p->len && ret > p->len)
			framed = p->len;
		lt_x11_begin(&f, xs, (const __u8 *)p->buf, framed, rec->msgs);
		bpf_loop(LT_X11_MAX_STEPS, x11_step, &f, 0);
		if (!f.done || framed < ret)
			xs->lost = 1;
		n = (__u32)f.count;
		if (xs->lost)
			rec->flags |= LT_X11_REC_LOST;
	} else {
		rec->flags |= LT_X11_REC_UNFRAMED;
		count(LT_CNT_X11_UNFRAMED);
	}
	if ((__u64)ret < p->len)
		rec->flags |= LT_X11_REC_DRAINED;
	if (xs->lost && (__u64)ret < p->len) {
		xs->lost = 0;
		xs->have = 0;
		xs->skip = 0;
	}
	if (n > LT_X11_MAX_MSGS)
		n = LT_X11_MAX_MSGS;
	rec->nmsgs = n;
	size = __builtin_offsetof(struct lt_x11_rec, msgs) + n * sizeof(struct lt_x11_msg);
	emit_framed(rec, &rec->io, size, st, p, ret, now);
}

static long wl_step(__u32 i, void *f) { return lt_wl_step(f); }

/* The framing state of Wayland connection `inode`, a new one's created
 * from zeros; NULL when the map is full (counted). */
static __always_inline struct lt_wl_state *wl_state_of(__u64 *inode)
{
	struct lt_wl_state *ws = bpf_map_lookup_elem(&lt_wl_states, inode), *zero_state;
	__u32 zero = 0;
	long e;

	if (ws)
		return ws;
	zero_state = bpf_map_lookup_elem(&lt_wl_zero, &zero);
	if (!zero_state)
		return NULL;
	e = bpf_map_update_elem(&lt_wl_states, inode, zero_state, BPF_NOEXIST);
	if (e == -LT_E2BIG)
		count(LT_CNT_WATCH_FULL);
	ws = bpf_map_lookup_elem(&lt_wl_states, inode);
	if (!ws)
		return NULL;
	/* Tracing may begin inside an event; the requests are written from
	 * a message's start (a whole flush). */
	if (!e)
		ws->in.lost = 1;
	return ws;
}

/* A direction of a Wayland connection starts at a message again. */
static __always_inline void wl_restart(struct lt_wl_dir *dir)
{
	dir->lost = 0;
	dir->have = 0;
	dir->skip = 0;
	dir->size = 0;
}

/* The call's `ret` bytes in the buffers (base, len), framed through
 * direction dir of connection ws into f; a direction whose framing is lost
 * is not framed. Sets rec->flags. */
static __always_inline void wl_frame(struct lt_wl_framing *f, struct lt_wl_rec *rec,
				     struct lt_wl_state *ws, struct lt_wl_dir *dir, int send,
				     const __u64 base[2], const __u64 len[2], __s64 ret)
{
	__u64 left = (__u64)ret, off = 0;
	__u32 i;

	rec->flags = 0;
	lt_wl_start(f);
	if (dir->lost) {
		rec->flags |= LT_WL_REC_UNFRAMED;
		count(LT_CNT_X11_UNFRAMED);
		return;
	}
	for (i = 0; i < 2; i++) {
		__u64 n = len[i] < left ? len[i] : left;

		if (!n)
			continue;
		lt_wl_begin(f, ws, send, (const __u8 *)base[i], (__u32)n, (__u32)off, rec->msgs);
		bpf_loop(LT_WL_MAX_STEPS, wl_step, f, 0);
		if (!f->done)
			dir->lost = 1;
		off += n;
		left -= n;
	}
	/* Bytes in a third iovec are not seen. */
	if (left)
		dir->lost = 1;
	if (dir->lost)
		rec->flags |= LT_WL_REC_LOST;
}

/*
 * A call on a Wayland client connection: its bytes framed into messages,
 * both ways. The requests (sends) teach the state which objects are the
 * seat's keyboard, pointer and touch; nothing of them leaves. A read
 * leaves as a record with its input events (kind, time, place; never a
 * key or button code). libwayland moves bytes through a ring buffer:
 * recvmsg and sendmsg get up to two iovecs.
 */
static __noinline void wl_io(struct lt_thread *st, struct lt_io_pending *p, __s64 ret, __u64 now)
{
	struct lt_wl_state *ws;
	struct lt_wl_dir *dir;
	struct lt_wl_rec *rec;
	struct lt_wl_framing f;
	__u64 base[2] = {}, len[2] = {}, cnt, asked;
	__u32 zero = 0, size;
	int send = (p->op & LT_IO_SEND) != 0;

	ws = wl_state_of(&p->inode);
	if (!ws)
		return;
	rec = bpf_map_lookup_elem(&lt_wl_scratch, &zero);
	if (!rec)
		return;
	/* The user's buffers: the first two iovecs of a recvmsg, sendmsg,
	 * readv or writev, or the one buffer of a read or write. Here, not
	 * in a helper: with the count returned by one, the verifier took
	 * three times as long over lt_io_sys_exit (2 s, not 0.7 s). */
	cnt = 1;
	if (p->op & (LT_IO_MSGHDR | LT_IO_IOV)) {
		struct iovec *iov = (struct iovec *)p->buf;
		__u32 i;

		if (p->op & LT_IO_MSGHDR) {
			struct user_msghdr mh;

			if (bpf_probe_read_user(&mh, sizeof(mh), (void *)p->buf))
				return;
			iov = mh.msg_iov;
			cnt = mh.msg_iovlen;
		} else {
			cnt = p->len; /* readv, writev: iovcnt */
		}
		for (i = 0; i < 2; i++) {
			struct iovec v;

			if (i >= cnt || bpf_probe_read_user(&v, sizeof(v), &iov[i]))
				break;
			base[i] = (__u64)v.iov_base;
			len[i] = v.iov_len;
		}
		asked = len[0] + len[1];
	} else {
		base[0] = p->buf;
		len[0] = p->len;
		asked = p->len;
	}
	dir = send ? &ws->out : &ws->in;
	/* A write after one that lost the requests' framing starts at a
	 * message again (a whole flush), unless the last was cut short. */
	if (send && dir->lost)
		wl_restart(dir);
	wl_frame(&f, rec, ws, dir, send, base, len, ret);
	if (send)
		return;
	if (cnt <= 2 && (__u64)ret < asked) {
		rec->flags |= LT_WL_REC_DRAINED;
		/* The server writes whole messages: the next read begins
		 * with one. */
		if (dir->lost)
			wl_restart(dir);
	}
	size = (__u32)f.count;
	if (size > LT_WL_MAX_MSGS)
		size = LT_WL_MAX_MSGS;
	rec->nmsgs = size;
	rec->other = f.other;
	rec->pad = 0;
	size = __builtin_offsetof(struct lt_wl_rec, msgs) + size * sizeof(struct lt_wl_msg);
	emit_framed(rec, &rec->io, size, st, p, ret, now);
}

/* A call's input record: the call, and the first bytes of an InputMessage
 * (head). */
static __always_inline void io_record(struct lt_thread *st, const struct lt_io_pending *p,
				      __s64 ret, __u64 now, const __u8 head[LT_IO_HEAD])
{
	struct lt_io_rec *rec = bpf_ringbuf_reserve(&lt_events, sizeof(*rec), 0);

	if (!rec) {
		count(LT_CNT_RB_FULL);
		return;
	}
	fill_io(rec, st, p, ret, now, sizeof(*rec));
	__builtin_memcpy(rec->head, head, sizeof(rec->head));
	count(LT_CNT_IO);
	bpf_ringbuf_submit(rec, lazy_wakeup(sizeof(*rec)));
}

/* The first user buffer of a socket call into *buf: of a recvmsg/sendmsg
 * or readv/writev, its first iovec's (an X11 call's p->len becomes that
 * iovec's length). Returns nonzero when it cannot be read. */
static __always_inline int first_buffer(struct lt_io_pending *p, __u64 *buf)
{
	struct iovec *iov;
	__u64 len = 0;

	*buf = p->buf;
	if (!(p->op & (LT_IO_MSGHDR | LT_IO_IOV)))
		return 0;
	iov = (struct iovec *)*buf;
	if ((p->op & LT_IO_MSGHDR) &&
	    (bpf_probe_read_user(
		 &iov, sizeof(iov),
		 (void *)(*buf + __builtin_offsetof(struct user_msghdr, msg_iov))) ||
	     !iov))
		return -1;
	if (bpf_probe_read_user(buf, sizeof(*buf), &iov->iov_base))
		return -1;
	if (p->chan == LT_CHAN_X11 && !bpf_probe_read_user(&len, sizeof(len), &iov->iov_len))
		p->len = len > 0xffffffffull ? 0xffffffffu : (__u32)len;
	return 0;
}

/* Whether the `ret` bytes at buf are a whole InputMessage, its first bytes
 * read into head once: constant sizes keep the verifier's bounds; bytes
 * past a short message (a 16-byte FOCUS) stay zero and userspace ignores
 * them. */
static __always_inline int input_message_head(__u64 buf, __s64 ret, __u8 head[LT_IO_HEAD])
{
	__u32 w[4];
	long err = 0;

	if (ret >= LT_IO_HEAD)
		err = bpf_probe_read_user(head, LT_IO_HEAD, (void *)buf);
	else if (ret >= 24)
		err = bpf_probe_read_user(head, 24, (void *)buf);
	else if (ret >= 16)
		err = bpf_probe_read_user(head, 16, (void *)buf);
	else if (ret >= 8)
		err = bpf_probe_read_user(head, 8, (void *)buf);
	/* The filter: only whole InputMessages. */
	__builtin_memcpy(w, head, sizeof(w));
	return !err && lt_input_layout(w[0], w[1], w[2], w[3], ret);
}

/* The peer end of an input channel is watched too: its process may be
 * untraced. The thread remembers the last peer it found watched: a
 * channel's messages after its first cost no map operation (an update
 * takes the bucket's lock even when the entry is there). */
static __always_inline void watch_peer(struct lt_thread *st, const struct lt_io_pending *p)
{
	__u32 w = LT_WATCH_PEER;
	long e;

	if (!p->peer_inode || !lt_cfg.input_tgid_filter || st->io_peer == p->peer_inode)
		return;
	e = bpf_map_update_elem(&lt_chans, &p->peer_inode, &w, BPF_NOEXIST);
	if (!e)
		__sync_fetch_and_add(&lt_nwatch, 1);
	else if (e == -LT_E2BIG)
		count(LT_CNT_WATCH_FULL);
	if (!e || e == -LT_EEXIST)
		st->io_peer = p->peer_inode;
}

/* A call on an X11 client or InputMessage channel: an X11 read is framed
 * (x11_read); an InputMessage's first bytes go into head. Returns whether
 * the call leaves as an input record with that head. */
static __always_inline int message_call(struct lt_thread *st, struct lt_io_pending *p, __s64 ret,
					__u64 now, __u8 head[LT_IO_HEAD])
{
	__u64 buf;

	if (first_buffer(p, &buf))
		return 0;
	if (p->chan == LT_CHAN_X11) {
		/* The client's requests are not input. */
		if (p->op & LT_IO_SEND)
			return 0;
		p->buf = buf;
		x11_read(st, p, ret, now);
		return 0;
	}
	if (!input_message_head(buf, ret, head)) {
		count(LT_CNT_IO_REJECT);
		return 0;
	}
	watch_peer(st, p);
	return 1;
}

static __always_inline void io_exit(__s64 ret)
{
	struct lt_thread *st = thread_state(0);
	struct lt_io_pending p;
	__u8 head[LT_IO_HEAD] = {};
	__u64 now;

	if (!st || !st->io.chan)
		return;
	p = st->io;
	st->io.chan = 0;
	if (ret <= 0 || !lt_ready)
		return;
	now = bpf_ktime_get_ns();
	if (p.chan == LT_CHAN_RAW) {
		/* Raw channels (X11, Wayland): the bytes are not read at all,
		 * only that a read happened; they carry keystrokes, and nothing
		 * uses them. Only what the app reads is input. */
		if (p.op & LT_IO_SEND)
			return;
		mark_consumer(st);
	} else if (p.chan == LT_CHAN_X11_SERVER || p.chan == LT_CHAN_WAYLAND_SERVER) {
		/* An X or Wayland server's writes to a watched client: when,
		 * and how many bytes; its reads (the client's requests) are
		 * not input. */
		if (!(p.op & LT_IO_SEND))
			return;
	} else if (p.chan == LT_CHAN_WAYLAND) {
		wl_io(st, &p, ret, now);
		return;
	} else if (!message_call(st, &p, ret, now, head)) {
		return;
	}
	io_record(st, &p, ret, now, head);
}
