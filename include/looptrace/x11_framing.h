/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * X11 framing and decoding, the logic over the wire types of
 * x11_wire.h (which abi.h includes): written once for both sides. The
 * BPF program defines LT_X11_READ with bpf_probe_read_user before including
 * this header, the unit tests with memcpy; without it only the decoding
 * helpers are defined (the loader seeds state with them).
 */
#ifndef LOOPTRACE_X11_FRAMING_H
#define LOOPTRACE_X11_FRAMING_H

#include "looptrace/x11_wire.h"

static inline __u32 lt_x11_u32(const __u8 *p)
{
	return (__u32)p[0] | (__u32)p[1] << 8 | (__u32)p[2] << 16 | (__u32)p[3] << 24;
}

static inline __u16 lt_x11_u16(const __u8 *p) { return (__u16)(p[0] | p[1] << 8); }

/* The message whose header st->hdr holds, ending at chunk offset `end`. */
static inline void lt_x11_decode(const struct lt_x11_state *st, __u32 end, __u32 len,
				 __u8 started_before, struct lt_x11_msg *m)
{
	__u8 t = st->hdr[0] & 0x7f;

	m->end = end;
	m->len = len;
	m->type = t;
	m->flags =
	    (st->hdr[0] & 0x80 ? LT_X11_SENT : 0) | (started_before ? LT_X11_STARTED_BEFORE : 0);
	m->seq = lt_x11_u16(st->hdr + 2);
	m->time = 0;
	m->ext = 0;
	m->evtype = 0;
	m->pad = 0;
	if (t >= LT_X11_KEY_PRESS && t <= LT_X11_MOTION_NOTIFY) {
		m->time = lt_x11_u32(st->hdr + 4);
	} else if (t == LT_X11_GENERIC) {
		m->ext = st->hdr[1];
		m->evtype = lt_x11_u16(st->hdr + 8);
		m->time = lt_x11_u32(st->hdr + 12);
	}
}

#endif /* LOOPTRACE_X11_FRAMING_H */

/* The framing itself, where the includer says how bytes are read (it may
 * have included this header before, for the decoding helpers only). */
#if defined(LT_X11_READ) && !defined(LOOPTRACE_X11_FRAME)
#define LOOPTRACE_X11_FRAME
/* One framing of a chunk in progress. */
struct lt_x11_framing {
	struct lt_x11_state *st;
	const __u8 *buf;
	struct lt_x11_msg *out; /* LT_X11_MAX_MSGS of them */
	__u32 n;		/* the chunk's bytes */
	__u32 pos;		/* framed up to here */
	__s32 count;		/* messages in out[] */
	__u8 before;		/* the current message began in an earlier chunk */
	__u8 done;		/* the chunk is framed (or the stream lost) */
	__u8 pad[2];
};

/* One step: a whole message whose header starts in the chunk, or a
 * message's header or its rest across chunks; at most two per message.
 * Returns 1 (and sets f->done) when the chunk is done. A BPF program runs
 * it under bpf_loop, each step verified once. */
static inline int lt_x11_step(struct lt_x11_framing *f)
{
	struct lt_x11_state *st = f->st;
	__u32 take, len;

	/* A message that starts here with its header whole: one read of the
	 * header, and the message in one step if it ends in this chunk. */
	if (st->have == 0 && st->skip == 0 && f->n - f->pos >= LT_X11_HDR) {
		if (LT_X11_READ(st->hdr, f->buf + f->pos, LT_X11_HDR))
			goto lost;
		len = 32;
		if (st->hdr[0] == LT_X11_REPLY || (st->hdr[0] & 0x7f) == LT_X11_GENERIC) {
			__u32 units = lt_x11_u32(st->hdr + 4);

			if (units > LT_X11_MAX_UNITS)
				goto lost;
			len += 4 * units;
		}
		if (len > f->n - f->pos) {
			/* Its rest comes in the next chunks. */
			st->have = LT_X11_HDR;
			st->skip = len - (f->n - f->pos);
			f->pos = f->n;
			goto done;
		}
		if (f->count >= LT_X11_MAX_MSGS)
			goto lost;
		f->pos += len;
		lt_x11_decode(st, f->pos, len, 0, &f->out[f->count & (LT_X11_MAX_MSGS - 1)]);
		f->count++;
		return 0;
	}
	if (st->have == LT_X11_HDR) {
		take = f->n - f->pos < st->skip ? f->n - f->pos : st->skip;
		st->skip -= take;
		f->pos += take;
		if (st->skip)
			goto done; /* its rest is in the next chunk */
		if (f->count >= LT_X11_MAX_MSGS)
			goto lost;
		len = st->hdr[0] == LT_X11_REPLY || (st->hdr[0] & 0x7f) == LT_X11_GENERIC
			  ? 32 + 4 * lt_x11_u32(st->hdr + 4)
			  : 32;
		lt_x11_decode(st, f->pos, len, f->before,
			      &f->out[f->count & (LT_X11_MAX_MSGS - 1)]);
		f->count++;
		st->have = 0;
		f->before = 0;
		return 0;
	}
	if (f->pos >= f->n)
		goto done;
	take = LT_X11_HDR - (st->have & (LT_X11_HDR - 1));
	if (take > f->n - f->pos)
		take = f->n - f->pos;
	if (take > LT_X11_HDR)
		take = LT_X11_HDR;
	if (LT_X11_READ(st->hdr + (st->have & (LT_X11_HDR - 1)), f->buf + f->pos, take))
		goto lost;
	st->have += take;
	f->pos += take;
	if (st->have < LT_X11_HDR)
		goto done; /* its header ends in the next chunk */
	st->skip = 32 - LT_X11_HDR;
	if (st->hdr[0] == LT_X11_REPLY || (st->hdr[0] & 0x7f) == LT_X11_GENERIC) {
		__u32 units = lt_x11_u32(st->hdr + 4);

		if (units > LT_X11_MAX_UNITS)
			goto lost;
		st->skip += 4 * units;
	}
	return 0;
lost:
	st->lost = 1;
done:
	f->done = 1;
	return 1;
}

/* Steps a chunk may need: two per message, and the last. */
#define LT_X11_MAX_STEPS (2 * LT_X11_MAX_MSGS + 2)

static inline void lt_x11_begin(struct lt_x11_framing *f, struct lt_x11_state *st, const __u8 *buf,
				__u32 n, struct lt_x11_msg *out)
{
	f->st = st;
	f->buf = buf;
	f->out = out;
	f->n = n;
	f->pos = 0;
	f->count = 0;
	f->before = st->have > 0 || st->skip > 0;
	f->done = st->lost;
}

/*
 * Frames the chunk `buf` of `n` bytes (little-endian server): fills out[]
 * with the messages that end in it, at most LT_X11_MAX_MSGS, and returns
 * how many; st carries a message cut by the chunk's end to the next one.
 * A stream that goes out of step (an absurd length, more messages than
 * out[] holds) sets st->lost; what came before is framed all the same.
 * LT_X11_READ(dst, src, n), 0 on success, reads the chunk's bytes.
 */
static inline int lt_x11_frame(struct lt_x11_state *st, const __u8 *buf, __u32 n,
			       struct lt_x11_msg *out)
{
	struct lt_x11_framing f;
	__u32 i;

	lt_x11_begin(&f, st, buf, n, out);
	for (i = 0; i < LT_X11_MAX_STEPS && !f.done; i++)
		lt_x11_step(&f);
	if (!f.done)
		st->lost = 1;
	return f.count;
}
#endif /* LT_X11_READ */
