/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * looptrace ABI: every record and map value shared by the BPF programs and
 * the C++ loader. This is the only header both sides include (with the
 * X11 and Wayland wire types it includes, x11_wire.h and wayland_wire.h;
 * their framing logic is apart, in x11_framing.h and wayland_framing.h).
 *
 * Rules: fixed-width types only, explicit padding, no bool/enum-typed fields.
 * BPF includes it after vmlinux.h; C++ gets the types from <linux/types.h>.
 */
#ifndef LOOPTRACE_ABI_H
#define LOOPTRACE_ABI_H

#ifndef __bpf__
#include <linux/types.h> /* BPF gets the same types from vmlinux.h */
#endif

#include "wayland_wire.h"
#include "x11_wire.h"

#define LT_ABI_VERSION 10

/* Key values read at span entry; 4 covers Android's target/callback/what
 * plus one spare. */
#define LT_MAX_KEYS 4
/* Dereferences per key expression: `**(*(arg1+8)+16)` is 3. */
#define LT_MAX_DEREF 3
/* Probe points per run (span entries); the attach cookie indexes them. */
#define LT_MAX_PROBES 32
/* System call numbers lt_config.sys_op covers: x86-64 and arm64 number
 * theirs below 512 (x86-64's x32 calls, with bit 30 set, are not input
 * calls of a 64-bit process). */
#define LT_NR_SYSCALLS 512
/* In-flight spans per thread: GLib/Qt nest main loops a few levels deep. */
#define LT_MAX_DEPTH 8
/* User frames per stack sample; deeper stacks are truncated. */
#define LT_MAX_STACK 64
/* Bytes of the user stack copied per sample, from the stack pointer up,
 * for unwinding by CFI in userspace (perf's default for --call-graph
 * dwarf); lt_config.stack_copy chooses how many, up to this. */
#define LT_STACK_COPY 8192
/* Kernel frames of a blocking point or a wakeup. */
#define LT_MAX_KSTACK 32
/* Blocking points recorded per span; later ones are counted
 * (LT_CNT_OFFCPU_CAPPED) and their time stays unattributed blocked time. */
#define LT_MAX_BLOCKS 16
/* User registers per sample, in DWARF order for x86-64: rax, rdx, rcx, rbx,
 * rsi, rdi, rbp, rsp, r8-r15, rip. */
#define LT_NREGS 17
/* Log-linear histogram: 64 powers of two x 4 linear sub-buckets. */
#define LT_HIST_SUB_BITS 2
#define LT_HIST_SUB (1 << LT_HIST_SUB_BITS)
#define LT_HIST_SLOTS (64 * LT_HIST_SUB)
#define LT_COMM_LEN 16
/* Bytes of the string a `str` key points to, read when a span's record is
 * made (NUL included), straight into the record (not the 512-byte BPF
 * stack). GLib source names outgrow 32 ("[gtk+] gdk_frame_clock_paint_idle"
 * is 33); a longer one is cut and its span flagged LT_SPAN_KEY_STR_CUT. */
#define LT_KEY_STR_LEN 128
/* Frames by name (lt_probe_cfg.frame_names): up to this many names of
 * this many bytes (NUL included) per probe; GTK's frame-clock GSources are
 * two ("[gtk+] gdk_frame_clock_paint_idle" in GTK 3, "[gtk] ..." in 4),
 * 34 bytes at most. */
#define LT_FRAME_NAMES 2
#define LT_FRAME_NAME_LEN 40
/* Keys whose values decide a span's name (lt_probe_cfg.frame_by), and the
 * answers a thread remembers (lt_thread.frame_memo, direct-mapped). */
#define LT_FRAME_BY 2
#define LT_FRAME_MEMO 4
/* Threads --tid and --comm can select. */
#define LT_MAX_FILTER_TIDS 16
#define LT_MAX_FILTER_COMMS 4

/* What a probe point means (DESIGN.md, "role"). */
enum lt_role {
	LT_ROLE_DISPATCH = 0,
	LT_ROLE_IDLE = 1,
	/* Not a probe's role: the lag from a message's due time to the start of
	 * its dispatch, measured when a dispatch probe has a "msg" key and an
	 * enqueue probe recorded that message. Reported like a span. */
	LT_ROLE_DELIVERY = 2,
	LT_ROLE_MAX = 3, /* span-like roles are below this */
	/* Point roles: one record per call, no span. */
	LT_ROLE_BARRIER_POST = 16,   /* token = return value; stack at post */
	LT_ROLE_BARRIER_REMOVE = 17, /* token from a key, at entry */
	LT_ROLE_ENQUEUE = 18,	     /* message + due time, kept in lt_pending */
	/* Input roles: socket-call probes (lt_io_uentry/lt_io_ureturn), not
	 * entries of lt_config.probes. */
	LT_ROLE_INPUT_RECV = 19, /* (fd, buf, ...) -> bytes received */
	LT_ROLE_INPUT_SEND = 20, /* (fd, buf, len, ...) -> bytes sent */
	/* A loop waiting for work (AOSP's epoll_wait in pollInner): idle time,
	 * not lag. A frame like a span's, but no record, no sample and no
	 * blocking point: its thread's histogram only. */
	LT_ROLE_WAIT = 21,
	/* A call that wakes a waiting loop (AOSP's Looper::wake()), on the
	 * waker's thread: a wait it ends is counted on the waiting thread's
	 * histogram of this probe, the time from the call to the wait's end. */
	LT_ROLE_WAKE = 22,
};

/* Ring-buffer record types. */
enum lt_record_type {
	LT_REC_SPAN = 1,      /* a span that crossed its slow threshold */
	LT_REC_SAMPLE = 2,    /* a user stack sampled inside a long span */
	LT_REC_SPAN_DROP = 3, /* a sampled span ended fast: drop its samples */
	LT_REC_POINT = 4,     /* a call of a point-role probe */
	LT_REC_IO = 5,	      /* a message moved on an input channel */
	LT_REC_EXEC = 6,      /* a traced process exec'd: its mappings changed */
	LT_REC_USTACK = 7,    /* a sample with its registers and stack bytes */
	LT_REC_OFFCPU = 8,    /* a thread inside a span blocked: where */
	LT_REC_WAKE = 9,      /* who is waking a thread inside a span */
	LT_REC_WOKEN = 10,    /* which LT_REC_WAKE ended which LT_REC_OFFCPU */
	LT_REC_STOP = 11,     /* a traced thread was stopped or frozen: when */
	LT_REC_PYCODE = 12,   /* a Python code object's names, first seen */
};

