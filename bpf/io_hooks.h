// SPDX-License-Identifier: GPL-2.0
/*
 * Input channels, part 3: the programs that see the socket calls (libc
 * uprobes, syscall tracepoints, raw syscall tracepoints). Included by
 * looptrace.bpf.c, in order.
 */
#pragma once

/* libc uprobes: recv/recvfrom/send/sendto/read/write (fd, buf, ...) and
 * recvmsg/sendmsg (fd, msghdr). Cookie: LT_IO_* */
SEC("uprobe")
int BPF_KPROBE(lt_io_uentry)
{
	io_enter((__u32)PT_REGS_PARM1(ctx), PT_REGS_PARM2(ctx), PT_REGS_PARM3(ctx),
		 (__u32)bpf_get_attach_cookie(ctx), 0);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(lt_io_uentry_typed)
{
	io_enter((__u32)PT_REGS_PARM1(ctx), PT_REGS_PARM2(ctx), PT_REGS_PARM3(ctx),
		 (__u32)bpf_get_attach_cookie(ctx), 1);
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
	io_enter((__u32)ctx->args[0], ctx->args[1], ctx->args[2], (__u32)bpf_get_attach_cookie(ctx),
		 0);
	return 0;
}

SEC("tracepoint")
int lt_io_tpentry_typed(struct trace_event_raw_sys_enter *ctx)
{
	io_enter((__u32)ctx->args[0], ctx->args[1], ctx->args[2], (__u32)bpf_get_attach_cookie(ctx),
		 1);
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

/* A system call's registers. The tracepoints' pt_regs is typed (BTF): on
 * x86 its fields are loaded directly, not through bpf_probe_read_kernel, a
 * helper call each (four a call). */
#if defined(__TARGET_ARCH_x86)
#define LT_SYS_ARG1(regs) ((regs)->di)
#define LT_SYS_ARG2(regs) ((regs)->si)
#define LT_SYS_ARG3(regs) ((regs)->dx)
#define LT_SYS_NR(regs) ((regs)->orig_ax)
#else
#define LT_SYS_ARG1(regs) PT_REGS_PARM1_CORE_SYSCALL(regs)
#define LT_SYS_ARG2(regs) PT_REGS_PARM2_CORE_SYSCALL(regs)
#define LT_SYS_ARG3(regs) PT_REGS_PARM3_CORE_SYSCALL(regs)
#if defined(__TARGET_ARCH_arm64)
#define LT_SYS_NR(regs) BPF_CORE_READ((struct pt_regs___arm64 *)(regs), syscallno)
#endif
#endif

SEC("tp_btf/sys_enter")
int BPF_PROG(lt_io_sys_enter, struct pt_regs *regs, long id)
{
	__u32 op = sys_op(id);

	if (!op || compat_task())
		return 0;
	io_enter((__u32)LT_SYS_ARG1(regs), LT_SYS_ARG2(regs), LT_SYS_ARG3(regs), op & ~LT_IO_TRACED,
		 0);
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(lt_io_sys_enter_typed, struct pt_regs *regs, long id)
{
	__u32 op = sys_op(id);

	if (!op || compat_task())
		return 0;
	io_enter((__u32)LT_SYS_ARG1(regs), LT_SYS_ARG2(regs), LT_SYS_ARG3(regs), op & ~LT_IO_TRACED,
		 1);
	return 0;
}

/* io_exit finds what io_enter left in the thread's state: a call that left
 * nothing (not an input call, not a channel) ends there. The number is
 * checked first all the same, to spare other calls the state lookup. */
SEC("tp_btf/sys_exit")
int BPF_PROG(lt_io_sys_exit, struct pt_regs *regs, long ret)
{
#ifdef LT_SYS_NR
	if (!sys_op(LT_SYS_NR(regs)))
		return 0;
#endif
	io_exit(ret);
	return 0;
}
