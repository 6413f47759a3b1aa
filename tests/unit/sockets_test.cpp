// Picking raw input channels by their peer: display server names, and the
// sockets of this very process found through sock_diag and /proc/self/fd.
#include "proc/sockets.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

namespace looptrace::proc {
namespace {

TEST(DisplayServerName, X11AndWaylandSockets) {
  EXPECT_TRUE(is_display_server_name("/tmp/.X11-unix/X0"));
  EXPECT_TRUE(is_display_server_name("/tmp/.X11-unix/X12"));
  EXPECT_TRUE(is_display_server_name("@/tmp/.X11-unix/X1"));
  EXPECT_TRUE(is_display_server_name("/run/user/1000/wayland-0"));
  EXPECT_TRUE(is_display_server_name("wayland-1"));
  EXPECT_TRUE(is_display_server_name("/run/user/0/wayland-gamescope"));
}

TEST(DisplayServerName, OtherSocketsAreNot) {
  EXPECT_FALSE(is_display_server_name(""));
  EXPECT_FALSE(is_display_server_name("/tmp/.X11-unix/X"));
  EXPECT_FALSE(is_display_server_name("/tmp/.X11-unix/X0.lock"));
  EXPECT_FALSE(is_display_server_name("/tmp/.X11-unix/Xfoo"));
  EXPECT_FALSE(is_display_server_name("/tmp/.ICE-unix/1234"));
  EXPECT_FALSE(is_display_server_name("/run/user/1000/wayland-0.lock"));
  EXPECT_FALSE(is_display_server_name("/run/user/1000/wayland-"));
  EXPECT_FALSE(is_display_server_name("/run/user/1000/pipewire-0"));
  EXPECT_FALSE(is_display_server_name("/run/wayland-1/bus"));
  EXPECT_FALSE(is_display_server_name("/run/dbus/system_bus_socket"));
}

// A listener bound at `path` in a fresh directory, and a client connected
// to it: the client's socket is what display_connections must find.
class ConnectedPair {
 public:
  explicit ConnectedPair(const std::string& name) {
    char tmpl[] = "/tmp/lt-sockets-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/" + name;
    listener_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    ok_ = bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) ==
              0 &&
          listen(listener_, 1) == 0;
    client_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ok_ = ok_ && connect(client_, reinterpret_cast<sockaddr*>(&addr),
                         sizeof(addr)) == 0;
    server_ = ok_ ? accept(listener_, nullptr, nullptr) : -1;
    ok_ = ok_ && server_ >= 0;
  }
  ~ConnectedPair() {
    for (int fd : {client_, server_, listener_})
      if (fd >= 0) close(fd);
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  bool ok() const { return ok_; }
  int client() const { return client_; }
  const std::string& path() const { return path_; }

 private:
  std::string dir_, path_;
  int listener_ = -1, client_ = -1, server_ = -1;
  bool ok_ = false;
};

TEST(DisplayConnections, FindsThisProcessesWaylandConnection) {
  ConnectedPair wl("wayland-7");
  ASSERT_TRUE(wl.ok()) << std::strerror(errno);
  ConnectedPair other("not-a-display.sock");
  ASSERT_TRUE(other.ok()) << std::strerror(errno);
  auto all = unix_sockets();
  if (!all.ok())
    GTEST_SKIP() << "no sock_diag here: " << all.status().message();
  // The client socket's inode, from the kernel directly.
  struct stat st {};
  ASSERT_EQ(fstat(wl.client(), &st), 0) << std::strerror(errno);
  const uint64_t client = st.st_ino;

  auto conns = display_connections(static_cast<uint32_t>(getpid()), *all);
  ASSERT_TRUE(conns.ok()) << conns.status().message();
  // Only the client end: the accepted end's peer (the client) has no name.
  ASSERT_EQ(conns->size(), 1u);
  EXPECT_EQ((*conns)[0].inode, client);
  EXPECT_EQ((*conns)[0].peer, wl.path());

  auto by_path =
      sockets_connected_to(static_cast<uint32_t>(getpid()), wl.path(), *all);
  ASSERT_TRUE(by_path.ok()) << by_path.status().message();
  EXPECT_EQ(*by_path, std::vector<uint64_t>{client});
  auto by_fd = fd_socket_inode(static_cast<uint32_t>(getpid()), wl.client());
  ASSERT_TRUE(by_fd.ok()) << by_fd.status().message();
  EXPECT_EQ(*by_fd, client);
}

TEST(DisplayConnections, NoneIsAnErrorThatSaysWhatWasLookedFor) {
  ConnectedPair other("plain.sock");
  ASSERT_TRUE(other.ok()) << std::strerror(errno);
  auto all = unix_sockets();
  if (!all.ok())
    GTEST_SKIP() << "no sock_diag here: " << all.status().message();
  // This test process may inherit a display connection from a desktop
  // session; there is none in CI.
  auto conns = display_connections(static_cast<uint32_t>(getpid()), *all);
  if (conns.ok())
    GTEST_SKIP() << "this process has a display connection: "
                 << conns->front().peer;
  EXPECT_NE(conns.status().message().find("no X11 or Wayland connection"),
            std::string::npos)
      << conns.status().message();
}

}  // namespace
}  // namespace looptrace::proc