/* Base of a key expression. */
enum lt_key_base {
	LT_KEY_NONE = 0,
	LT_KEY_ARG0 = 1, /* ... LT_KEY_ARG5 = 6, System V argument registers */
	LT_KEY_ARG5 = 6,
	LT_KEY_SP = 7,
};

/*
 * A key expression: v = base; for i < nderef: v = *(u64 *)(v + off[i]);
 * v += add; and if size != 0 and nderef > 0 the last read is `size` bytes
 * (1, 2, 4 or 8) zero-extended.
 */
struct lt_key_spec {
	__u8 base;
	__u8 nderef;
	__u8 size;
	__u8 op; /* LT_KEY_OP_*: what is done with the value read */
	__s32 add;
	__s32 off[LT_MAX_DEREF];
	__u32 pad1;
};

/* lt_key_spec.op */
#define LT_KEY_OP_NONE 0
/* The value is a Python callable (a function or a bound method) of a
 * process in lt_py_procs: the key is its function's code object, 0 for
 * anything else (no fault). */
#define LT_KEY_OP_PYCODE 1

/* lt_probe_cfg.flags */
#define LT_PROBE_OUTERMOST 1 /* a call inside a span of the same probe is part of it */
/* The entry is a call instruction (a virtual call site), the exit a plain
 * uprobe at its return address: the frame is the one the call pushes. */
#define LT_PROBE_CALL_SITE 2

struct lt_probe_cfg {
	__u32 role;
	__u32 nkeys;
	/* Key index + 1 of named keys the kernel uses (0: none): dispatch
	 * "msg"; enqueue "msg", "when", "queue", "flags". */
	__u32 msg_key;
	__u32 when_key;
	__u32 queue_key;
	__u32 flags_key;
	__u32 async_mask; /* enqueue: flags bits that make a message async */
	__u32 flags;	  /* LT_PROBE_* */
	/* Key index + 1 (0: none) of "msg_tag": a dispatch and an enqueue
	 * pair when msg and the tag's low 32 bits both match (AOSP's native
	 * Looper dispatches a copy of its message: msg is the handler, the
	 * tag its what). */
	__u32 tag_key;
	__u32 tag_pad;
	/* Key index + 1 (0: none) without which a call is no span: read 0
	 * (a GObject closure that is no Python callable), the call is not
	 * pushed and its return finds no frame (not counted as unmatched). */
	__u32 only_key;
	/* Key index + 1 whose value points to a string (format `str`), read
	 * into the span record's key_str; 0: none. */
	__u32 str_key;
	/* Key index + 1 holding the dispatch's due time (CLOCK_MONOTONIC, in
	 * units of due_scale ns: key "due_us" 1000, "due_ns" 1), for delivery
	 * lag without an enqueue probe; 0: none. */
	__u32 due_key;
	__u32 due_scale;
	/* Key index + 1 holding a display input event's type (0: none): a
	 * span whose value v < 64 has bit v set in input_types handles input
	 * and is recorded whatever its length. */
	__u32 input_key;
	__u64 input_types;
	struct lt_key_spec keys[LT_MAX_KEYS];
	/* Frames, recorded whatever their length: every span of the probe
	 * (frame_all), or those whose str key's string is one of frame_names
	 * (frame_nnames of them, NUL-padded). */
	__u32 frame_all;
	__u32 frame_nnames;
	char frame_names[LT_FRAME_NAMES][LT_FRAME_NAME_LEN];
	/* Key indexes + 1 (0: none) whose values together decide the name
	 * (GLib: the callback and its Python function): a thread reads and
	 * matches the name once per distinct pair (lt_thread.frame_memo),
	 * not at every span. None: matched at every span. */
	__u32 frame_by[LT_FRAME_BY];
};

/* A message enqueued and not yet dispatched (LRU hash lt_pending). */
struct lt_pending_key {
	__u32 pid;
	__u32 tag; /* msg_tag's low 32 bits; 0 without one */
	__u64 msg;
};

struct lt_pending_val {
	__u64 when_ns; /* due time */
	__u64 queue;
	__u32 async;	/* 1: passes sync barriers */
	__u32 probe_id; /* the enqueue probe */
};

