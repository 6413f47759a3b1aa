// SPDX-License-Identifier: GPL-2.0
/*
 * Input channels: socket calls of traced processes (libc uprobes, the raw
 * syscall tracepoints, or the syscall tracepoints) filtered to input
 * channels in the kernel:
 *
 *  1. the process: with input_tgid_filter, only processes in lt_tgids
 *     (userspace puts the target there; forks follow in lt_fork) or calls on
 *     a socket whose inode is in lt_chans (the peer end of a traced
 *     process's channel, learnt here; or a raw channel the user picked);
 *  2. the socket: AF_UNIX SOCK_SEQPACKET, or in lt_chans as raw;
 *  3. on return, the bytes: a SEQPACKET message is recorded only when its
 *     first words and exact size are an InputMessage (lt_input_layout).
 *
 * Only the first LT_IO_HEAD bytes of an InputMessage are read (header, seq
 * and the time field at 16), never the payload; of a raw channel, none.
 * Included by looptrace.bpf.c.
 */

#define LT_S_IFMT 00170000
#define LT_S_IFSOCK 0140000
#define LT_AF_UNIX 1
#define LT_SOCK_SEQPACKET 5

/* Watched socket inodes (inode -> LT_WATCH_*). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u32);
} lt_chans SEC(".maps");

/* Entries in lt_chans (userspace's plus learnt ones): while there are none,
 * an untraced process's call is dropped after one hash lookup. */
__u32 lt_nwatch = 0;

/* A kernel pointer read as a number (an fd table slot, a void *) made
 * typed again: fields are then loaded directly (a fault reads as 0), not
 * through bpf_probe_read_kernel, one helper call per field. A kfunc of
 * kernels 6.2 and later: weak, and only in the *_typed entry programs,
 * which userspace loads when the kernel has it (else the plain ones). */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;
#define lt_cast(ptr, type) ((type *)bpf_rdonly_cast((ptr), bpf_core_type_id_kernel(type)))

/* The current task's open file `fd`, or NULL (typed: a typed pointer). */
static __always_inline struct file *fd_file(__u32 fd, const int typed)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct fdtable *fdt;
	struct file **fds;
	struct file *f = 0;

	if (typed) {
		fdt = t->files->fdt;
		if (!fdt || fd >= fdt->max_fds)
			return 0;
		fds = fdt->fd;
	} else {
		fdt = BPF_CORE_READ(t, files, fdt);
		if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
			return 0;
		fds = BPF_CORE_READ(fdt, fd);
	}
	if (bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]) || !f)
		return 0;
	return typed ? lt_cast(f, struct file) : f;
}

/* What classify_fd needs of a socket file, read one way or the other. */
struct lt_sock_facts {
	__u64 ino;
	__u64 peer_ino;
	__u32 is_sock;
	__u32 has_sk;
	__u32 is_unix;
	__u32 type;
};

static __always_inline void read_facts_typed(struct file *f, struct lt_sock_facts *o,
					     const int traced, __u32 **watch)
{
	struct inode *inode = f->f_inode;
	struct socket *sock;
	struct sock *sk, *peer;

	o->is_sock = (inode->i_mode & LT_S_IFMT) == LT_S_IFSOCK;
	if (!o->is_sock)
		return;
	o->ino = inode->i_ino;
	*watch = bpf_map_lookup_elem(&lt_chans, &o->ino);
	if (!traced && !*watch)
		return;
	sock = lt_cast(f->private_data, struct socket);
	sk = sock->sk;
	o->has_sk = sk != 0;
	if (!sk)
		return;
	o->is_unix = sk->__sk_common.skc_family == LT_AF_UNIX;
	o->type = sock->type;
	if (o->is_unix) {
		peer = lt_cast(sk, struct unix_sock)->peer;
		if (peer)
			o->peer_ino = peer->sk_socket->file->f_inode->i_ino;
	}
}

static __always_inline void read_facts_plain(struct file *f, struct lt_sock_facts *o,
					     const int traced, __u32 **watch)
{
	struct socket *sock;
	struct sock *sk, *peer;

	o->is_sock = (BPF_CORE_READ(f, f_inode, i_mode) & LT_S_IFMT) == LT_S_IFSOCK;
	if (!o->is_sock)
		return;
	o->ino = BPF_CORE_READ(f, f_inode, i_ino);
	*watch = bpf_map_lookup_elem(&lt_chans, &o->ino);
	if (!traced && !*watch)
		return;
	sock = BPF_CORE_READ(f, private_data);
	sk = BPF_CORE_READ(sock, sk);
	o->has_sk = sk != 0;
	if (!sk)
		return;
	o->is_unix = BPF_CORE_READ(sk, __sk_common.skc_family) == LT_AF_UNIX;
	o->type = BPF_CORE_READ(sock, type);
	if (o->is_unix) {
		peer = BPF_CORE_READ((struct unix_sock *)sk, peer);
		if (peer)
			o->peer_ino = BPF_CORE_READ(peer, sk_socket, file, f_inode, i_ino);
	}
}

