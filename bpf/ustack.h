// SPDX-License-Identifier: GPL-2.0
/*
 * A copy of the current thread's user stack for unwinding in userspace
 * (--call-graph dwarf): used by stack samples, blocking points and wakers.
 * Included by looptrace.bpf.c, in order.
 */
#pragma once

/*
 * The user registers (saved at the kernel entry, whether the timer hit user
 * or kernel code), as much of the user stack above the stack pointer as can
 * be read (halving the copy until it fits below the end of the mapping),
 * and the return addresses the uretprobes of the thread's spans in flight
 * hid (st: the current thread's state, 0 if it has none). 0 when no byte of
 * the stack could be read.
 */
static __noinline int fill_ucopy(struct lt_ucopy *u, struct lt_thread *st)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 len = lt_cfg.stack_copy;
	struct pt_regs *regs;
	__u32 depth, d, i;
	void *sp;

	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	u->regs[0] = BPF_CORE_READ(regs, ax);
	u->regs[1] = BPF_CORE_READ(regs, dx);
	u->regs[2] = BPF_CORE_READ(regs, cx);
	u->regs[3] = BPF_CORE_READ(regs, bx);
	u->regs[4] = BPF_CORE_READ(regs, si);
	u->regs[5] = BPF_CORE_READ(regs, di);
	u->regs[6] = BPF_CORE_READ(regs, bp);
	u->regs[7] = BPF_CORE_READ(regs, sp);
	u->regs[8] = BPF_CORE_READ(regs, r8);
	u->regs[9] = BPF_CORE_READ(regs, r9);
	u->regs[10] = BPF_CORE_READ(regs, r10);
	u->regs[11] = BPF_CORE_READ(regs, r11);
	u->regs[12] = BPF_CORE_READ(regs, r12);
	u->regs[13] = BPF_CORE_READ(regs, r13);
	u->regs[14] = BPF_CORE_READ(regs, r14);
	u->regs[15] = BPF_CORE_READ(regs, r15);
	u->regs[16] = BPF_CORE_READ(regs, ip);
	sp = (void *)u->regs[7];
	u->stack_len = 0;
	/* Constant sizes, for the verifier: 8, 4, 2, then 1 KiB. */
	if (len >= LT_STACK_COPY && !bpf_probe_read_user(u->stack, LT_STACK_COPY, sp))
		u->stack_len = LT_STACK_COPY;
	else if (len >= LT_STACK_COPY / 2 && !bpf_probe_read_user(u->stack, LT_STACK_COPY / 2, sp))
		u->stack_len = LT_STACK_COPY / 2;
	else if (len >= LT_STACK_COPY / 4 && !bpf_probe_read_user(u->stack, LT_STACK_COPY / 4, sp))
		u->stack_len = LT_STACK_COPY / 4;
	else if (!bpf_probe_read_user(u->stack, LT_STACK_COPY / 8, sp))
		u->stack_len = LT_STACK_COPY / 8;
	u->nret = 0;
	if (!st)
		return u->stack_len != 0;
	depth = st->depth;
	if (depth > LT_MAX_DEPTH)
		depth = LT_MAX_DEPTH;
	u->nret = depth;
	for (i = 0; i < LT_MAX_DEPTH; i++) {
		if (i >= depth)
			break;
		d = (depth - 1 - i) & (LT_MAX_DEPTH - 1);
		u->ret_addrs[i] = st->stack[d].ret_addr;
	}
	return u->stack_len != 0;
}
