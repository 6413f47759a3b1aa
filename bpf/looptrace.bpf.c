// SPDX-License-Identifier: GPL-2.0
/*
 * looptrace span tracing: uprobe/uretprobe pairs around a loop's dispatch
 * (and idle) functions, CPU-time accounting from sched_switch, and a
 * perf-event stack sampler for spans that run long.
 *
 * Fast spans only update a per-thread histogram; slow spans, stack samples
 * and sample drops cross the ring buffer. Everything lost is counted.
 *
 * One job per file, included in dependency order: maps.h (configuration,
 * maps), cputime.h and sched.h (the CPU/run-queue/blocked books), keys.h
 * (what probes read), threads.h (per-thread state, histograms), ustack.h
 * (user stack copies for unwinding), python.h (Python frames and
 * callables), v8.h (JavaScript frames), spans.h (the span and point
 * probes), lifecycle.h (exit, fork, exec), sampler.h (stack samples),
 * io_sock.h, io_calls.h and io_hooks.h (input channels).
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "looptrace/abi.h"

char LICENSE[] SEC("license") = "GPL";

/* In this order: each file uses what the ones above it define. */
// clang-format off
#include "maps.h"
#include "cputime.h"
#include "keys.h"
#include "threads.h"
#include "ustack.h"
#include "python.h"
#include "v8.h"
#include "spans.h"
#include "sched.h"
#include "lifecycle.h"
#include "sampler.h"
#include "io_sock.h"
#include "io_calls.h"
#include "io_hooks.h"
// clang-format on
