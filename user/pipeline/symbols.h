// Symbols in the event stream. A live run resolves addresses from the
// processes themselves; a recording carries every resolution it needed as
// SymbolEvents, written before the event that needs them, so that it reads
// the same on a machine without the binaries.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "python/frames.h"
#include "symbolize/kernel_symbols.h"
#include "symbolize/proc_symbolizer.h"
#include "symbolize/symbolizer.h"
#include "trace/events.h"
#include "trace/stream.h"
#include "v8/frames.h"

namespace looptrace {

struct PidAddrHash {
  size_t operator()(const std::pair<uint32_t, uint64_t>& k) const {
    return std::hash<uint64_t>()(k.second * 31 + k.first);
  }
};

// A recording's symbols: fed SymbolEvents, answers from them only (an
// address never resolved while recording is unknown; the process may be
// gone, its pid reused).
class RecordedSymbols : public Symbolizer {
 public:
  void add(const SymbolEvent& s) { table_[{s.pid, s.frame.addr}] = s.frame; }
  Frame symbolize(uint32_t pid, uint64_t addr) override;
  size_t size() const { return table_.size(); }

 private:
  std::unordered_map<std::pair<uint32_t, uint64_t>, Frame, PidAddrHash> table_;
};

// Wraps the live symbolizer: every first resolution of (pid, address) is
// also queued as a SymbolEvent for the recording, and every later one that
// differs (a debug file fetched since named the address better; the
// reader keeps the last).
class CapturingSymbolizer : public Symbolizer {
 public:
  // `proc`, if given, says which modules gained symbols (debuginfod).
  explicit CapturingSymbolizer(Symbolizer* inner,
                               ProcSymbolizer* proc = nullptr)
      : inner_(inner), proc_(proc) {}
  Frame symbolize(uint32_t pid, uint64_t addr) override;
  // Resolves again the addresses of `modules` seen so far; queues those
  // that changed.
  void refresh(const std::vector<std::string>& modules);
  // Refreshes what `proc` says has changed.
  void refresh_from_proc();

  // Resolves what the analysers and reports will ask about `ev` (its
  // frames, its code and vtable keys under `probes`), so that the
  // SymbolEvents can precede it in the recording.
  void prepare(const Event& ev, const std::vector<ProbeDef>& probes);
  // The SymbolEvents queued since the last call.
  std::vector<SymbolEvent> take();

 private:
  Symbolizer* inner_;
  ProcSymbolizer* proc_;
  std::unordered_map<std::pair<uint32_t, uint64_t>, Frame, PidAddrHash> seen_;
  std::vector<SymbolEvent> pending_;
};

// The symbolizers of a live run: the processes' files, through their
// mappings while they live, the kernel's, and the Python frames the live
// source named (python/frames.h); with a recording, every first resolution
// is captured for it (CapturingSymbolizer).
struct LiveSymbols {
  // DEBUGINFOD_URLS: stripped files' debug files fetched by build-id.
  static ProcSymbolizerOptions options() {
    ProcSymbolizerOptions o;
    o.debuginfod = DebuginfodFetcher::FromEnvironment();
    return o;
  }
  ProcSymbolizer proc{options()};
  SystemSymbolizer system{&proc};
  python::PyFrames python;
  v8::JsFrames js;
  v8::JsSymbolizer js_live{&system, &js};
  python::PySymbolizer live{&js_live, &python};
  CapturingSymbolizer capture{&live, &proc};
  Symbolizer* for_analysis(bool recording) {
    return recording ? static_cast<Symbolizer*>(&capture) : &live;
  }
  // Report time: the debug files asked of debuginfod while tracing are
  // waited for, and what the recording holds of their modules resolved
  // again.
  void settle() {
    proc.settle_debuginfod();
    capture.refresh_from_proc();
  }
};

// A live stream's mappings to the live symbolizer, as each process is
// first seen (and after an exec).
class MappingsFeed : public EventSink {
 public:
  explicit MappingsFeed(ProcSymbolizer* symbols) : symbols_(symbols) {}
  void consume(const Event& ev) override {
    if (const auto* m = std::get_if<MappingsEvent>(&ev))
      symbols_->add_mappings(m->pid, m->maps);
  }

 private:
  ProcSymbolizer* symbols_;
};

}  // namespace looptrace
