/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Wayland framing and decoding, the logic over the wire types of
 * wayland_wire.h (which abi.h includes): written once for both sides. The
 * BPF program defines LT_WL_READ with bpf_probe_read_user before including
 * this header, the unit tests with memcpy; without it only the decoding
 * helpers are defined (the loader seeds state with them).
 */
#ifndef LOOPTRACE_WAYLAND_FRAMING_H
#define LOOPTRACE_WAYLAND_FRAMING_H

#include "looptrace/wayland_wire.h"

static inline __u32 lt_wl_u32(const __u8 *p)
{
	return (__u32)p[0] | (__u32)p[1] << 8 | (__u32)p[2] << 16 | (__u32)p[3] << 24;
}

static inline int lt_wl_has(const __u32 *slots, __u32 id)
{
	int i;

	if (id == 0)
		return 0;
	for (i = 0; i < LT_WL_SLOTS; i++)
		if (slots[i] == id)
			return 1;
	return 0;
}

/* Adds id (once); when all slots are taken, the last one is replaced. */
static inline void lt_wl_add(__u32 *slots, __u32 id)
{
	int i;

	if (id == 0 || lt_wl_has(slots, id))
		return;
	for (i = 0; i < LT_WL_SLOTS; i++) {
		if (slots[i] == 0) {
			slots[i] = id;
			return;
		}
	}
	slots[LT_WL_SLOTS - 1] = id;
}

static inline void lt_wl_drop(__u32 *slots, __u32 id)
{
	int i;

	for (i = 0; i < LT_WL_SLOTS; i++)
		if (slots[i] == id)
			slots[i] = 0;
}

/* "wl_seat\0", as wl_registry.global's string argument holds it. */
#define LT_WL_SEAT_W0 0x735f6c77u /* "wl_s" */
#define LT_WL_SEAT_W1 0x00746165u /* "eat\0" */

/*
 * An event whose first min(size, LT_WL_HDR) bytes are in hdr: the input
 * kind it is (with its time in *time), or LT_WL_NONE; what it says about
 * the connection's objects is learned on the way.
 */
static inline __u8 lt_wl_event(struct lt_wl_state *s, const __u8 *hdr, __u32 *time)
{
	__u32 obj = lt_wl_u32(hdr), w1 = lt_wl_u32(hdr + 4);
	__u32 op = w1 & 0xffff, size = w1 >> 16;

	*time = 0;
	if (obj == LT_WL_DISPLAY_ID) {
		/* delete_id(id): the id may be reused for anything. */
		if (op == 1 && size == 12) {
			__u32 id = lt_wl_u32(hdr + 8);

			lt_wl_drop(s->registry, id);
			lt_wl_drop(s->seat, id);
			lt_wl_drop(s->keyboard, id);
			lt_wl_drop(s->pointer, id);
			lt_wl_drop(s->touch, id);
		}
		return LT_WL_NONE;
	}
	if (lt_wl_has(s->registry, obj)) {
		/* global(name, interface, version): "wl_seat" is 8 bytes with
		 * its NUL, so the message is 8 + 4 + 4 + 8 + 4 = 28. */
		if (op == 0 && size == 28 && lt_wl_u32(hdr + 12) == 8 &&
		    lt_wl_u32(hdr + 16) == LT_WL_SEAT_W0 && lt_wl_u32(hdr + 20) == LT_WL_SEAT_W1)
			lt_wl_add(s->seat_name, lt_wl_u32(hdr + 8));
		return LT_WL_NONE;
	}
	if (lt_wl_has(s->keyboard, obj)) {
		/* key(serial, time, key, state) */
		if (op == 3 && size == 24) {
			*time = lt_wl_u32(hdr + 12);
			return lt_wl_u32(hdr + 20) == 0 ? LT_WL_KEY_RELEASE : LT_WL_KEY_PRESS;
		}
		return LT_WL_NONE;
	}
	if (lt_wl_has(s->pointer, obj)) {
		/* motion(time, x, y), button(serial, time, button, state),
		 * axis(time, axis, value) */
		if (op == 2 && size == 20) {
			*time = lt_wl_u32(hdr + 8);
			return LT_WL_MOTION;
		}
		if (op == 3 && size == 24) {
			*time = lt_wl_u32(hdr + 12);
			return lt_wl_u32(hdr + 20) == 0 ? LT_WL_BUTTON_RELEASE : LT_WL_BUTTON_PRESS;
		}
		if (op == 4 && size == 20) {
			*time = lt_wl_u32(hdr + 8);
			return LT_WL_AXIS;
		}
		return LT_WL_NONE;
	}
	if (lt_wl_has(s->touch, obj)) {
		/* down(serial, time, surface, id, x, y), up(serial, time, id),
		 * motion(time, id, x, y) */
		if (op == 0 && size == 32) {
			*time = lt_wl_u32(hdr + 12);
			return LT_WL_TOUCH_DOWN;
		}
		if (op == 1 && size == 20) {
			*time = lt_wl_u32(hdr + 12);
			return LT_WL_TOUCH_UP;
		}
		if (op == 2 && size == 24) {
			*time = lt_wl_u32(hdr + 8);
			return LT_WL_TOUCH_MOTION;
		}
	}
	return LT_WL_NONE;
}

