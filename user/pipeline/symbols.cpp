#include "pipeline/symbols.h"

#include <unordered_set>

#include "symbolize/kernel_symbols.h"
#include "trace/span_keys.h"

namespace looptrace {

Frame RecordedSymbols::symbolize(uint32_t pid, uint64_t addr) {
  auto it = table_.find({pid, addr});
  if (it != table_.end()) return it->second;
  Frame f;
  f.addr = addr;
  return f;
}

Frame CapturingSymbolizer::symbolize(uint32_t pid, uint64_t addr) {
  refresh_from_proc();
  auto [it, fresh] = seen_.try_emplace({pid, addr});
  if (fresh) {
    it->second = inner_->symbolize(pid, addr);
    SymbolEvent s;
    s.pid = pid;
    s.frame = it->second;
    pending_.push_back(std::move(s));
  }
  return it->second;
}

void CapturingSymbolizer::prepare(const Event& ev,
                                  const std::vector<ProbeDef>& probes) {
  auto frames = [this](uint32_t pid, const std::vector<uint64_t>& f) {
    for (uint64_t addr : f) symbolize(pid, addr);
  };
  if (const auto* s = std::get_if<SampleEvent>(&ev)) {
    frames(s->pid, s->stack.frames);
  } else if (const auto* b = std::get_if<BlockEvent>(&ev)) {
    frames(b->pid, b->stack.frames);
    frames(kKernelPid, b->kframes);
  } else if (const auto* w = std::get_if<WakeEvent>(&ev)) {
    frames(w->waker_pid, w->stack.frames);
    frames(kKernelPid, w->kframes);
  } else if (const auto* p = std::get_if<PointEvent>(&ev)) {
    frames(p->pid, p->frames);
  } else if (const auto* sp = std::get_if<SpanEvent>(&ev)) {
    for (const ProbeDef& probe : probes)
      if (probe.id == sp->probe_id) frames(sp->pid, code_keys(*sp, probe));
  }
}

void CapturingSymbolizer::refresh(const std::vector<std::string>& modules) {
  if (modules.empty()) return;
  std::unordered_set<std::string> improved(modules.begin(), modules.end());
  for (auto& [key, frame] : seen_) {
    if (!improved.count(frame.module)) continue;
    Frame now = inner_->symbolize(key.first, key.second);
    if (now.function == frame.function && now.offset == frame.offset &&
        now.module == frame.module)
      continue;
    frame = now;
    SymbolEvent s;
    s.pid = key.first;
    s.frame = std::move(now);
    pending_.push_back(std::move(s));
  }
}

void CapturingSymbolizer::refresh_from_proc() {
  if (proc_) refresh(proc_->take_improved_modules());
}

std::vector<SymbolEvent> CapturingSymbolizer::take() {
  std::vector<SymbolEvent> out;
  out.swap(pending_);
  return out;
}

}  // namespace looptrace
