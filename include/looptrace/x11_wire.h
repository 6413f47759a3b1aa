/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * X11 framing of a server-to-client byte stream (docs/input.md, "Design:
 * display-server channels"): the reads of a connection, chunk by chunk,
 * into whole messages, of which only the header fields the analysis uses
 * leave: type, sequence number, length, a GenericEvent's extension and
 * event type, and an input event's server time. Never a core key event's
 * keycode (byte 1, "detail").
 *
 * Written once for both sides: the BPF program defines LT_X11_READ with
 * bpf_probe_read_user, the unit tests with memcpy. A message of the X11
 * protocol is at least 32 bytes: 32 for events and errors, 32 + 4 x length
 * for a reply (type 1) and a GenericEvent (type 35), length in bytes 4-7.
 */
#ifndef LOOPTRACE_X11_WIRE_H
#define LOOPTRACE_X11_WIRE_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#ifndef LT_X11_READ
#error "define LT_X11_READ(dst, src, n): 0 on success"
#endif

/* Header bytes a message's fields come from. */
#define LT_X11_HDR 16
/* Messages a chunk can give at most; the rest of the chunk is skipped and
 * the stream loses its framing (counted by the caller). */
#define LT_X11_MAX_MSGS 64
/* A reply or GenericEvent longer than this (in 4-byte units past 32
 * bytes) is taken as a stream out of step: 64 MiB. */
#define LT_X11_MAX_UNITS (1u << 24)

#define LT_X11_ERROR 0
#define LT_X11_REPLY 1
#define LT_X11_KEY_PRESS 2
#define LT_X11_MOTION_NOTIFY 6
#define LT_X11_GENERIC 35

/* The framing of one connection between chunks. */
struct lt_x11_state {
	__u32 skip; /* bytes of the current message past its header to come */
	__u8 have;  /* header bytes of the current message held */
	__u8 lost;  /* out of step: nothing more is framed */
	__u8 pad[2];
	__u8 hdr[LT_X11_HDR];
};

/* lt_x11_msg.flags */
#define LT_X11_SENT 1		/* a SendEvent (bit 7 of the type byte) */
#define LT_X11_STARTED_BEFORE 2 /* its first bytes came in an earlier chunk */

/* One whole message, emitted in the chunk that held its last byte. */
struct lt_x11_msg {
	__u32 end;    /* offset in the chunk just past its last byte */
	__u32 len;    /* its bytes */
	__u32 time;   /* server time (ms): core input events (types 2-6) and
		       * GenericEvents (bytes 12-15, XInput 2's time); else 0 */
	__u16 seq;    /* sequence number of the last request processed */
	__u16 evtype; /* GenericEvent: the extension's event type */
	__u8 type;    /* 0 error, 1 reply, 2..34 core events, 35 generic */
	__u8 ext;     /* GenericEvent: the extension's major opcode */
	__u8 flags;   /* LT_X11_* */
	__u8 pad;
};

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

/*
 * Frames the chunk `buf` of `n` bytes (little-endian server): fills out[]
 * with the messages that end in it, at most LT_X11_MAX_MSGS, and returns
 * how many; st carries a message cut by the chunk's end to the next one.
 * A stream that goes out of step (an absurd length, more messages than
 * out[] holds) sets st->lost and returns -1 after what it framed.
 */
static inline int lt_x11_frame(struct lt_x11_state *st, const __u8 *buf, __u32 n,
			       struct lt_x11_msg *out)
{
	__u32 pos = 0, i, take, len;
	int count = 0;
	/* Where the current message began: before this chunk, or here. */
	__u8 before = st->have > 0 || st->skip > 0;

	if (st->lost)
		return -1;
	/* Two steps per message at most (its header, its rest). */
	for (i = 0; i < 2 * LT_X11_MAX_MSGS + 2; i++) {
		if (st->have == LT_X11_HDR) {
			take = n - pos < st->skip ? n - pos : st->skip;
			st->skip -= take;
			pos += take;
			if (st->skip)
				return count; /* its rest is in the next chunk */
			if (count >= LT_X11_MAX_MSGS) {
				st->lost = 1;
				return -1;
			}
			len = st->hdr[0] == LT_X11_REPLY || (st->hdr[0] & 0x7f) == LT_X11_GENERIC
				  ? 32 + 4 * lt_x11_u32(st->hdr + 4)
				  : 32;
			lt_x11_decode(st, pos, len, before, &out[count & (LT_X11_MAX_MSGS - 1)]);
			count++;
			st->have = 0;
			before = 0;
		}
		if (pos >= n)
			return count;
		take = LT_X11_HDR - (st->have & (LT_X11_HDR - 1));
		if (take > n - pos)
			take = n - pos;
		if (take > LT_X11_HDR)
			take = LT_X11_HDR;
		if (LT_X11_READ(st->hdr + (st->have & (LT_X11_HDR - 1)), buf + pos, take)) {
			st->lost = 1;
			return -1;
		}
		st->have += take;
		pos += take;
		if (st->have < LT_X11_HDR)
			return count; /* its header ends in the next chunk */
		st->skip = 32 - LT_X11_HDR;
		if (st->hdr[0] == LT_X11_REPLY || (st->hdr[0] & 0x7f) == LT_X11_GENERIC) {
			__u32 units = lt_x11_u32(st->hdr + 4);

			if (units > LT_X11_MAX_UNITS) {
				st->lost = 1;
				return -1;
			}
			st->skip += 4 * units;
		}
	}
	st->lost = 1;
	return -1;
}

#endif /* LOOPTRACE_X11_WIRE_H */
