// A recording (`looptrace record -o FILE`): the whole event stream of a run,
// self-describing, in independently compressed blocks, so that a run cut by
// SIGKILL, a full disk or a crash replays up to its last complete block.
// Format: docs/recording.md.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/status.h"
#include "trace/events.h"

struct libdeflate_compressor;
struct libdeflate_decompressor;

namespace looptrace {

class OutputFile;

namespace rec {

inline constexpr char kMagic[8] = {'L', 'T', 'R', 'E', 'C', 'O', 'R', 'D'};
inline constexpr uint32_t kFormatVersion = 1;
// A block is compressed and written when it holds this much (or when the
// writer is flushed, at most every kFlushIntervalNs while tracing).
inline constexpr size_t kBlockBytes = 1u << 20;
inline constexpr uint64_t kFlushIntervalNs = 500'000'000;
// A reader refuses blocks claiming more than this (a corrupt length).
inline constexpr uint32_t kMaxBlockBytes = 64u << 20;
// A reader passes on symbols while their names and entries (kSymbolCost
// each, besides the names) come to at most this: a replay keeps every
// symbol, and symbol records compress hundreds to one.
inline constexpr uint64_t kMaxSymbolBytes = uint64_t{128} << 20;
inline constexpr uint64_t kSymbolCost = 128;

}  // namespace rec

// Appends events to a recording. Full blocks are compressed and written by
// a thread of the writer's own, so that the caller (the tracer's polling
// loop) only encodes; the thread starts with the first block. Write errors
// are kept and returned by flush() / close(); events after an error are
// counted as lost.
class RecordingWriter {
 public:
  explicit RecordingWriter(std::unique_ptr<OutputFile> file);
  ~RecordingWriter();
  RecordingWriter(const RecordingWriter&) = delete;
  RecordingWriter& operator=(const RecordingWriter&) = delete;

  void write(const Event& ev);
  // Compresses and writes the open block (if any) and waits until every
  // block is in the file (out of our buffers: a SIGKILL keeps them); the
  // first error so far.
  Status flush();
  // Flushes, closes the file; the first error. Call once; a writer
  // destroyed unclosed removes its file (nothing was traced).
  Status close();

  const std::string& path() const;
  uint64_t events() const { return events_; }
  uint64_t bytes_written() const { return bytes_written_; }
  uint64_t raw_bytes() const { return raw_bytes_; }
  // Events that did not reach the file because a write had failed.
  uint64_t lost() const { return lost_; }

 private:
  // Hands the open block to the compressor thread; waits while it still
  // has the previous one waiting (at most two blocks are buffered).
  void submit();
  void compressor_loop();
  // Compresses and writes one block (compressor thread).
  void write_block(const std::string& raw, uint32_t events);

  std::unique_ptr<OutputFile> file_;
  std::string block_;  // encoded events not yet handed over
  uint32_t block_events_ = 0;
  uint64_t events_ = 0;
  uint64_t raw_bytes_ = 0;
  bool closed_ = false;

  std::thread thread_;
  bool no_thread_ = false;  // it could not be started
  std::mutex mu_;
  std::condition_variable cv_;
  // Guarded by mu_: the block handed over and not yet taken, whether the
  // thread is working on one, and the first error.
  std::string pending_;
  uint32_t pending_events_ = 0;
  bool has_pending_ = false;
  bool busy_ = false;
  bool stop_ = false;
  bool file_closed_ = false;  // by the thread, after a write error
  Status error_;
  std::atomic<bool> failed_{false};
  std::atomic<uint64_t> bytes_written_{0};
  std::atomic<uint64_t> lost_{0};
  // The compressor thread's own.
  libdeflate_compressor* compressor_ = nullptr;
  std::string work_;
  std::string compressed_;
};

// Reads a recording event by event.
class RecordingReader {
 public:
  // Opens and checks the file header: an error for a file that is not a
  // recording or of a newer format.
  static Result<std::unique_ptr<RecordingReader>> Open(const std::string& path);
  // The same from bytes in memory (fuzzers, tests); `data` must outlive
  // the reader.
  static Result<std::unique_ptr<RecordingReader>> FromMemory(const void* data,
                                                             size_t size);
  ~RecordingReader();

  // The next event: true and *ev set; false at the end or at the first
  // damaged block (truncated, corrupt): see damage().
  bool next(Event* ev);
  // Empty if the recording ended cleanly at a block boundary; else what was
  // wrong and where ("incomplete block at byte 123456").
  const std::string& damage() const { return damage_; }
  uint64_t blocks() const { return blocks_; }
  uint64_t events() const { return events_; }
  // Records of a type this build does not know, skipped.
  uint64_t unknown_records() const { return unknown_; }
  // Symbols past rec::kMaxSymbolBytes, skipped (their addresses stay
  // unnamed).
  uint64_t symbols_dropped() const { return symbols_dropped_; }
  uint32_t format_version() const { return version_; }

 private:
  explicit RecordingReader(std::FILE* f, std::string path);
  static Result<std::unique_ptr<RecordingReader>> FromFile(std::FILE* f,
                                                           std::string path);
  bool load_block();
  // False for a symbol past rec::kMaxSymbolBytes (counted).
  bool keep_symbol(const Event& ev);

  std::FILE* f_;
  libdeflate_decompressor* decompressor_ = nullptr;
  std::string path_;
  uint32_t version_ = 0;
  std::string raw_;  // the current block, decompressed
  size_t pos_ = 0;
  std::string compressed_;
  uint64_t offset_ = 0;  // file offset of the next block
  std::string damage_;
  uint64_t blocks_ = 0;
  uint64_t events_ = 0;
  uint64_t unknown_ = 0;
  uint64_t symbol_bytes_ = 0;
  uint64_t symbols_dropped_ = 0;
  bool failed_ = false;
};

}  // namespace looptrace