/*
 * A request whose first min(size, LT_WL_HDR) bytes are in hdr; last is its
 * last 4-byte argument (0 if not known): what it creates is learned.
 */
static inline void lt_wl_request(struct lt_wl_state *s, const __u8 *hdr, __u32 last)
{
	__u32 obj = lt_wl_u32(hdr), w1 = lt_wl_u32(hdr + 4);
	__u32 op = w1 & 0xffff, size = w1 >> 16;

	if (obj == LT_WL_DISPLAY_ID) {
		if (op == 1 && size == 12) /* get_registry(new_id) */
			lt_wl_add(s->registry, lt_wl_u32(hdr + 8));
		return;
	}
	if (lt_wl_has(s->registry, obj)) {
		/* bind(name, interface, version, new_id): new_id is last. */
		if (op == 0 && size >= 24 && lt_wl_has(s->seat_name, lt_wl_u32(hdr + 8)))
			lt_wl_add(s->seat, last);
		return;
	}
	if (lt_wl_has(s->seat, obj) && size == 12) {
		__u32 id = lt_wl_u32(hdr + 8);

		if (op == 0)
			lt_wl_add(s->pointer, id);
		else if (op == 1)
			lt_wl_add(s->keyboard, id);
		else if (op == 2)
			lt_wl_add(s->touch, id);
	}
}

#endif /* LOOPTRACE_WAYLAND_FRAMING_H */

/* The framing itself, where the includer says how bytes are read (it may
 * have included this header before, for the decoding helpers only). */
#if defined(LT_WL_READ) && !defined(LOOPTRACE_WL_FRAME)
#define LOOPTRACE_WL_FRAME
/* One framing of a chunk in progress. */
struct lt_wl_framing {
	struct lt_wl_state *s;
	struct lt_wl_dir *d; /* &s->in or &s->out */
	const __u8 *buf;
	struct lt_wl_msg *out; /* LT_WL_MAX_MSGS of them; events only */
	__u32 n;	       /* the chunk's bytes */
	__u32 pos;	       /* framed up to here */
	__u32 base;	       /* the chunk's offset in its read (a second iovec) */
	__s32 count;	       /* input events in out[] */
	__u32 index;	       /* messages ended in the read so far */
	__u32 other;	       /* of them, not input events */
	__u8 send;	       /* requests (else events) */
	__u8 before;	       /* the current message began in an earlier chunk */
	__u8 done;	       /* the chunk is framed (or the stream lost) */
	__u8 pad;
};

/* A message ended at chunk offset f->pos, its header in d->hdr; whole says
 * whether all of it is in this chunk (a request's last argument is read
 * from there). Returns 0, or 1 if the stream is lost. */
static inline int lt_wl_emit(struct lt_wl_framing *f, __u32 size, int whole)
{
	struct lt_wl_dir *d = f->d;
	__u32 time = 0, last = 0;
	__u8 kind;

	f->index++;
	if (f->send) {
		if (whole && size >= 12 && LT_WL_READ(&last, f->buf + f->pos - 4, sizeof(last)))
			return 1;
		lt_wl_request(f->s, d->hdr, last);
		return 0;
	}
	kind = lt_wl_event(f->s, d->hdr, &time);
	if (kind == LT_WL_NONE) {
		f->other++;
		return 0;
	}
	if (f->count >= LT_WL_MAX_MSGS)
		return 1;
	{
		struct lt_wl_msg *m = &f->out[f->count & (LT_WL_MAX_MSGS - 1)];

		m->end = f->base + f->pos;
		m->time = time;
		m->len = (__u16)size;
		m->index = (__u16)(f->index - 1);
		m->kind = kind;
		m->flags = whole ? 0 : LT_WL_STARTED_BEFORE;
		m->pad[0] = 0;
		m->pad[1] = 0;
	}
	f->count++;
	return 0;
}

/* A header's size field: 0 if the stream is out of step. */
static inline __u32 lt_wl_size(const __u8 *hdr)
{
	__u32 size = lt_wl_u32(hdr + 4) >> 16;

	if (size < 8 || size > LT_WL_MAX_SIZE || (size & 3))
		return 0;
	return size;
}

