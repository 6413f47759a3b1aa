// Small facts about a live process read from /proc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace looptrace::proc {

// True while the pid exists (zombies included); pid 0 never does.
bool pid_exists(uint32_t pid);
// Some thread of the process has not exited. A process whose main thread
// exited (a zombie leader) lives on while another thread runs; one whose
// threads have all exited (a zombie, not yet reaped) has exited.
bool pid_running(uint32_t pid);
// A thread of the process that has not exited, the main thread if it has
// not; 0 if none.
uint32_t live_thread(uint32_t pid);
// The /proc directory that shows the process as it is: /proc/PID, or
// /proc/PID/task/TID of a live thread when the main thread has exited (its
// maps are then empty and its root, exe and fd links unreadable).
std::string live_proc_dir(uint32_t pid);
// Thread ids of a process (/proc/PID/task); empty if it is gone.
std::vector<uint32_t> thread_ids(uint32_t pid);

// Target of the process's exe link, without a " (deleted)" suffix.
Result<std::string> exe_path(uint32_t pid);

// The thread's name from /proc/PID/task/TID/comm (tid 0: the process's);
// empty when the thread is gone.
std::string comm(uint32_t pid, uint32_t tid);

// A whole /proc (or other) text file; "open /proc/1/maps: No such file...".
Result<std::string> read_text_file(const std::string& path);

// A whole regular file of at most max_bytes, for files a user names
// (profiles). Refused before anything is read: a FIFO (whose open or read
// would wait for a writer), a device (/dev/zero never ends), a directory,
// and a file larger than max_bytes. Errors are kUsage except EACCES/EPERM
// (kPermission) and name the path: "/dev/zero: not a regular file (a
// character device)".
Result<std::string> read_regular_file(const std::string& path,
                                      size_t max_bytes);

}  // namespace looptrace::proc
