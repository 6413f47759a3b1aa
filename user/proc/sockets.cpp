#include "proc/sockets.h"

#include <dirent.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string_view>

#include "proc/process.h"

namespace looptrace::proc {
namespace {

// "socket:[12345]" -> 12345, else 0.
uint64_t parse_socket_link(const std::string& link) {
  static constexpr std::string_view kPrefix = "socket:[";
  if (link.compare(0, kPrefix.size(), kPrefix) != 0 || link.back() != ']')
    return 0;
  return std::strtoull(link.c_str() + kPrefix.size(), nullptr, 10);
}

std::string read_link(const std::string& path) {
  char buf[PATH_MAX];
  ssize_t n = readlink(path.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return {};
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace

Result<uint64_t> fd_socket_inode(uint32_t pid, int fd) {
  std::string path = fmt::format("{}/fd/{}", live_proc_dir(pid), fd);
  std::string link = read_link(path);
  if (link.empty())
    return Status::Error(fmt::format("pid {} has no fd {}", pid, fd),
                         ErrorKind::kUsage);
  uint64_t ino = parse_socket_link(link);
  if (ino == 0)
    return Status::Error(
        fmt::format("fd {} of pid {} is not a socket ({})", fd, pid, link),
        ErrorKind::kUsage);
  return ino;
}

std::vector<uint64_t> socket_inodes(uint32_t pid) {
  std::vector<uint64_t> out;
  std::string dir = live_proc_dir(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* de = readdir(d)) {
    if (de->d_name[0] == '.') continue;
    uint64_t ino = parse_socket_link(read_link(dir + "/" + de->d_name));
    if (ino) out.push_back(ino);
  }
  closedir(d);
  return out;
}

Result<std::map<uint64_t, UnixSocket>> unix_sockets() {
  int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return Status::Errno("opening a sock_diag socket", errno);
  struct {
    nlmsghdr nlh;
    unix_diag_req req;
  } msg{};
  msg.nlh.nlmsg_len = sizeof(msg);
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  msg.req.sdiag_family = AF_UNIX;
  msg.req.udiag_states = ~0u;
  msg.req.udiag_show = UDIAG_SHOW_NAME | UDIAG_SHOW_PEER | UDIAG_SHOW_RQLEN;
  if (send(fd, &msg, sizeof(msg), 0) < 0) {
    int err = errno;
    close(fd);
    return Status::Errno("querying unix sockets", err);
  }
  std::map<uint64_t, UnixSocket> out;
  alignas(nlmsghdr) char buf[32768];
  bool done = false;
  while (!done) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      return Status::Errno("reading unix sockets", err);
    }
    if (n == 0) break;
    int len = static_cast<int>(n);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len);
         h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
        done = true;
        break;
      }
      auto* m = static_cast<unix_diag_msg*>(NLMSG_DATA(h));
      UnixSocket s;
      int alen = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
      for (auto* a = reinterpret_cast<rtattr*>(m + 1); RTA_OK(a, alen);
           a = RTA_NEXT(a, alen)) {
        const char* data = static_cast<const char*>(RTA_DATA(a));
        size_t dlen = RTA_PAYLOAD(a);
        if (a->rta_type == UNIX_DIAG_NAME && dlen > 0) {
          if (data[0] == '\0')
            s.name = fmt::format("@{}", std::string_view(data + 1, dlen - 1));
          else
            s.name = std::string(data, strnlen(data, dlen));
        } else if (a->rta_type == UNIX_DIAG_PEER && dlen >= sizeof(uint32_t)) {
          uint32_t peer;
          std::memcpy(&peer, data, sizeof(peer));
          s.peer = peer;
        } else if (a->rta_type == UNIX_DIAG_RQLEN &&
                   dlen >= sizeof(unix_diag_rqlen)) {
          unix_diag_rqlen q;
          std::memcpy(&q, data, sizeof(q));
          s.queued = q.udiag_rqueue;
        }
      }
      out[m->udiag_ino] = std::move(s);
    }
  }
  close(fd);
  return out;
}

namespace {

// The sockets of `pid` whose peer's bound name satisfies `want`.
template <typename Pred>
std::vector<PeerSocket> connected_sockets(
    uint32_t pid, const std::map<uint64_t, UnixSocket>& all, Pred want) {
  std::vector<PeerSocket> out;
  for (uint64_t ino : socket_inodes(pid)) {
    auto it = all.find(ino);
    if (it == all.end() || it->second.peer == 0) continue;
    auto peer = all.find(it->second.peer);
    if (peer == all.end()) continue;
    if (want(peer->second.name)) out.push_back({ino, peer->second.name});
  }
  return out;
}

}  // namespace

Result<std::vector<uint64_t>> sockets_connected_to(
    uint32_t pid, const std::string& path,
    const std::map<uint64_t, UnixSocket>& all) {
  std::vector<uint64_t> out;
  for (const PeerSocket& s :
       connected_sockets(pid, all, [&](const std::string& name) {
         return name == path || name == "@" + path;
       }))
    out.push_back(s.inode);
  if (out.empty())
    return Status::Error(
        fmt::format("pid {} has no socket connected to {}", pid, path),
        ErrorKind::kUsage);
  return out;
}

bool is_x11_server_name(const std::string& name) {
  std::string_view n = name;
  if (!n.empty() && n.front() == '@') n.remove_prefix(1);
  static constexpr std::string_view kX11 = "/tmp/.X11-unix/X";
  if (n.substr(0, kX11.size()) != kX11) return false;
  std::string_view display = n.substr(kX11.size());
  return !display.empty() &&
         display.find_first_not_of("0123456789") == std::string_view::npos;
}

bool is_display_server_name(const std::string& name) {
  std::string_view n = name;
  if (!n.empty() && n.front() == '@') n.remove_prefix(1);
  if (n.substr(0, 15) == "/tmp/.X11-unix/") return is_x11_server_name(name);
  return is_wayland_server_name(name);
}

bool is_wayland_server_name(const std::string& name) {
  std::string_view n = name;
  if (!n.empty() && n.front() == '@') n.remove_prefix(1);
  size_t slash = n.rfind('/');
  std::string_view base =
      slash == std::string_view::npos ? n : n.substr(slash + 1);
  static constexpr std::string_view kWayland = "wayland-";
  return base.size() > kWayland.size() &&
         base.substr(0, kWayland.size()) == kWayland &&
         !base.ends_with(".lock");
}

Result<std::vector<PeerSocket>> display_connections(
    uint32_t pid, const std::map<uint64_t, UnixSocket>& all) {
  std::vector<PeerSocket> out =
      connected_sockets(pid, all, is_display_server_name);
  if (out.empty())
    return Status::Error(
        fmt::format("pid {} has no X11 or Wayland connection (no socket "
                    "connected to /tmp/.X11-unix/X* or wayland-*); pick the "
                    "channel with --input-peer PATH or --input-fd FD",
                    pid),
        ErrorKind::kUsage);
  return out;
}

}  // namespace looptrace::proc
