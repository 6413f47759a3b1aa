#include "record/recording.h"

#include <fcntl.h>
#include <libdeflate.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <system_error>

#include "base/output_file.h"
#include "record/codec.h"

namespace looptrace {
namespace {

constexpr uint32_t kBlockMagic = 0x4b42544c;  // "LTBK"

struct BlockHeader {
  uint32_t magic;
  uint32_t raw_len;
  uint32_t compressed_len;
  uint32_t crc;  // crc32 of the raw bytes
  uint32_t events;
};
static_assert(sizeof(BlockHeader) == 20);

struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_len;
};
static_assert(sizeof(FileHeader) == 16);

}  // namespace

RecordingWriter::RecordingWriter(std::unique_ptr<OutputFile> file)
    : file_(std::move(file)) {
  FileHeader h{};
  std::memcpy(h.magic, rec::kMagic, sizeof h.magic);
  h.version = rec::kFormatVersion;
  h.header_len = sizeof h;
  file_->stream().write(reinterpret_cast<const char*>(&h), sizeof h);
  bytes_written_ = sizeof h;
  block_.reserve(rec::kBlockBytes + 4096);
  // Level 1 as with zlib before: libdeflate's is about twice as fast as
  // zlib's and compresses as well (docs/benchmarks.md).
  compressor_ = libdeflate_alloc_compressor(1);
  if (!compressor_) {
    error_ = Status::Error(
        fmt::format("recording {}: out of memory", file_->path()));
    failed_ = true;
  }
}

// Not closed: the run failed before it traced anything (a probe could not
// be attached, the command could not run); the thread stops, and the
// OutputFile removes the file and puts back FILE.old.
RecordingWriter::~RecordingWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  libdeflate_free_compressor(compressor_);
}

const std::string& RecordingWriter::path() const { return file_->path(); }

void RecordingWriter::write(const Event& ev) {
  if (closed_ || failed_) {
    ++lost_;
    return;
  }
  size_t before = block_.size();
  rec::encode_event(ev, &block_);
  raw_bytes_ += block_.size() - before;
  ++block_events_;
  ++events_;
  if (block_.size() >= rec::kBlockBytes) submit();
}

void RecordingWriter::submit() {
  if (block_events_ == 0) return;
  // Started with the first block, not in the constructor: looptrace
  // forks the traced command after opening its outputs, and a child
  // forked from a process with more threads may only exec.
  if (!thread_.joinable() && !no_thread_) {
    try {
      thread_ = std::thread([this] { compressor_loop(); });
    } catch (const std::system_error&) {
      no_thread_ = true;  // out of threads: compress here, as before
    }
  }
  if (no_thread_) {
    write_block(block_, block_events_);
    block_.clear();
    block_events_ = 0;
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !has_pending_; });
  // The thread left pending_ empty with its capacity: block_ reuses it.
  pending_.swap(block_);
  pending_events_ = block_events_;
  has_pending_ = true;
  block_.clear();
  block_events_ = 0;
  cv_.notify_all();
}

void RecordingWriter::compressor_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return has_pending_ || stop_; });
    if (!has_pending_) return;  // stopped, nothing left
    work_.swap(pending_);
    uint32_t events = pending_events_;
    has_pending_ = false;
    busy_ = true;
    cv_.notify_all();  // the writer may fill the next block meanwhile
    lock.unlock();
    write_block(work_, events);
    work_.clear();
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