/* Per-run knobs; the loader fills them in .rodata before load. */
struct lt_config {
	__u64 slow_ns[LT_ROLE_MAX]; /* span duration that makes it slow */
	__u64 sample_after_ns;	    /* sample stacks of spans older than this */
	__u32 record_all;	    /* 1: every span crosses the ring buffer */
	__u32 nprobes;
	__u32 hist_max;	 /* entries in lt_hists (<= its max_entries) */
	__u32 use_steal; /* 1: subtract KVM steal time from CPU time */
	/* Android's slow-delivery hysteresis: after a slow delivery, a thread
	 * reports no other until one's lag is below this (0: off). */
	__u64 delivery_drain_ns;
	/* Input channels: 1 records input calls (the input probes are only
	 * attached then). */
	__u32 input_on;
	/* 1: only processes in lt_tgids (and the peer ends of their channels,
	 * in lt_chans); 0: every process. */
	__u32 input_tgid_filter;
	/* Input records wake the reader once, as the bytes waiting in the
	 * ring buffer cross this many (its poll timeout collects the rest;
	 * above the mark it is awake or its timeout comes first): a wakeup
	 * per record costs more than the record. */
	__u32 io_wakeup_bytes;
	/* 1: spans only of processes in lt_tgids (-p, a command, and what they
	 * fork); the uprobes are attached for every process, since the
	 * kernel's own per-process filter loses a process whose main thread
	 * exits; 0: every process. */
	__u32 span_tgid_filter;
	/* 1: spans only of the threads whose tid is in filter_tids or whose
	 * name is in filter_comms (--tid, --comm), decided at a thread's first
	 * probed call; 0: every thread. */
	__u32 thread_filter;
	__u32 filter_tids[LT_MAX_FILTER_TIDS];		     /* 0: unused */
	char filter_comms[LT_MAX_FILTER_COMMS][LT_COMM_LEN]; /* "": unused */
	/* Bytes of user stack each sample copies (LT_REC_USTACK), 0: samples
	 * carry frame-pointer frames only (LT_REC_SAMPLE). */
	__u32 stack_copy;
	/* 1: record where threads in spans block and who wakes them
	 * (LT_REC_OFFCPU, LT_REC_WAKE). */
	__u32 offcpu_on;
	/* 1: a traced process may run CPython (its frames are walked); 0:
	 * none does (-p of a process that maps no CPython), and the verifier
	 * drops the walk: attach is faster. */
	__u32 python_on;
	/* 1: a traced process may run V8 (its JavaScript frames are walked,
	 * lt_v8_procs); 0: none does (-p of a process that maps no V8). */
	__u32 v8_on;
	/* The kernel's interrupt entry code (__irqentry_text_start/_end from
	 * kallsyms; 0 when hidden): a wakeup whose kernel stack passes through
	 * it came from an interrupt (LT_WAKE_IRQ). */
	__u64 irqentry_start;
	__u64 irqentry_end;
	/* The PID namespace looptrace runs in (the inode number of
	 * /proc/self/ns/pid, unique on the one nsfs), when it is not the
	 * initial one: every pid the kernel reports or compares (records,
	 * lt_tgids, filter_tids) is then translated into it; a task outside
	 * it has pid 0 and is not traced. 0: the initial namespace, the
	 * kernel's pids as they are. */
	__u64 pidns_ino;
	struct lt_probe_cfg probes[LT_MAX_PROBES];
	/* Raw syscall tracepoints: LT_IO_TRACED | LT_IO_* of each traced
	 * system call by number, 0 for the rest. */
	__u8 sys_op[LT_NR_SYSCALLS];
};

/* Loss and health counters (per-CPU array lt_counters, summed by the loader). */
enum lt_counter {
	LT_CNT_RB_FULL = 0,	   /* ring-buffer reservation failed */
	LT_CNT_HIST_FULL = 1,	   /* no free histogram slot for a thread */
	LT_CNT_DEPTH_OVERFLOW = 2, /* nesting deeper than LT_MAX_DEPTH */
	LT_CNT_RET_UNMATCHED = 3,  /* return with no matching entry */
	LT_CNT_STORAGE_FAIL = 4,   /* task storage could not be created */
	LT_CNT_KEY_FAULT = 5,	   /* a key dereference faulted */
	LT_CNT_STACK_FAIL = 6,	   /* bpf_get_stack failed */
	LT_CNT_SAMPLES = 7,	   /* stack samples emitted */
	LT_CNT_IO = 8,		   /* input-channel messages recorded */
	/* Calls on an AF_UNIX SOCK_SEQPACKET socket of a traced process whose
	 * bytes are not an InputMessage: filtered out in the kernel. */
	LT_CNT_IO_REJECT = 9,
	/* lt_tgids or lt_chans was full: a forked child or a channel's peer
	 * end is not followed. */
	LT_CNT_WATCH_FULL = 10,
	/* A traced thread's context switch the sched_switch books did not see
	 * (found when the books disagree with the thread running): the CPU
	 * split of a span across it comes from the kernel's own counters. */
	LT_CNT_SCHED_UNSEEN = 11,
	/* Blocking points past LT_MAX_BLOCKS in one span: not recorded. */
	LT_CNT_OFFCPU_CAPPED = 12,
	/* A span left without its return (longjmp, a C++ exception): found
	 * dead at a later entry or return of the thread, as the kernel finds
	 * its uretprobe instance dead, and dropped untimed. */
	LT_CNT_ABANDONED = 13,
	/* A dispatch of a message (a probe with a msg key) whose enqueue is
	 * not in lt_pending: enqueued before attach, or aged out of the full
	 * table. Its delivery lag is unknown. */
	LT_CNT_DELIVERY_UNMATCHED = 14,
	/* Reads of an X11 or Wayland connection not framed into messages:
	 * tracing began inside a message, or the stream went out of step;
	 * framing starts again after a read that drained the socket. */
	LT_CNT_X11_UNFRAMED = 15,
	/* Python stacks deeper than LT_MAX_PYFRAMES: their outermost Python
	 * frames are missing (the stack is marked truncated). */
	LT_CNT_PY_CUT = 16,
	/* Python code objects whose qualname, file name or line table was
	 * longer than LT_REC_PYCODE carries: cut (a name ends in "...", lines
	 * past the table's cut are the function's first). */
	LT_CNT_PY_NAME_CUT = 17,
	/* JavaScript stacks with more than LT_MAX_JSFRAMES frames: their
	 * outermost JavaScript frames are missing. */
	LT_CNT_JS_CUT = 18,
	LT_CNT_MAX = 19,
};

struct lt_rec_header {
	__u32 type;  /* enum lt_record_type */
	__u32 size;  /* bytes of the whole record */
	__u64 ts_ns; /* CLOCK_MONOTONIC */
	__u32 pid;   /* tgid */
	__u32 tid;
};

struct lt_span_rec {
	struct lt_rec_header hdr; /* ts_ns = span end */
	__u64 span_id;		  /* per-thread sequence number */
	__u64 start_ns;
	__u64 duration_ns;
	__u64 cpu_ns;	/* on CPU during the span (less steal) */
	__u64 runq_ns;	/* runnable, waiting for a CPU */
	__u64 steal_ns; /* "on CPU" while the hypervisor ran others */
	/* Stopped or frozen (SIGSTOP, a ptrace stop, a freezer): not runnable,
	 * yet not waiting for anything the program asked for. */
	__u64 stopped_ns;
	__u32 probe_id;
	__u32 role;
	__u32 depth;	      /* 0 = outermost */
	__u32 key_fault_mask; /* bit i: key i could not be read */
	__u32 flags;	      /* LT_SPAN_* */
	__u32 pad;
	__u64 keys[LT_MAX_KEYS];
	char comm[LT_COMM_LEN];
	/* The string the probe's str key points to (a GSource's name), read
	 * when the record is made, at the span's end; "" if none or unread. */
	char key_str[LT_KEY_STR_LEN];
};

