// SPDX-License-Identifier: GPL-2.0
/*
 * Key expressions: what a probe reads at entry (registers, dereferences).
 * Included by looptrace.bpf.c, in order.
 */
#pragma once

/*
 * The key bases, read once per entry at constant ctx offsets (the verifier
 * rejects a ctx access at a variable offset, which is what a switch on the
 * base would compile to).
 */
static __always_inline void load_regs(struct pt_regs *ctx, __u64 regs[8])
{
	regs[LT_KEY_NONE] = 0;
	regs[LT_KEY_ARG0] = PT_REGS_PARM1(ctx);
	regs[LT_KEY_ARG0 + 1] = PT_REGS_PARM2(ctx);
	regs[LT_KEY_ARG0 + 2] = PT_REGS_PARM3(ctx);
	regs[LT_KEY_ARG0 + 3] = PT_REGS_PARM4(ctx);
	regs[LT_KEY_ARG0 + 4] = PT_REGS_PARM5(ctx);
#if defined(PT_REGS_PARM6)
	regs[LT_KEY_ARG5] = PT_REGS_PARM6(ctx);
#elif defined(__TARGET_ARCH_x86)
	regs[LT_KEY_ARG5] = ctx->r9; /* libbpf 1.1 has no PT_REGS_PARM6 */
#else
	regs[LT_KEY_ARG5] = 0;
#endif
	regs[LT_KEY_SP] = PT_REGS_SP(ctx);
}

/* Evaluates one key expression; returns 0 on success, -1 on a fault. */
static __always_inline int read_key(const __u64 regs[8], const volatile struct lt_key_spec *spec,
				    __u64 *out)
{
	__u64 v = regs[spec->base & 7];
	__u8 nderef = spec->nderef;
	__u8 size = spec->size;
	int i;

	for (i = 0; i < LT_MAX_DEREF; i++) {
		void *addr;
		__u64 next = 0;
		long err;

		if (i >= nderef)
			break;
		addr = (void *)(v + (__s64)spec->off[i]);
		/* Only the last read may be narrower than a pointer. */
		if (i == nderef - 1 && size == 4)
			err = bpf_probe_read_user(&next, 4, addr);
		else if (i == nderef - 1 && size == 2)
			err = bpf_probe_read_user(&next, 2, addr);
		else if (i == nderef - 1 && size == 1)
			err = bpf_probe_read_user(&next, 1, addr);
		else
			err = bpf_probe_read_user(&next, 8, addr);
		if (err)
			return -1;
		v = next;
	}
	*out = v + (__s64)spec->add;
	return 0;
}