/* Fills p->inode, p->peer_inode and p->chan if fd is an input channel. */
static __always_inline int classify_fd(__u32 fd, int traced, struct lt_io_pending *p,
				       const int typed)
{
	struct file *f = fd_file(fd, typed);
	struct lt_sock_facts o = {};
	__u32 *watch = 0;

	if (!f)
		return 0;
	if (typed)
		read_facts_typed(f, &o, traced, &watch);
	else
		read_facts_plain(f, &o, traced, &watch);
	if (!o.is_sock || (!traced && !watch) || !o.has_sk)
		return 0;
	p->inode = o.ino;
	p->peer_inode = o.peer_ino;
	if (watch && *watch == LT_WATCH_RAW) {
		p->chan = LT_CHAN_RAW;
		return 1;
	}
	if (o.is_unix && o.type == LT_SOCK_SEQPACKET) {
		p->chan = LT_CHAN_INPUT;
		return 1;
	}
	return 0;
}

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

/* libc uprobes: recv/recvfrom/send/sendto/read/write (fd, buf, ...) and
 * recvmsg/sendmsg (fd, msghdr). Cookie: LT_IO_* */
SEC("uprobe")
int BPF_KPROBE(lt_io_uentry)
{
	io_enter((__u32)PT_REGS_PARM1(ctx), PT_REGS_PARM2(ctx), (__u32)bpf_get_attach_cookie(ctx),
		 0);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(lt_io_uentry_typed)
{
	io_enter((__u32)PT_REGS_PARM1(ctx), PT_REGS_PARM2(ctx), (__u32)bpf_get_attach_cookie(ctx),
		 1);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(lt_io_ureturn)
{
	io_exit((__s64)PT_REGS_RC(ctx));
	return 0;
}

/* Syscall tracepoints: sys_enter_/sys_exit_ of the same calls. */
SEC("tracepoint")
int lt_io_tpentry(struct trace_event_raw_sys_enter *ctx)
{
	io_enter((__u32)ctx->args[0], ctx->args[1], (__u32)bpf_get_attach_cookie(ctx), 0);
	return 0;
}

SEC("tracepoint")
int lt_io_tpentry_typed(struct trace_event_raw_sys_enter *ctx)
{
	io_enter((__u32)ctx->args[0], ctx->args[1], (__u32)bpf_get_attach_cookie(ctx), 1);
	return 0;
}

SEC("tracepoint")
int lt_io_tpexit(struct trace_event_raw_sys_exit *ctx)
{
	io_exit(ctx->ret);
	return 0;
}

/* The same calls from the raw syscall tracepoints (BTF, by name: no
 * tracefs). Every system call of every process passes here while input is
 * traced: one that is not an input call leaves after a table lookup in
 * .rodata (lt_cfg.sys_op). The syscall tracepoints above run on the same
 * kernel hook, with ftrace's own per-call dispatch in between. */
static __always_inline __u32 sys_op(long nr)
{
	if (nr < 0 || nr >= LT_NR_SYSCALLS)
		return 0; /* also x32's numbers (bit 30 set) */
	return lt_cfg.sys_op[nr];
}

/* A 32-bit task's numbers are another table's: not ours. */
static __always_inline int compat_task(void)
{
#ifdef __TARGET_ARCH_x86
	return (bpf_get_current_task_btf()->thread_info.status & 0x0002) != 0; /* TS_COMPAT */
#else
	return 0;
#endif
}

SEC("tp_btf/sys_enter")
int BPF_PROG(lt_io_sys_enter, struct pt_regs *regs, long id)
{
	__u32 op = sys_op(id);

	if (!op || compat_task())
		return 0;
	io_enter((__u32)PT_REGS_PARM1_CORE_SYSCALL(regs), PT_REGS_PARM2_CORE_SYSCALL(regs),
		 op & ~LT_IO_TRACED, 0);
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(lt_io_sys_enter_typed, struct pt_regs *regs, long id)
{
	__u32 op = sys_op(id);

	if (!op || compat_task())
		return 0;
	io_enter((__u32)PT_REGS_PARM1_CORE_SYSCALL(regs), PT_REGS_PARM2_CORE_SYSCALL(regs),
		 op & ~LT_IO_TRACED, 1);
	return 0;
}

/* io_exit finds what io_enter left in the thread's state: a call that left
 * nothing (not an input call, not a channel) ends there. The number is
 * checked first all the same, to spare other calls the state lookup. */
SEC("tp_btf/sys_exit")
int BPF_PROG(lt_io_sys_exit, struct pt_regs *regs, long ret)
{
#if defined(__TARGET_ARCH_x86)
	if (!sys_op(BPF_CORE_READ(regs, orig_ax)))
		return 0;
#elif defined(__TARGET_ARCH_arm64)
	if (!sys_op(BPF_CORE_READ((struct pt_regs___arm64 *)regs, syscallno)))
		return 0;
#endif
	io_exit(ret);
	return 0;
}