/* lt_span_rec.flags */
/* The span read from a raw input channel (or was the first to start after
 * such a read): it consumed that input. Recorded even when fast. */
#define LT_SPAN_INPUT 1u
/* Cut short: the thread exited (or was killed) inside the span, or exec'd
 * another program. The record is sent then; its end is that moment. */
#define LT_SPAN_EXIT 2u
#define LT_SPAN_EXEC 4u
/* The sched_switch books missed a context switch of the thread during the
 * span: cpu_ns and runq_ns come from the kernel's counters of the thread
 * (se.sum_exec_runtime, up to a scheduler tick stale at each end, and
 * sched_info.run_delay, exact); steal_ns is 0. */
#define LT_SPAN_SPLIT_KERNEL 8u
/* key_str holds the first LT_KEY_STR_LEN - 1 bytes of a longer string. */
#define LT_SPAN_KEY_STR_CUT 16u

struct lt_sample_rec {
	struct lt_rec_header hdr; /* ts_ns = sample time */
	__u64 span_id;
	__u32 probe_id;
	__u32 nframes;
	__u64 frames[LT_MAX_STACK];
};

/* What unwinding a user stack by CFI needs (--call-graph dwarf): the user
 * registers, the top of the stack, and the return addresses our uretprobes
 * hid. It follows a record that has a user stack when stack_copy is on. */
struct lt_ucopy {
	__u64 regs[LT_NREGS]; /* DWARF order; regs[7] = rsp = stack's address */
	__u32 stack_len;      /* bytes of stack[] read (0: none could be) */
	__u32 nret;	      /* ret_addrs[] set */
	/* The return addresses the uretprobes of the thread's spans in flight
	 * replaced with their trampoline, innermost first. */
	__u64 ret_addrs[LT_MAX_DEPTH];
	__u8 stack[LT_STACK_COPY];
};

/* A sample for unwinding in userspace: the frame-pointer frames as in
 * lt_sample_rec, then the copy. */
struct lt_ustack_rec {
	struct lt_sample_rec s;
	struct lt_ucopy u;
};

/* CPython: where a thread's interpreter frames are, as byte offsets of one
 * interpreter version's structures (user/python/layout.cpp). A thread's
 * PyThreadState is on the list at runtime->interpreters.head->threads.head
 * (->next), found by native_thread_id; its innermost frame is
 * tstate->cframe->current_frame, the next one out frame->previous. The
 * kernel reads a frame's four fields (frame_code .. frame_is_entry) with one
 * copy: the frame_window_len bytes at frame + frame_window, the span from
 * the first of them to the end of the last (at most LT_PY_FRAME_WINDOW;
 * the loader refuses a layout whose fields do not fit). */
struct lt_py_offsets {
	__u16 runtime_interp_head;
	__u16 interp_threads_head;
	__u16 tstate_next;
	__u16 tstate_native_tid;
	__u16 tstate_cframe;
	__u16 cframe_current_frame;
	__u16 frame_code;
	__u16 frame_previous;
	__u16 frame_prev_instr;
	__u16 frame_is_entry; /* a byte: the frame began a call of the eval loop */
	/* A loop callback's identity (LT_KEY_OP_PYCODE): a function's code, a
	 * bound method's function. */
	__u16 ob_type;
	__u16 func_code;
	__u16 method_func;
	__u16 frame_window;	/* the first of the four fields, 8-byte aligned */
	__u16 frame_window_len; /* to the end of the last, <= LT_PY_FRAME_WINDOW */
	__u16 pad[1];
};
/* Bytes of an interpreter frame read in one copy (lt_py_offsets). */
#define LT_PY_FRAME_WINDOW 64
/* An lt_py_offsets field the version does not have: tstate_cframe (3.13
 * keeps current_frame in the thread state: read at cframe_current_frame
 * from it), frame_is_entry (3.12 marks entries by a shim frame). */
#define LT_PY_NONE 0xffff

/* Where a code object's names are, for the kernel to send them
 * (LT_REC_PYCODE): byte offsets of the code object's fields and of the str
 * and bytes objects they point to. The kernel tells a code object from
 * another one freed at the same address by its first line, qualname and
 * line table pointers, read with one copy: the key_window_len bytes at
 * code + key_window (at most LT_PY_CODE_WINDOW; the loader checks). */
struct lt_py_code_offsets {
	__u16 ob_type;
	__u16 firstlineno; /* int */
	__u16 filename;	   /* str * */
	__u16 qualname;	   /* str * */
	__u16 linetable;   /* bytes * */
	__u16 bytes_size;  /* PyVarObject.ob_size */
	__u16 bytes_sval;  /* PyBytesObject.ob_sval */
	__u16 unicode_length;
	__u16 unicode_state;
	__u16 ascii_size;   /* sizeof(PyASCIIObject): ASCII text after it */
	__u16 compact_size; /* sizeof(PyCompactUnicodeObject) */
	__u16 key_window;
	__u16 key_window_len;
	__u16 pad[3];
};
/* Bytes of a code object read per frame and sample to key it (a power of
 * two: the kernel masks indices with it). */
#define LT_PY_CODE_WINDOW 128

/* A process running CPython (BPF hash lt_py_procs, tgid -> this). */
struct lt_py_proc {
	__u64 runtime;	     /* address of _PyRuntime */
	__u64 function_type; /* &PyFunction_Type */
	__u64 method_type;   /* &PyMethod_Type */
	__u64 code_type;     /* &PyCode_Type */
	struct lt_py_offsets off;
	struct lt_py_code_offsets code;
};

/* A code object the kernel names (BPF LRU hash lt_py_codes): it sends its
 * LT_REC_PYCODE once per key, before the record whose frames hold it. */
struct lt_py_code_key {
	__u32 tgid;
	__s32 firstlineno;
	__u64 code;
	__u64 qualname;
	__u64 linetable;
};

/* Bytes of a str (its characters as stored: 1, 2 or 4 bytes each) or of a
 * line table an LT_REC_PYCODE carries; the rest is cut. */
#define LT_PY_NAME_BYTES 256
#define LT_PY_FILE_BYTES 512
#define LT_PY_TABLE_BYTES 4096

/* A str object as read: its length in characters and its state bits
 * (PyASCIIObject), and how many bytes of its characters follow. */
