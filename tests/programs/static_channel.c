/*
 * A statically linked program with an Android-like input channel, for
 * `--input-mode uprobe --input-binary`: its recvfrom/sendto are its own
 * code, not libc.so's. One thread plays both ends of a SOCK_SEQPACKET pair:
 * for each of N events it sends a KEY InputMessage (104 bytes) on the
 * dispatcher end, receives it on the app end, works ~2 ms, replies FINISHED
 * (24 bytes) and receives that on the dispatcher end.
 *
 * Ground truth, one JSON line per event in LOG (CLOCK_MONOTONIC ns, each
 * read right before a send or right after a receive):
 *   {"seq", "event_time_ns", "sent_ns", "received_ns", "finished_ns",
 *    "finish_received_ns"}
 * Usage: static_channel N LOG
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void put32(unsigned char *m, size_t off, uint32_t v) {
  memcpy(m + off, &v, sizeof(v));
}

static void put64(unsigned char *m, size_t off, int64_t v) {
  memcpy(m + off, &v, sizeof(v));
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: static_channel N LOG\n");
    return 2;
  }
  int n = atoi(argv[1]);
  FILE *log = fopen(argv[2], "w");
  int sv[2];
  if (!log || socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) {
    perror("static_channel");
    return 1;
  }
  for (int seq = 1; seq <= n; ++seq) {
    unsigned char key[104] = {0}, fin[24] = {0}, buf[4096];
    int64_t event_time = now_ns();
    put32(key, 0, 0); /* KEY */
    put32(key, 4, (uint32_t)seq);
    put32(key, 8, (uint32_t)seq); /* eventId */
    put64(key, 16, event_time);
    int64_t sent = now_ns();
    if (sendto(sv[0], key, sizeof(key), 0, NULL, 0) != sizeof(key)) return 1;
    if (recvfrom(sv[1], buf, sizeof(buf), 0, NULL, NULL) != sizeof(key))
      return 1;
    int64_t received = now_ns();
    while (now_ns() - received < 2000000) {
    }
    put32(fin, 0, 2); /* FINISHED */
    put32(fin, 4, (uint32_t)seq);
    fin[8] = 1;
    put64(fin, 16, received);
    int64_t finished = now_ns();
    if (sendto(sv[1], fin, sizeof(fin), 0, NULL, 0) != sizeof(fin)) return 1;
    if (recvfrom(sv[0], buf, sizeof(buf), 0, NULL, NULL) != sizeof(fin))
      return 1;
    int64_t finish_received = now_ns();
    fprintf(log,
            "{\"seq\":%d,\"event_time_ns\":%lld,\"sent_ns\":%lld,"
            "\"received_ns\":%lld,\"finished_ns\":%lld,"
            "\"finish_received_ns\":%lld}\n",
            seq, (long long)event_time, (long long)sent, (long long)received,
            (long long)finished, (long long)finish_received);
  }
  fclose(log);
  return 0;
}