void RecordingWriter::write_block(const std::string& raw, uint32_t events) {
  if (failed_) {
    lost_ += events;
    return;
  }
  auto fail = [&](Status st) {
    lost_ += events;
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.ok()) error_ = std::move(st);
    failed_ = true;
  };
  compressed_.resize(libdeflate_zlib_compress_bound(compressor_, raw.size()));
  size_t len = libdeflate_zlib_compress(compressor_, raw.data(), raw.size(),
                                        compressed_.data(), compressed_.size());
  if (len == 0) {  // cannot happen with the bound: a libdeflate bug
    fail(Status::Error(
        fmt::format("recording {}: compression failed", file_->path())));
    return;
  }
  BlockHeader h{kBlockMagic, static_cast<uint32_t>(raw.size()),
                static_cast<uint32_t>(len),
                libdeflate_crc32(0, raw.data(), raw.size()), events};
  std::ostream& os = file_->stream();
  os.write(reinterpret_cast<const char*>(&h), sizeof h);
  os.write(compressed_.data(), static_cast<std::streamsize>(len));
  // Out of our buffers: a SIGKILL from now on keeps this block.
  if (!file_->flush()) {
    Status st = file_->close();
    file_closed_ = true;
    fail(st.ok() ? Status::Error(fmt::format("writing {}", file_->path()))
                 : st);
    return;
  }
  bytes_written_ += sizeof h + len;
}

Status RecordingWriter::flush() {
  if (closed_) {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }
  submit();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !has_pending_ && !busy_; });
  return error_;
}

Status RecordingWriter::close() {
  if (closed_) return error_;
  Status st = flush();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  closed_ = true;
  // After a write error the thread closed the file already.
  Status cl = file_closed_ ? Status::Ok() : file_->close();
  return st.ok() ? cl : st;
}

// --- reading -----------------------------------------------------------

RecordingReader::RecordingReader(std::FILE* f, std::string path)
    : f_(f), path_(std::move(path)) {}

RecordingReader::~RecordingReader() {
  if (f_) std::fclose(f_);
  libdeflate_free_decompressor(decompressor_);
}

Result<std::unique_ptr<RecordingReader>> RecordingReader::Open(
    const std::string& path) {
  // Non-blocking: a FIFO with no writer must not hold the open; only a
  // regular file is read (a FIFO or a device could block or never end).
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return Status::Errno(fmt::format("open {}", path), err,
                         err == EACCES || err == EPERM ? ErrorKind::kPermission
                                                       : ErrorKind::kUsage);
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return Status::Errno(fmt::format("stat {}", path), err);
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return Status::Error(
        S_ISDIR(st.st_mode)
            ? path + " is a directory, not a looptrace recording"
            : path +
                  " is not a regular file: a recording is a file "
                  "written by record -o",
        ErrorKind::kUsage);
  }
  std::FILE* f = nullptr;
  if (fcntl(fd, F_SETFL, 0) != 0 || (f = fdopen(fd, "rb")) == nullptr) {
    int err = errno;
    close(fd);
    return Status::Errno(fmt::format("open {}", path), err);
  }
  return FromFile(f, path);
}

Result<std::unique_ptr<RecordingReader>> RecordingReader::FromMemory(
    const void* data, size_t size) {
  // fmemopen refuses a zero size.
  static char empty;
  std::FILE* f =
      fmemopen(size ? const_cast<void*>(data) : &empty, size ? size : 1, "rb");
  if (!f) return Status::Errno("fmemopen", errno);
  if (size == 0) std::fgetc(f);  // at its end: an empty recording
  return FromFile(f, "<memory>");
}

Result<std::unique_ptr<RecordingReader>> RecordingReader::FromFile(
    std::FILE* f, std::string path_in) {
  const std::string& path = path_in;
  std::unique_ptr<RecordingReader> r(new RecordingReader(f, path));
  FileHeader h{};
  if (std::fread(&h, sizeof h, 1, f) != 1 ||
      std::memcmp(h.magic, rec::kMagic, sizeof h.magic) != 0)
    return Status::Error(fmt::format("{} is not a looptrace recording", path),
                         ErrorKind::kUsage);
  if (h.version == 0)
    return Status::Error(
        fmt::format("{}: damaged recording header: format version 0", path),
        ErrorKind::kUsage);
  if (h.version > rec::kFormatVersion)
    return Status::Error(
        fmt::format("{}: recording format {} is newer than this looptrace "
                    "reads ({})",
                    path, h.version, rec::kFormatVersion),
        ErrorKind::kUsage);
  if (h.header_len < sizeof h || h.header_len > 4096 ||
      std::fseek(f, h.header_len, SEEK_SET) != 0)
    return Status::Error(fmt::format("{}: bad recording header", path),
                         ErrorKind::kUsage);
  r->version_ = h.version;
  r->offset_ = h.header_len;
  r->decompressor_ = libdeflate_alloc_decompressor();
  if (!r->decompressor_) return Status::Error("out of memory");
  return r;
}