struct lt_py_str {
	__s64 length;
	__u32 state;
	__u32 nbytes; /* 0 when not a compact str the kernel can read */
};

/* A Python code object's names, read by the kernel the first time a frame
 * of the process runs it (lt_py_code_key): sent before the sample,
 * blocking point or barrier post that holds the frame, so that userspace
 * names it even when the object is freed soon after. */
struct lt_py_code_rec {
	struct lt_rec_header hdr; /* ts_ns = when read; pid: the process */
	__u64 code;
	__s32 firstlineno;
	__u32 table_nbytes; /* bytes of table[] read */
	__s64 table_size;   /* the line table's whole size */
	struct lt_py_str qualname;
	struct lt_py_str filename;
	__u8 qualname_bytes[LT_PY_NAME_BYTES];
	__u8 filename_bytes[LT_PY_FILE_BYTES];
	__u8 table[LT_PY_TABLE_BYTES];
};

/* Python frames per sample; the rest is cut (LT_PY_CUT). */
#define LT_MAX_PYFRAMES 64
/* Threads of an interpreter searched for the current one. */
#define LT_PY_MAX_THREADS 64
/* lt_pyframe.code bit 0: the frame began a call of the eval loop
 * (_PyEval_EvalFrameDefault); code objects are 8-byte aligned. */
#define LT_PYFRAME_ENTRY 1ull

/* One interpreter frame: its code object and its last instruction. */
struct lt_pyframe {
	__u64 code;  /* PyCodeObject * | LT_PYFRAME_ENTRY */
	__u64 instr; /* prev_instr: the instruction running (or last run) */
};

/* lt_pystack.flags */
#define LT_PY_CUT 1u	 /* deeper than LT_MAX_PYFRAMES: the outermost are missing */
#define LT_PY_NOSTATE 2u /* the thread's PyThreadState was not found */

/* The Python frames of a thread, innermost first. A sample, blocking point
 * (LT_REC_OFFCPU) or barrier post (LT_REC_POINT) of a process in
 * lt_py_procs carries them after its record (and its copy): hdr.size says
 * so. */
struct lt_pystack {
	__u32 nframes;
	__u32 flags; /* LT_PY_* */
	struct lt_pyframe frames[LT_MAX_PYFRAMES];
};

struct lt_py_sample_rec {
	struct lt_sample_rec s;
	struct lt_pystack py;
};

struct lt_py_ustack_rec {
	struct lt_ustack_rec s;
	struct lt_pystack py;
};

/* V8 (Node): where a JavaScript frame keeps what it runs, from the V8
 * build's own post-mortem metadata (v8dbg_*, user/v8/metadata.h). The
 * kernel walks the frame pointers from the user registers and, at each
 * frame, reads the window_len bytes at fp + window in one copy; the slot_*
 * fields index its 8-byte words (the loader checks them). A frame whose
 * marker word is a heap object (a context, not a Smi frame type) is a
 * JavaScript frame: its function's SharedFunctionInfo is read (the word at
 * function - heap_object_tag + js_function_shared). */
struct lt_v8_proc {
	__s16 window;	    /* first byte read, from fp (negative) */
	__u16 window_len;   /* bytes read, <= LT_JS_WINDOW */
	__u8 slot_saved_fp; /* the caller's fp (fp + 0) */
	__u8 slot_ret;	    /* the return address (fp + 8) */
	__u8 slot_marker;   /* context or Smi frame type */
	__u8 slot_function; /* the JSFunction, tagged */
	__u8 slot_bytecode_array;
	__u8 slot_bytecode_offset;
	__u16 js_function_shared; /* JSFunction::shared */
	__u64 heap_object_tag_mask;
	__u64 heap_object_tag;
};

/* Bytes of a frame read in one copy (lt_v8_proc). */
#define LT_JS_WINDOW 64
/* Frame-pointer frames walked per stack at most. */
#define LT_JS_WALK 96
/* JavaScript frames per stack; the rest is cut (LT_JS_CUT). */
#define LT_MAX_JSFRAMES 40

/* One JavaScript frame as the kernel found it. Userspace names sfi (after
 * checking it is one) and finds the line from the bytecode offset. */
struct lt_jsframe {
	__u64 pc;	       /* where the frame runs: matches a native frame */
	__u64 sfi;	       /* its SharedFunctionInfo, tagged */
	__u64 function;	       /* its JSFunction, tagged (its code: lines, inlining) */
	__u64 bytecode_array;  /* the frame's slot: a BytecodeArray when interpreted */
	__u64 bytecode_offset; /* the frame's slot: a Smi when interpreted */
};

/* lt_jsstack.flags */
#define LT_JS_CUT 1u /* deeper than LT_MAX_JSFRAMES: the outermost are missing */

/* The JavaScript frames of a thread, innermost first. A sample or a
 * blocking point (LT_REC_OFFCPU) of a process in lt_v8_procs carries them
 * after its record (and its copy): hdr.size says so (its size is not
 * lt_pystack's). */
struct lt_jsstack {
	__u32 nframes;
	__u32 flags; /* LT_JS_* */
	struct lt_jsframe frames[LT_MAX_JSFRAMES];
};

struct lt_js_sample_rec {
	struct lt_sample_rec s;
	struct lt_jsstack js;
};

struct lt_js_ustack_rec {
	struct lt_ustack_rec s;
	struct lt_jsstack js;
};

/* A thread blocked (switched out, not runnable) inside a span: its user
 * and kernel stacks then. With stack_copy, an lt_ucopy follows
 * (hdr.size = sizeof(struct lt_offcpu_copy_rec)); then, in a CPython
 * process, an lt_pystack. */
struct lt_offcpu_rec {
	struct lt_rec_header hdr; /* ts_ns = switch-out; the blocked thread */
	__u64 span_id;		  /* the innermost span in flight */
	__u32 probe_id;
	__u32 seq;	/* the thread's blocking count: its LT_REC_WAKE's */
	__u32 nframes;	/* user frames (frame pointers) */
	__u32 nkframes; /* kernel frames */
	__u64 frames[LT_MAX_STACK];
	__u64 kframes[LT_MAX_KSTACK];
};

struct lt_offcpu_copy_rec {
	struct lt_offcpu_rec r;
	struct lt_ucopy u;
};

