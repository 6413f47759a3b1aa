/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * X11 framing of a server-to-client byte stream (docs/input.md, "X11
 * connections"): the reads of a connection, chunk by chunk,
 * into whole messages, of which only the header fields the analysis uses
 * leave: type, sequence number, length, a GenericEvent's extension and
 * event type, and an input event's server time. Never a core key event's
 * keycode (byte 1, "detail").
 *
 * This header holds the wire's types and limits, shared by both sides
 * through abi.h; the framing itself is x11_framing.h. A message of the X11
 * protocol is at least 32 bytes: 32 for events and errors, 32 + 4 x length
 * for a reply (type 1) and a GenericEvent (type 35), length in bytes 4-7.
 */
#ifndef LOOPTRACE_X11_WIRE_H
#define LOOPTRACE_X11_WIRE_H

#ifndef __bpf__
#include <linux/types.h>
#endif

/* Header bytes a message's fields come from. */
#define LT_X11_HDR 16
/* Messages a chunk can give at most (a 4 KiB read of 32-byte events); the
 * rest of the chunk is skipped and the stream loses its framing (counted
 * by the caller). */
#define LT_X11_MAX_MSGS 128
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
	/* The header, in the first LT_X11_HDR bytes; twice as long so that a
	 * read at any offset below LT_X11_HDR of up to LT_X11_HDR bytes stays
	 * inside, as the BPF verifier proves it must. */
	__u8 hdr[2 * LT_X11_HDR];
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

/* An X11 read as the BPF program records it (LT_REC_IO on LT_CHAN_X11):
 * the call, then the messages that ended in it. io.hdr.size covers
 * nmsgs of them. */
#define LT_X11_REC_UNFRAMED 1 /* the read was not framed (stream not in step) */
#define LT_X11_REC_LOST 2     /* the stream went out of step in this read */
#define LT_X11_REC_DRAINED 4  /* it returned less than it asked: the socket is empty */

#endif /* LOOPTRACE_X11_WIRE_H */