bool RecordingReader::load_block() {
  BlockHeader h{};
  size_t got = std::fread(&h, 1, sizeof h, f_);
  if (got == 0 && std::feof(f_)) return false;  // a clean end
  auto damaged = [&](const std::string& what) {
    damage_ = fmt::format("{} at byte {}", what, offset_);
    failed_ = true;
    return false;
  };
  if (got != sizeof h) return damaged("incomplete block header");
  if (h.magic != kBlockMagic) return damaged("bad block magic");
  if (h.raw_len > rec::kMaxBlockBytes ||
      h.compressed_len >
          libdeflate_zlib_compress_bound(nullptr, rec::kMaxBlockBytes))
    return damaged("implausible block size");
  compressed_.resize(h.compressed_len);
  if (std::fread(compressed_.data(), 1, h.compressed_len, f_) !=
      h.compressed_len)
    return damaged("incomplete block");
  raw_.resize(h.raw_len);
  size_t len = 0;
  // A zlib stream, as zlib's compress() writes it (docs/recording.md).
  if (libdeflate_zlib_decompress(decompressor_, compressed_.data(),
                                 h.compressed_len, raw_.data(), h.raw_len,
                                 &len) != LIBDEFLATE_SUCCESS ||
      len != h.raw_len)
    return damaged("undecompressable block");
  if (libdeflate_crc32(0, raw_.data(), h.raw_len) != h.crc)
    return damaged("block checksum mismatch");
  offset_ += sizeof h + h.compressed_len;
  pos_ = 0;
  ++blocks_;
  return true;
}

bool RecordingReader::keep_symbol(const Event& ev) {
  const auto* s = std::get_if<SymbolEvent>(&ev);
  if (s == nullptr) return true;
  const uint64_t cost =
      s->frame.module.size() + s->frame.function.size() + rec::kSymbolCost;
  if (cost > rec::kMaxSymbolBytes - symbol_bytes_) {
    ++symbols_dropped_;
    return false;
  }
  symbol_bytes_ += cost;
  return true;
}

bool RecordingReader::next(Event* ev) {
  while (!failed_) {
    if (pos_ >= raw_.size()) {
      raw_.clear();
      pos_ = 0;
      if (!load_block()) return false;
      continue;
    }
    if (raw_.size() - pos_ < 5) {
      damage_ =
          fmt::format("truncated record in block ending at byte {}", offset_);
      failed_ = true;
      return false;
    }
    uint8_t type = static_cast<uint8_t>(raw_[pos_]);
    uint32_t len;
    std::memcpy(&len, raw_.data() + pos_ + 1, 4);
    if (raw_.size() - pos_ - 5 < len) {
      damage_ =
          fmt::format("record overruns its block ending at byte {}", offset_);
      failed_ = true;
      return false;
    }
    const uint8_t* payload =
        reinterpret_cast<const uint8_t*>(raw_.data()) + pos_ + 5;
    pos_ += 5 + len;
    if (rec::decode_event(type, payload, len, ev)) {
      if (!keep_symbol(*ev)) continue;
      ++events_;
      return true;
    }
    // A type from a newer build is skipped; a known one that does not
    // decode is damage (the block's checksum was right: a writer bug).
    if (type == 0 || type > rec::kLastType) {
      ++unknown_;
      continue;
    }
    damage_ = fmt::format(
        "malformed record (type {}) in block ending at "
        "byte {}",
        type, offset_);
    failed_ = true;
    return false;
  }
  return false;
}

}  // namespace looptrace