/* A thread inside a span is being woken (sched_waking, in the waker's
 * context): the waking thread and its stacks. The thread may not have left
 * its CPU yet, or may not leave it at all (woken on its way to sleep):
 * which blocking point this wakeup ends, if any, comes with LT_REC_WOKEN.
 * With stack_copy, an lt_ucopy of the waker follows (hdr.size =
 * sizeof(struct lt_wake_copy_rec)); then, from a thread of a process in
 * lt_py_procs, its lt_pystack (no frames from an interrupt). */
struct lt_wake_rec {
	struct lt_rec_header hdr; /* ts_ns = waking; pid/tid: the woken one */
	__u32 wake_id;		  /* per woken thread */
	__u32 flags;		  /* LT_WAKE_* */
	__u32 waker_pid;
	__u32 waker_tid;
	char waker_comm[LT_COMM_LEN];
	__u32 nframes;	/* the waker's user frames; 0 from an interrupt */
	__u32 nkframes; /* the waker's kernel frames */
	__u64 frames[LT_MAX_STACK];
	__u64 kframes[LT_MAX_KSTACK];
};

struct lt_wake_copy_rec {
	struct lt_wake_rec r;
	struct lt_ucopy u;
};

/* A thread LT_REC_OFFCPU recorded is back on a run queue (sched_wakeup,
 * always after its switch-out): blocking point `seq` ended now, by the
 * wakeup `wake_id` (the thread's latest LT_REC_WAKE; 0: none seen). */
struct lt_woken_rec {
	struct lt_rec_header hdr; /* ts_ns = wakeup; pid/tid: the woken one */
	__u32 seq;
	__u32 wake_id;
};

/* lt_wake_rec.flags */
/* Woken from an interrupt (a timer, a device): no thread woke it. The
 * waker fields are whatever the interrupt hit (the idle task, a stranger),
 * there is no user stack, and the kernel stack ends at the interrupt entry
 * (hrtimer_wakeup ... asm_sysvec_apic_timer_interrupt). */
#define LT_WAKE_IRQ 1u

struct lt_span_drop_rec {
	struct lt_rec_header hdr;
	__u64 span_id;
};

/* A thread with books (lt_threads) was stopped or frozen from start_ns
 * until hdr.ts_ns, when it was continued or thawed (woken). */
struct lt_stop_rec {
	struct lt_rec_header hdr;
	__u64 start_ns;
};

/* A successful exec of a traced process (hdr: the new program, its time). */
struct lt_exec_rec {
	struct lt_rec_header hdr;
};

/* One in-flight span (task storage; userspace reads it for spans still
 * running when tracing stops). */
struct lt_frame {
	__u64 start_ns;
	__u64 cpu_at_start;
	__u64 steal_at_start;
	__u64 runq_at_start;
	__u64 stop_at_start;
	__u64 span_id;
	__u64 keys[LT_MAX_KEYS];
	__u32 probe_id;
	__u32 key_fault_mask;
	__u32 sampled;
	__u32 flags; /* LT_SPAN_* */
	/* The kernel's counters of the thread at the start, and the books'
	 * unseen switches then (LT_SPAN_SPLIT_KERNEL). */
	__u64 kcpu_at_start;
	__u64 kdelay_at_start;
	__u32 unseen_at_start;
	__u32 nblocks; /* LT_REC_OFFCPU records sent for the span */
	/* The caller's return address, read at the entry (with stack_copy):
	 * the uretprobe replaces it on the stack with its trampoline, where
	 * unwinding by CFI would stop. */
	__u64 ret_addr;
	/* The stack pointer at the entry: its return is the one at
	 * entry_sp + 8 (frames left by longjmp are told apart by it). */
	__u64 entry_sp;
};

/*
 * Input channels (DESIGN.md "Input I/O"). A probe on a socket call
 * (recvfrom/sendto/recvmsg/sendmsg/read/write, by libc uprobe or syscall
 * tracepoint) records the call when its fd is an input channel:
 *  - an AF_UNIX SOCK_SEQPACKET socket whose bytes are an InputMessage
 *    (lt_input_layout() != 0), like Android's InputChannel; or
 *  - a socket userspace put in lt_chans (a raw channel: X11, Wayland...).
 */
/* The call's direction and how it passes its buffer (attach cookie). */
#define LT_IO_SEND 1u	   /* bit 0: send (else receive) */
#define LT_IO_MSGHDR 2u	   /* bit 1: the buffer is a struct msghdr's iov[0] */
#define LT_IO_IOV 4u	   /* bit 2: the buffer is an iovec array (readv, writev) */
#define LT_IO_TRACED 0x80u /* lt_config.sys_op: the call is traced */

enum lt_chan_kind {
	LT_CHAN_INPUT = 1, /* SOCK_SEQPACKET carrying InputMessages */
	LT_CHAN_RAW = 2,   /* user-picked; any bytes are input */
	LT_CHAN_X11 = 3,   /* an X11 client connection: framed (x11_wire.h) */
	/* The X server's end of one: its writes only (when, how many bytes),
	 * to pair with the client's reads by stream offset. */
	LT_CHAN_X11_SERVER = 4,
	/* A Wayland client connection: framed both ways (wayland_wire.h). */
	LT_CHAN_WAYLAND = 5,
	/* A Wayland server's end of one: its writes only, as X11's. */
	LT_CHAN_WAYLAND_SERVER = 6,
};

/* lt_chans values: why an inode is watched. */
#define LT_WATCH_RAW 1u		   /* a raw channel the user picked */
#define LT_WATCH_PEER 2u	   /* the peer end of a traced process's channel */
#define LT_WATCH_X11 3u		   /* the client end of an X11 connection */
#define LT_WATCH_X11_SERVER 4u	   /* the server end of a watched X11 connection */
#define LT_WATCH_WAYLAND 5u	   /* the client end of a Wayland connection */
#define LT_WATCH_WAYLAND_SERVER 6u /* the server end of a watched one */

/* Bytes read from the start of each message: the header and the time
 * fields (eventTime / consumeTime at 16; a TIMELINE's graphics timeline
 * at 16 and 24), never the payload. */
#define LT_IO_HEAD 32

