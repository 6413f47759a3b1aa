// SPDX-License-Identifier: GPL-2.0
/*
 * Cost breakdown for the overhead benchmark (scripts/bench.sh --breakdown):
 * uprobe + uretprobe pairs that each add one piece of looptrace's fast path
 * on top of the previous one, so that the difference between neighbours is
 * what that piece costs per dispatch. lt-bench-floor --obj FILE:NAME
 * attaches NAME_entry and NAME_return.
 *
 *   ab_empty     nothing (the floor)
 *   ab_ktime     bpf_ktime_get_ns() on entry and on return
 *   ab_tls       task-local storage: get-or-create on entry, get on return
 *   ab_tls_time  ab_tls + start time on entry, duration on return
 *   ab_hist      ab_tls_time + the histogram update (array map, lt_hist_slot)
 *   ab_hist_cnt  ab_hist + the per-CPU span counter (count(LT_CNT_SPANS))
 *
 * and pieces alone, each on top of ab_empty (with kernel.bpf_stats_enabled
 * their run time per call is the finer measure, docs/benchmarks.md):
 *   ab_task      bpf_get_current_task_btf() on entry
 *   ab_pidtgid   bpf_get_current_pid_tgid() on entry
 *   ab_steal     the task's run queue's steal clock (three loads)
 *   ab_kcounters the task's sum_exec_runtime and run_delay
 *   ab_cookie    bpf_get_attach_cookie() on entry and on return
 *   ab_comm      bpf_get_current_comm() on entry
 *
 * looptrace's own programs add on top of ab_hist_cnt: the attach cookie,
 * lt_ready, the in-flight span stack (depth, span id), CPU-time fields and
 * the slow/sampled checks.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "looptrace/abi.h"

char LICENSE[] SEC("license") = "GPL";

struct ab_thread {
  __u64 start_ns;
  __u64 hits;
  __u64 sum_ns;
};

struct {
  __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct ab_thread);
} ab_threads SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct lt_hist);
} ab_hists SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, LT_CNT_MAX);
  __type(key, __u32);
  __type(value, __u64);
} ab_counters SEC(".maps");

__u64 ab_sink;

static __always_inline struct ab_thread *ab_state(int create) {
  return bpf_task_storage_get(&ab_threads, bpf_get_current_task_btf(), 0,
                              create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

static __always_inline void ab_hist_add(__u64 dur) {
  __u32 idx = 0;
  struct lt_hist *h = bpf_map_lookup_elem(&ab_hists, &idx);

  if (h) {
    __u32 slot = lt_hist_slot(dur);

    h->count++;
    h->sum_ns += dur;
    if (dur > h->max_ns) h->max_ns = dur;
    if (slot < LT_HIST_SLOTS) h->slots[slot]++;
  }
}

static __always_inline void ab_count(void) {
  __u32 k = 0; /* a per-CPU counter bump, as looptrace once did per span */
  __u64 *v = bpf_map_lookup_elem(&ab_counters, &k);

  if (v) *v += 1;
}

SEC("uprobe")
int BPF_KPROBE(ab_empty_entry) { return 0; }
SEC("uretprobe")
int BPF_KRETPROBE(ab_empty_return) { return 0; }

SEC("uprobe")
int BPF_KPROBE(ab_ktime_entry) {
  ab_sink = bpf_ktime_get_ns();
  return 0;
}
SEC("uretprobe")
int BPF_KRETPROBE(ab_ktime_return) {
  ab_sink = bpf_ktime_get_ns();
  return 0;
}

SEC("uprobe")
int BPF_KPROBE(ab_tls_entry) {
  struct ab_thread *t = ab_state(1);

  if (t) t->start_ns = 1;
  return 0;
}
SEC("uretprobe")
int BPF_KRETPROBE(ab_tls_return) {
  struct ab_thread *t = ab_state(0);

  if (t) t->hits++;
  return 0;
}

SEC("uprobe")
int BPF_KPROBE(ab_tls_time_entry) {
  struct ab_thread *t = ab_state(1);

  if (t) t->start_ns = bpf_ktime_get_ns();
  return 0;
}
SEC("uretprobe")
int BPF_KRETPROBE(ab_tls_time_return) {
  struct ab_thread *t = ab_state(0);

  if (t) t->sum_ns += bpf_ktime_get_ns() - t->start_ns;
  return 0;
}

SEC("uprobe")
int BPF_KPROBE(ab_hist_entry) {
  struct ab_thread *t = ab_state(1);

  if (t) t->start_ns = bpf_ktime_get_ns();
  return 0;
}
SEC("uretprobe")
int BPF_KRETPROBE(ab_hist_return) {
  struct ab_thread *t = ab_state(0);

  if (t) ab_hist_add(bpf_ktime_get_ns() - t->start_ns);
  return 0;
}

SEC("uprobe")
int BPF_KPROBE(ab_hist_cnt_entry) {
  struct ab_thread *t = ab_state(1);

  if (t) t->start_ns = bpf_ktime_get_ns();
  return 0;
}
SEC("uretprobe")
int BPF_KRETPROBE(ab_hist_cnt_return) {
  struct ab_thread *t = ab_state(0);

  if (t) {
    ab_hist_add(bpf_ktime_get_ns() - t->start_ns);
    ab_count();
  }
  return 0;
}

__u64 ab_sink2;

SEC("uprobe")
int BPF_KPROBE(ab_steal_entry) {
  struct task_struct *t = bpf_get_current_task_btf();

  ab_sink = t->se.cfs_rq->rq->prev_steal_time_rq;
  return 0;
}
SEC("uretprobe")
int BPF_KRETPROBE(ab_steal_return) { return 0; }

SEC("uprobe")
int BPF_KPROBE(ab_kcounters_entry) {
  struct task_struct *t = bpf_get_current_task_btf();

  ab_sink = t->se.sum_exec_runtime;
  ab_sink2 = t->sched_info.run_delay;
  return 0;
}
SEC("uretprobe")
int BPF_KRETPROBE(ab_kcounters_return) { return 0; }

SEC("uprobe")
int BPF_KPROBE(ab_cookie_entry) {
  ab_sink = bpf_get_attach_cookie(ctx);
  return 0;
}
SEC("uretprobe")
int BPF_KRETPROBE(ab_cookie_return) {
  ab_sink = bpf_get_attach_cookie(ctx);
  return 0;
}

SEC("uprobe")
int BPF_KPROBE(ab_comm_entry) {
  char c[16];

  bpf_get_current_comm(c, sizeof(c));
  ab_sink = c[0];
  return 0;
}
SEC("uretprobe")
int BPF_KRETPROBE(ab_comm_return) { return 0; }

SEC("uprobe")
int BPF_KPROBE(ab_task_entry) {
  ab_sink = (__u64)bpf_get_current_task_btf();
  return 0;
}
SEC("uretprobe")
int BPF_KRETPROBE(ab_task_return) { return 0; }

SEC("uprobe")
int BPF_KPROBE(ab_pidtgid_entry) {
  ab_sink = bpf_get_current_pid_tgid();
  return 0;
}
SEC("uretprobe")
int BPF_KRETPROBE(ab_pidtgid_return) { return 0; }
