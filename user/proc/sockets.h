// Sockets of a process: the inode behind an fd, and AF_UNIX sockets with
// their bound names and peers (from the kernel's sock_diag interface, as
// `ss -x` shows them). Used to pick raw input channels.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace looptrace::proc {

// The socket inode of /proc/PID/fd/FD; an error if it is not a socket.
Result<uint64_t> fd_socket_inode(uint32_t pid, int fd);

// Every socket inode the process has open.
std::vector<uint64_t> socket_inodes(uint32_t pid);

struct UnixSocket {
  std::string name;   // bound path; abstract names start with '@'; "" if none
  uint64_t peer = 0;  // the connected peer's inode, 0 if none
  // Bytes waiting in its receive queue (a connected stream socket), or -1
  // if the kernel did not say.
  int64_t queued = -1;
};

// Every AF_UNIX socket on the machine (this network namespace) by inode.
Result<std::map<uint64_t, UnixSocket>> unix_sockets();

// The sockets of `pid` whose peer is bound to `path` (or to "@path"),
// among `all` (from unix_sockets()).
Result<std::vector<uint64_t>> sockets_connected_to(
    uint32_t pid, const std::string& path,
    const std::map<uint64_t, UnixSocket>& all);

// Whether a unix socket name is a display server's: X11's
// /tmp/.X11-unix/XN (or its abstract twin @/tmp/.X11-unix/XN) or a Wayland
// compositor's socket (a file named wayland-*, usually in XDG_RUNTIME_DIR).
bool is_display_server_name(const std::string& name);
// Of those, X11's: /tmp/.X11-unix/XN or @/tmp/.X11-unix/XN.
bool is_x11_server_name(const std::string& name);
// Of those, Wayland's: a socket named wayland-* (not its .lock).
bool is_wayland_server_name(const std::string& name);

struct PeerSocket {
  uint64_t inode = 0;  // the process's socket
  std::string peer;    // the name its peer is bound to
};

// The sockets of `pid` connected to a display server (is_display_server_name),
// among `all`; an error naming what was looked for if there are none.
Result<std::vector<PeerSocket>> display_connections(
    uint32_t pid, const std::map<uint64_t, UnixSocket>& all);

}  // namespace looptrace::proc