/* One step: a whole message that starts in the chunk, or a message's
 * header or its rest across chunks. Returns 1 (and sets f->done) when the
 * chunk is done. A BPF program runs it under bpf_loop, each step verified
 * once. */
static inline int lt_wl_step(struct lt_wl_framing *f)
{
	struct lt_wl_dir *d = f->d;
	__u32 rem = f->n - f->pos, take, size, want;

	if (f->pos >= f->n)
		goto done;
	/* A message that starts here with its header whole (or all of it):
	 * one read, and the message in one step if it ends in this chunk. */
	if (d->have == 0 && d->skip == 0 && rem >= 8) {
		take = rem < LT_WL_HDR ? rem : LT_WL_HDR;
		if (LT_WL_READ(d->hdr, f->buf + f->pos, take & (2 * LT_WL_HDR - 1)))
			goto lost;
		size = lt_wl_size(d->hdr);
		if (!size)
			goto lost;
		if (size <= rem) {
			f->pos += size;
			if (lt_wl_emit(f, size, 1))
				goto lost;
			return 0;
		}
		/* Its rest comes in the next chunks: the header held is what
		 * was read (the whole chunk when that is under LT_WL_HDR). */
		d->size = (__u16)size;
		d->have = (__u8)take;
		d->skip = size - rem;
		f->pos = f->n;
		goto done;
	}
	/* Its header: the 8 bytes that give its size, then up to
	 * LT_WL_HDR of it. */
	want = d->have < 8 ? 8 : (d->size < LT_WL_HDR ? d->size : LT_WL_HDR);
	if (d->have < want) {
		take = want - d->have;
		if (take > rem)
			take = rem;
		if (take > LT_WL_HDR)
			take = LT_WL_HDR;
		if (LT_WL_READ(d->hdr + (d->have & (LT_WL_HDR - 1)), f->buf + f->pos, take))
			goto lost;
		d->have += take;
		f->pos += take;
		if (d->have == 8 && want == 8) {
			size = lt_wl_size(d->hdr);
			if (!size)
				goto lost;
			d->size = (__u16)size;
			want = size < LT_WL_HDR ? size : LT_WL_HDR;
		}
		if (d->have < want)
			return 0; /* more of it in this chunk, or in the next */
		d->skip = d->size - d->have;
	}
	/* Its rest. */
	rem = f->n - f->pos;
	take = rem < d->skip ? rem : d->skip;
	d->skip -= take;
	f->pos += take;
	if (d->skip)
		goto done;
	if (lt_wl_emit(f, d->size, 0))
		goto lost;
	d->have = 0;
	d->size = 0;
	f->before = 0;
	return 0;
lost:
	d->lost = 1;
done:
	f->done = 1;
	return 1;
}

/* Steps a chunk may need: a message of 8 bytes is one step; one cut by a
 * chunk's end up to three. */
#define LT_WL_MAX_STEPS (LT_WL_MAX_SIZE / 8 + 4)

static inline void lt_wl_begin(struct lt_wl_framing *f, struct lt_wl_state *s, int send,
			       const __u8 *buf, __u32 n, __u32 base, struct lt_wl_msg *out)
{
	f->s = s;
	f->d = send ? &s->out : &s->in;
	f->buf = buf;
	f->out = out;
	f->n = n;
	f->pos = 0;
	f->base = base;
	f->send = (__u8)send;
	f->before = f->d->have > 0 || f->d->skip > 0;
	f->done = f->d->lost;
}

/*
 * Frames the chunk `buf` of `n` bytes of one direction (send: requests,
 * else events), at offset `base` of its read: adds the input events that
 * end in it to out[] from f->count on. f carries counts across the chunks
 * of one read (call lt_wl_start first); s carries a message cut by the
 * chunk's end to the next one. A stream that goes out of step (an absurd
 * size, more events than out[] holds) sets the direction's lost; what
 * came before is framed all the same. LT_WL_READ(dst, src, n), 0 on
 * success, reads the chunk's bytes.
 */
static inline void lt_wl_start(struct lt_wl_framing *f)
{
	f->count = 0;
	f->index = 0;
	f->other = 0;
}

static inline void lt_wl_frame(struct lt_wl_framing *f, struct lt_wl_state *s, int send,
			       const __u8 *buf, __u32 n, __u32 base, struct lt_wl_msg *out)
{
	__u32 i;

	lt_wl_begin(f, s, send, buf, n, base, out);
	for (i = 0; i < LT_WL_MAX_STEPS && !f->done; i++)
		lt_wl_step(f);
	if (!f->done)
		f->d->lost = 1;
}
#endif /* LT_WL_READ */