/* An input call between its entry and its return (in lt_thread). */
struct lt_io_pending {
	__u64 enter_ns;
	__u64 buf; /* user buffer, or struct msghdr * with LT_IO_MSGHDR */
	__u64 inode;
	__u64 peer_inode; /* 0: not connected */
	__u32 fd;
	__u32 op;   /* LT_IO_* */
	__u32 chan; /* enum lt_chan_kind; 0: no call in progress */
	__u32 len;  /* bytes asked for (read, recv; recvmsg: iov[0]'s at return) */
};

/* One message moved on an input channel. hdr.ts_ns = when it moved: the
 * return of a receive, the entry of a send. */
struct lt_io_rec {
	struct lt_rec_header hdr;
	__u64 enter_ns;
	__u64 exit_ns;
	__u64 inode;	  /* this end's socket inode */
	__u64 peer_inode; /* the other end's, 0 if unknown */
	__s64 bytes;	  /* the call's return value (> 0) */
	__u32 fd;
	__u32 op;	     /* LT_IO_* */
	__u32 chan;	     /* enum lt_chan_kind */
	__u32 depth;	     /* spans in flight on this thread */
	__u64 span_start_ns; /* the innermost in-flight span, if depth > 0 */
	__u64 span_id;
	__u32 span_probe;
	__u32 pad;
	__u8 head[LT_IO_HEAD]; /* an InputMessage's first bytes (fewer if
				* short); zeros on raw channels: not read */
	char comm[LT_COMM_LEN];
};

/* A read of an X11 connection (chan LT_CHAN_X11): the call, then the
 * messages that ended in it, framed in the kernel (x11_wire.h); only
 * their header fields, never a byte of a key. io.hdr.size is
 * offsetof(msgs) + nmsgs * sizeof(struct lt_x11_msg). */
struct lt_x11_rec {
	struct lt_io_rec io;
	__u32 nmsgs;
	__u32 flags; /* LT_X11_REC_* */
	struct lt_x11_msg msgs[LT_X11_MAX_MSGS];
};

/* A read of a Wayland connection (chan LT_CHAN_WAYLAND): the call, then
 * its input events, framed in the kernel (wayland_wire.h); other messages
 * only counted. io.hdr.size is offsetof(msgs) + nmsgs * sizeof(struct
 * lt_wl_msg). */
struct lt_wl_rec {
	struct lt_io_rec io;
	__u32 nmsgs;
	__u32 flags; /* LT_WL_REC_* */
	__u32 other; /* messages that ended in the read and are not input */
	__u32 pad;
	struct lt_wl_msg msgs[LT_WL_MAX_MSGS];
};

/*
 * Android's InputMessage (AOSP libs/input InputTransport.h). Current layout
 * (Android 12+): header {u32 type @0, u32 seq @4 (never 0)}; legacy (Android
 * 9 era): header {u32 type, u32 padding (0)}, seq @8, types from 1.
 */
#define LT_IM_KEY 0
#define LT_IM_MOTION 1
#define LT_IM_FINISHED 2
#define LT_IM_FOCUS 3
#define LT_IM_CAPTURE 4
#define LT_IM_DRAG 5
#define LT_IM_TIMELINE 6
#define LT_IM_TOUCH_MODE 7
#define LT_IM_LEGACY_KEY 1
#define LT_IM_LEGACY_MOTION 2
#define LT_IM_LEGACY_FINISHED 3
#define LT_IM_KEY_SIZE 104
#define LT_IM_MOTION_BASE 168
#define LT_IM_POINTER_SIZE 144
#define LT_IM_MAX_POINTERS 16
#define LT_IM_FINISHED_SIZE 24
#define LT_IM_LEGACY_FINISHED_SIZE 16

enum lt_input_layout {
	LT_LAYOUT_NONE = 0, /* not an InputMessage */
	LT_LAYOUT_CURRENT = 1,
	LT_LAYOUT_LEGACY = 2,
};

/*
 * Which InputMessage layout `bytes` bytes starting with words w0..w3 (u32
 * at offsets 0, 4, 8, 12) follow, from the type, the seq and the exact
 * size. A receive is valid only when its byte count is the message's size,
 * so this is the same test Android's consumer makes. Shared by BPF (the
 * kernel filter) and C++ (the decoder).
 */
static inline __u32 lt_input_layout(__u32 w0, __u32 w1, __u32 w2, __u32 w3, __s64 bytes)
{
	if (bytes < 16 || bytes > LT_IM_MOTION_BASE + LT_IM_POINTER_SIZE * LT_IM_MAX_POINTERS)
		return LT_LAYOUT_NONE;
	if (w1 != 0) { /* current: seq @4 */
		switch (w0) {
		case LT_IM_KEY:
			return bytes == LT_IM_KEY_SIZE ? LT_LAYOUT_CURRENT : LT_LAYOUT_NONE;
		case LT_IM_MOTION:
			return w3 >= 1 && w3 <= LT_IM_MAX_POINTERS &&
				       bytes == LT_IM_MOTION_BASE + LT_IM_POINTER_SIZE * (__s64)w3
				   ? LT_LAYOUT_CURRENT
				   : LT_LAYOUT_NONE;
		case LT_IM_FINISHED:
		case LT_IM_DRAG:
			return bytes == 24 ? LT_LAYOUT_CURRENT : LT_LAYOUT_NONE;
		case LT_IM_FOCUS:
		case LT_IM_CAPTURE:
		case LT_IM_TOUCH_MODE:
			return bytes == 16 ? LT_LAYOUT_CURRENT : LT_LAYOUT_NONE;
		case LT_IM_TIMELINE:
			return bytes == 32 ? LT_LAYOUT_CURRENT : LT_LAYOUT_NONE;
		default:
			return LT_LAYOUT_NONE;
		}
	}
	/* TIMELINE (Android 12+): the app sends it with seq 0. */
	if (w0 == LT_IM_TIMELINE)
		return bytes == 32 ? LT_LAYOUT_CURRENT : LT_LAYOUT_NONE;
	if (w2 == 0) /* legacy: seq @8 */
		return LT_LAYOUT_NONE;
	if (w0 == LT_IM_LEGACY_FINISHED)
		return bytes == LT_IM_LEGACY_FINISHED_SIZE ? LT_LAYOUT_LEGACY : LT_LAYOUT_NONE;
	if (w0 == LT_IM_LEGACY_KEY || w0 == LT_IM_LEGACY_MOTION)
		return bytes >= 24 ? LT_LAYOUT_LEGACY : LT_LAYOUT_NONE;
	return LT_LAYOUT_NONE;
}

