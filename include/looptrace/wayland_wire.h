/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Wayland framing of a client connection (docs/input.md, "Wayland
 * connections"): both byte streams, chunk by chunk, into whole messages.
 * A message is a header of two 32-bit words, the object id and
 * (size << 16 | opcode), then its arguments; size counts the header and is
 * a multiple of 4.
 *
 * The wire does not say what an object is: the client names the objects it
 * creates in its requests (new_id arguments), and the interfaces are fixed
 * by the requests that create them. So the framing follows the requests a
 * client sends to learn its input objects, as libwayland-client itself
 * knows them:
 *   wl_display(1).get_registry(new_id)         -> a registry
 *   wl_registry.global(name, "wl_seat", ver)    -> the seat's global name
 *   wl_registry.bind(name, iface, ver, new_id)  -> a seat, by that name
 *   wl_seat.get_pointer/get_keyboard/get_touch  -> pointer, keyboard, touch
 *   wl_display.delete_id(id)                    -> that id is gone
 * and, of the events (server to client), only the input events of those
 * objects leave, with their kind, their time and their place in the read:
 * never a key code, a button code or a position. Other messages are only
 * counted.
 *
 * This header holds the wire's types and limits, shared by both sides
 * through abi.h; the framing itself is wayland_framing.h.
 */
#ifndef LOOPTRACE_WAYLAND_WIRE_H
#define LOOPTRACE_WAYLAND_WIRE_H

#ifndef __bpf__
#include <linux/types.h>
#endif

/* The first bytes of a message its fields come from: the header and six
 * arguments (a wl_touch.down is 32 bytes). */
#define LT_WL_HDR 32
/* Input events a chunk gives at most (a 4 KiB read of 16-byte events
 * would be 256); the rest of the chunk is skipped and the stream loses
 * its framing (counted by the caller). */
#define LT_WL_MAX_MSGS 256
/* A message is at most this long (libwayland's buffer; its limit is the
 * 16-bit size): longer is a stream out of step. */
#define LT_WL_MAX_SIZE 4096
/* Objects of each kind one connection has at once, at most. */
#define LT_WL_SLOTS 4

#define LT_WL_DISPLAY_ID 1

/* lt_wl_msg.kind: the input events. */
enum lt_wl_kind {
	LT_WL_NONE = 0,
	LT_WL_KEY_PRESS = 1,	  /* wl_keyboard.key, state pressed (or repeated) */
	LT_WL_KEY_RELEASE = 2,	  /* wl_keyboard.key, state released */
	LT_WL_BUTTON_PRESS = 3,	  /* wl_pointer.button, pressed */
	LT_WL_BUTTON_RELEASE = 4, /* wl_pointer.button, released */
	LT_WL_MOTION = 5,	  /* wl_pointer.motion */
	LT_WL_AXIS = 6,		  /* wl_pointer.axis */
	LT_WL_TOUCH_DOWN = 7,	  /* wl_touch.down */
	LT_WL_TOUCH_UP = 8,	  /* wl_touch.up */
	LT_WL_TOUCH_MOTION = 9,	  /* wl_touch.motion */
};

/* One direction's framing between chunks. */
struct lt_wl_dir {
	__u32 skip; /* bytes of the current message past its header to come */
	__u16 size; /* the current message's size, once its header is held */
	__u8 have;  /* header bytes of the current message held */
	__u8 lost;  /* out of step: nothing more is framed */
	/* The header, in the first LT_WL_HDR bytes; twice as long so that a
	 * read at any offset below LT_WL_HDR of up to LT_WL_HDR bytes stays
	 * inside, as the BPF verifier proves it must. */
	__u8 hdr[2 * LT_WL_HDR];
};

/* A connection: its two streams and the input objects learned. Object ids
 * 0 are free slots. */
struct lt_wl_state {
	struct lt_wl_dir in;  /* events: server to client */
	struct lt_wl_dir out; /* requests: client to server */
	__u32 registry[LT_WL_SLOTS];
	__u32 seat_name[LT_WL_SLOTS]; /* wl_seat globals' names */
	__u32 seat[LT_WL_SLOTS];
	__u32 keyboard[LT_WL_SLOTS];
	__u32 pointer[LT_WL_SLOTS];
	__u32 touch[LT_WL_SLOTS];
};

/* lt_wl_msg.flags */
#define LT_WL_STARTED_BEFORE 1 /* its first bytes came in an earlier chunk */

/* One input event, emitted in the chunk that held its last byte. */
struct lt_wl_msg {
	__u32 end;   /* offset in the read just past its last byte */
	__u32 time;  /* the event's time argument (ms, the server's clock) */
	__u16 len;   /* its bytes */
	__u16 index; /* its place among the read's messages (all kinds) */
	__u8 kind;   /* enum lt_wl_kind */
	__u8 flags;  /* LT_WL_* */
	__u8 pad[2];
};

/* A Wayland read as the BPF program records it (LT_REC_IO on
 * LT_CHAN_WAYLAND): the call, then its input events. */
#define LT_WL_REC_UNFRAMED 1 /* the read was not framed (stream not in step) */
#define LT_WL_REC_LOST 2     /* the stream went out of step in this read */
#define LT_WL_REC_DRAINED 4  /* it returned less than it asked: the socket is empty */

#endif /* LOOPTRACE_WAYLAND_WIRE_H */
