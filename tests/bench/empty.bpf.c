// SPDX-License-Identifier: GPL-2.0
/* The benchmark floor: a uprobe + uretprobe pair that does nothing. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

SEC("uprobe")
int BPF_KPROBE(lt_empty_entry) { return 0; }

SEC("uretprobe")
int BPF_KRETPROBE(lt_empty_return) { return 0; }

char LICENSE[] SEC("license") = "GPL";