/* Per-thread state, in task-local storage lt_threads: no hash lookup on the
 * hot path. */
struct lt_thread {
	__u64 oncpu_since; /* when the thread last went on CPU */
	__u64 steal_since; /* this CPU's steal clock then */
	__u64 off_since;   /* when it left the CPU or was woken; 0: running */
	__u64 cpu_acc;	   /* ns on CPU, accumulated at switch-out */
	__u64 steal_acc;   /* ns "on CPU" that the hypervisor stole */
	__u64 runq_acc;	   /* ns runnable but waiting for a CPU */
	__u64 next_span_id;
	__u32 depth;	    /* in-flight spans, may exceed LT_MAX_DEPTH */
	__u32 off_runnable; /* since off_since it has been runnable */
	/* index + 1 into lt_hists per probe, its spans' then its delivery
	 * lags' (LT_MAX_PROBES + probe); 0: none yet; -1: map full */
	__s32 hist_slot[2 * LT_MAX_PROBES];
	__u32 delivery_quiet; /* hysteresis: a slow delivery was reported */
	/* A raw-channel read happened outside any span: the next outermost
	 * span consumes it. */
	__u32 input_next;
	/* With span_tgid_filter: 1 its process is traced, 2 it is not, 0 not
	 * known yet (one lt_tgids lookup per thread, not per call). */
	__u32 traced;
	__u32 sched_unseen; /* context switches the books missed */
	/* Context switches of the thread (out and in): a probe that read the
	 * clock before one must read it again (times_now). */
	__u32 switches;
	/* Its last LT_REC_OFFCPU (seq), and whether its LT_REC_WOKEN is still
	 * to be sent. */
	__u32 block_seq;
	__u32 block_pending;
	__u32 wake_seq; /* its last LT_REC_WAKE's wake_id */
	__u64 block_off_ns;
	__u64 stop_acc;	   /* ns stopped or frozen (lt_span_rec.stopped_ns) */
	__u32 off_stopped; /* since off_since it has been stopped or frozen */
	__u32 stop_pad;
	struct lt_frame stack[LT_MAX_DEPTH];
	struct lt_io_pending io; /* the input call in progress */
	/* Input calls decide once per thread, not with a map lookup each:
	 * io_traced 1 once its process was found in lt_tgids (a process
	 * leaves it only with its last thread); io_peer the last peer inode
	 * found in lt_chans (nothing removes one). */
	__u64 io_peer;
	__u32 io_traced;
	/* lt_py_gen + 1 when its process was last looked up in lt_py_procs
	 * and not found (0: not known): a loop callback of a process without
	 * CPython costs no lookup until the loader adds a process. */
	__u32 py_absent;
	/* Frame tests by name (lt_probe_cfg.frame_by), remembered: the
	 * values of the probe's frame_by keys, probe + 1 (0: empty) and
	 * whether the name was a frame's. Cleared at exec. */
	struct {
		__u64 by[LT_FRAME_BY];
		__u32 probe;
		__u32 frame;
	} frame_memo[LT_FRAME_MEMO];
	/* Its wait (LT_ROLE_WAIT) in progress was ended by a thread inside a
	 * wake call: that probe + 1 (0: none) and when the call began. */
	__u32 woken_by;
	__u32 woken_pad;
	__u64 wake_call_ns;
};

/* A call of a point-role probe (barrier post/remove). ts_ns = its entry. */
struct lt_point_rec {
	struct lt_rec_header hdr;
	__u32 probe_id;
	__u32 role;
	__u64 keys[LT_MAX_KEYS]; /* read at entry */
	__u64 ret;		 /* return value (barrier.post), else 0 */
	__u32 key_fault_mask;
	__u32 nframes; /* user stack of the caller (barrier.post) */
	__u64 frames[LT_MAX_STACK];
};

/* One histogram per (thread, probe), in the array map lt_hists. */
struct lt_hist {
	__u32 pid;
	__u32 tid;
	__u32 probe_id;
	__u32 role;
	char comm[LT_COMM_LEN];
	__u64 count;
	__u64 sum_ns;
	__u64 max_ns;
	__u64 slots[LT_HIST_SLOTS];
};

/*
 * Histogram slot of a duration in ns: values below LT_HIST_SUB get their own
 * slot; above, slot = (msb << SUB_BITS) | the SUB_BITS bits below the msb, so
 * each power of two is split into LT_HIST_SUB linear parts (error < 25%).
 * Shared so that BPF and C++ agree on bucket bounds.
 */
static inline __u32 lt_hist_slot(__u64 v)
{
	__u32 msb = 0;
	__u64 t = v;

	if (v < LT_HIST_SUB)
		return (__u32)v;
	if (t >> 32) {
		msb += 32;
		t >>= 32;
	}
	if (t >> 16) {
		msb += 16;
		t >>= 16;
	}
	if (t >> 8) {
		msb += 8;
		t >>= 8;
	}
	if (t >> 4) {
		msb += 4;
		t >>= 4;
	}
	if (t >> 2) {
		msb += 2;
		t >>= 2;
	}
	if (t >> 1) {
		msb += 1;
	}
	return (msb << LT_HIST_SUB_BITS) |
	       (__u32)((v >> (msb - LT_HIST_SUB_BITS)) & (LT_HIST_SUB - 1));
}

/* Smallest value that falls in `slot` (inverse of lt_hist_slot). */
static inline __u64 lt_hist_slot_low(__u32 slot)
{
	__u32 msb = slot >> LT_HIST_SUB_BITS;
	__u64 sub = slot & (LT_HIST_SUB - 1);

	if (slot < LT_HIST_SUB)
		return slot;
	if (msb < LT_HIST_SUB_BITS) /* slots never produced by lt_hist_slot */
		return LT_HIST_SUB;
	return (1ULL << msb) | (sub << (msb - LT_HIST_SUB_BITS));
}

#endif /* LOOPTRACE_ABI_H */
