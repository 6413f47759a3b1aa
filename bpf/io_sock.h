// SPDX-License-Identifier: GPL-2.0
/*
 * Input channels, part 1: which sockets are channels (in the kernel, from
 * the fd). Included by looptrace.bpf.c, in order.
 */

/*
 * Input channels: socket calls of traced processes (libc uprobes, the raw
 * syscall tracepoints, or the syscall tracepoints) filtered to input
 * channels in the kernel:
 *
 *  1. the process: with input_tgid_filter, only processes in lt_tgids
 *     (userspace puts the target there; forks follow in lt_fork) or calls on
 *     a socket whose inode is in lt_chans (the peer end of a traced
 *     process's channel, learnt here; or a raw channel the user picked);
 *  2. the socket: AF_UNIX SOCK_SEQPACKET, or in lt_chans as raw or X11;
 *  3. on return, the bytes: a SEQPACKET message is recorded only when its
 *     first words and exact size are an InputMessage (lt_input_layout).
 *
 * Only the first LT_IO_HEAD bytes of an InputMessage are read (header, seq
 * and the time field at 16), never the payload; of a raw channel, none; of
 * an X11 connection, the first 16 bytes of each message (io_calls.h).
 */
#pragma once

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
	if (watch && *watch == LT_WATCH_X11) {
		p->chan = LT_CHAN_X11;
		return 1;
	}
	if (watch && *watch == LT_WATCH_X11_SERVER) {
		p->chan = LT_CHAN_X11_SERVER;
		return 1;
	}
	if (watch && *watch == LT_WATCH_WAYLAND) {
		p->chan = LT_CHAN_WAYLAND;
		return 1;
	}
	if (watch && *watch == LT_WATCH_WAYLAND_SERVER) {
		p->chan = LT_CHAN_WAYLAND_SERVER;
		return 1;
	}
	if (o.is_unix && o.type == LT_SOCK_SEQPACKET) {
		p->chan = LT_CHAN_INPUT;
		return 1;
	}
	return 0;
}
