// A Wayland server and client built from libwayland itself, for the
// Wayland input test (tests/integration/wayland_test.cpp): no compositor
// with input injection is available here.
//
//   wl_pair server NAME LOG   listens on $XDG_RUNTIME_DIR/NAME with one
//       wl_seat (keyboard); on SIGUSR1 it adds a pointer to the seat, then
//       sends key presses and releases, button clicks and (not input)
//       modifiers, and last a press of key 16 that ends the client. Each
//       input event's send is logged just before the flush that writes it:
//       {"event":"send","type":"key_press","code":30,"time":MS,"send_ns":NS}
//   wl_pair client NAME LOG STALL_CODE STALL_MS   binds the seat, takes its
//       keyboard at once and its pointer when the server offers it; its
//       key handler is busy STALL_MS on a press of STALL_CODE. It logs each
//       read of the connection ({"event":"read","before_ns","after_ns"}) and
//       each handler run ({"event":"key"|"button","state","time","start_ns",
//       "end_ns","stalled"}).
// Times are CLOCK_MONOTONIC; event times are its milliseconds, as
// compositors take them from libinput.
#define _GNU_SOURCE
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <wayland-client.h>
#include <wayland-server.h>

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static FILE *logfp;

// --- server ----------------------------------------------------------------

static struct wl_display *sdisplay;
static struct wl_client *sclient;
static struct wl_resource *sseat, *skbd, *sptr;
static struct wl_event_source *stimer;
static uint32_t sserial;
static int sstep;

// The script after SIGUSR1: ms from the previous step, and what it sends.
enum act { CAPS, PRESS, RELEASE, BPRESS, BRELEASE, QUIT };
static const struct {
  int delay_ms;
  enum act act;
  uint32_t code;
} script[] = {
    {0, CAPS, 0},          {200, PRESS, 30},  {40, RELEASE, 30},
    {110, PRESS, 48},      {40, RELEASE, 48}, {110, PRESS, 30},
    {40, RELEASE, 30},     {110, PRESS, 46},  {40, RELEASE, 46},
    {110, PRESS, 48},      {40, RELEASE, 48}, {110, BPRESS, 0x110},
    {40, BRELEASE, 0x110}, {150, PRESS, 32},  {40, RELEASE, 32},
    {300, QUIT, 16},
};

static void log_send(const char *type, uint32_t code, uint32_t time) {
  fprintf(logfp,
          "{\"event\":\"send\",\"type\":\"%s\",\"code\":%u,\"time\":%u,"
          "\"send_ns\":%lld}\n",
          type, code, time, (long long)now_ns());
  fflush(logfp);
}

static int step(void *data) {
  (void)data;
  struct wl_array none;
  uint32_t time = (uint32_t)(now_ns() / 1000000);

  wl_array_init(&none);
  if (sstep >= (int)(sizeof(script) / sizeof(script[0]))) return 0;
  switch (script[sstep].act) {
    case CAPS:
      wl_seat_send_capabilities(
          sseat, WL_SEAT_CAPABILITY_KEYBOARD | WL_SEAT_CAPABILITY_POINTER);
      break;
    case PRESS:
    case QUIT:
      if (skbd) {
        // Not input: the client counts it, never blames it.
        wl_keyboard_send_modifiers(skbd, ++sserial, 0, 0, 0, 0);
        wl_keyboard_send_key(skbd, ++sserial, time, script[sstep].code,
                             WL_KEYBOARD_KEY_STATE_PRESSED);
        log_send("key_press", script[sstep].code, time);
      }
      break;
    case RELEASE:
      if (skbd) {
        wl_keyboard_send_key(skbd, ++sserial, time, script[sstep].code,
                             WL_KEYBOARD_KEY_STATE_RELEASED);
        log_send("key_release", script[sstep].code, time);
      }
      break;
    case BPRESS:
    case BRELEASE:
      if (sptr) {
        int press = script[sstep].act == BPRESS;
        wl_pointer_send_button(sptr, ++sserial, time, script[sstep].code,
                               press ? WL_POINTER_BUTTON_STATE_PRESSED
                                     : WL_POINTER_BUTTON_STATE_RELEASED);
        if (wl_resource_get_version(sptr) >= 5) wl_pointer_send_frame(sptr);
        log_send(press ? "button_press" : "button_release", script[sstep].code,
                 time);
      }
      break;
  }
  if (sclient) wl_client_flush(sclient);
  ++sstep;
  if (sstep < (int)(sizeof(script) / sizeof(script[0])))
    wl_event_source_timer_update(
        stimer, script[sstep].delay_ms ? script[sstep].delay_ms : 1);
  return 0;
}

static int on_go(int sig, void *data) {
  (void)sig;
  (void)data;
  if (sstep == 0) step(NULL);
  return 0;
}

static void res_destroy(struct wl_client *c, struct wl_resource *r) {
  (void)c;
  wl_resource_destroy(r);
}

static const struct wl_keyboard_interface kbd_impl = {.release = res_destroy};
static void ptr_set_cursor(struct wl_client *c, struct wl_resource *r,
                           uint32_t serial, struct wl_resource *surface,
                           int32_t x, int32_t y) {
  (void)c, (void)r, (void)serial, (void)surface, (void)x, (void)y;
}
static const struct wl_pointer_interface ptr_impl = {
    .set_cursor = ptr_set_cursor, .release = res_destroy};

static void seat_get_pointer(struct wl_client *c, struct wl_resource *r,
                             uint32_t id) {
  sptr = wl_resource_create(c, &wl_pointer_interface,
                            wl_resource_get_version(r), id);
  wl_resource_set_implementation(sptr, &ptr_impl, NULL, NULL);
}
static void seat_get_keyboard(struct wl_client *c, struct wl_resource *r,
                              uint32_t id) {
  skbd = wl_resource_create(c, &wl_keyboard_interface,
                            wl_resource_get_version(r), id);
  wl_resource_set_implementation(skbd, &kbd_impl, NULL, NULL);
}
static void seat_get_touch(struct wl_client *c, struct wl_resource *r,
                           uint32_t id) {
  struct wl_resource *t = wl_resource_create(c, &wl_touch_interface,
                                             wl_resource_get_version(r), id);
  (void)t;
}
static const struct wl_seat_interface seat_impl = {
    .get_pointer = seat_get_pointer,
    .get_keyboard = seat_get_keyboard,
    .get_touch = seat_get_touch,
    .release = res_destroy};

static void bind_seat(struct wl_client *c, void *data, uint32_t version,
                      uint32_t id) {
  (void)data;
  sclient = c;
  sseat = wl_resource_create(c, &wl_seat_interface, version, id);
  wl_resource_set_implementation(sseat, &seat_impl, NULL, NULL);
  wl_seat_send_capabilities(sseat, WL_SEAT_CAPABILITY_KEYBOARD);
}

static void client_gone(struct wl_listener *l, void *data) {
  (void)l;
  if (data == sclient) wl_display_terminate(sdisplay);
}
static struct wl_listener gone = {.notify = client_gone};
static void client_created(struct wl_listener *l, void *data) {
  (void)l;
  wl_client_add_destroy_listener(data, &gone);
}
static struct wl_listener created = {.notify = client_created};

static int server(const char *name) {
  sdisplay = wl_display_create();
  if (!sdisplay || wl_display_add_socket(sdisplay, name) != 0) {
    perror("wl_pair: add_socket");
    return 1;
  }
  wl_global_create(sdisplay, &wl_seat_interface, 5, NULL, bind_seat);
  wl_display_add_client_created_listener(sdisplay, &created);
  struct wl_event_loop *loop = wl_display_get_event_loop(sdisplay);
  stimer = wl_event_loop_add_timer(loop, step, NULL);
  wl_event_loop_add_signal(loop, SIGUSR1, on_go, NULL);
  fprintf(stderr, "wl_pair: listening\n");
  wl_display_run(sdisplay);
  wl_display_destroy(sdisplay);
  return 0;
}

// --- client ----------------------------------------------------------------

static struct wl_seat *cseat;
static struct wl_keyboard *ckbd;
static struct wl_pointer *cptr;
static uint32_t stall_code;
static int64_t stall_ns;
static int quit;

static void busy(int64_t ns) {
  int64_t until = now_ns() + ns;
  while (now_ns() < until) {
  }
}

static void log_handler(const char *ev, uint32_t code, uint32_t state,
                        uint32_t time, int64_t start, int64_t end,
                        int stalled) {
  fprintf(logfp,
          "{\"event\":\"%s\",\"code\":%u,\"state\":%u,\"time\":%u,"
          "\"start_ns\":%lld,\"end_ns\":%lld,\"stalled\":%s}\n",
          ev, code, state, time, (long long)start, (long long)end,
          stalled ? "true" : "false");
  fflush(logfp);
}

// The handlers looptrace probes: a dispatch per input event, its state
// (arg5) and time (arg3) the event's.
__attribute__((noinline)) void lt_wl_on_key(void *data, struct wl_keyboard *k,
                                            uint32_t serial, uint32_t time,
                                            uint32_t key, uint32_t state) {
  (void)data, (void)k, (void)serial;
  int64_t start = now_ns();
  int stalled = key == stall_code && state == WL_KEYBOARD_KEY_STATE_PRESSED;
  if (stalled) busy(stall_ns);
  log_handler("key", key, state, time, start, now_ns(), stalled);
  if (key == 16) quit = 1;
}

__attribute__((noinline)) void lt_wl_on_button(void *data, struct wl_pointer *p,
                                               uint32_t serial, uint32_t time,
                                               uint32_t button,
                                               uint32_t state) {
  (void)data, (void)p, (void)serial;
  int64_t start = now_ns();
  log_handler("button", button, state, time, start, now_ns(), 0);
}

static void kb_keymap(void *d, struct wl_keyboard *k, uint32_t f, int fd,
                      uint32_t size) {
  (void)d, (void)k, (void)f, (void)size;
  close(fd);
}
static void kb_enter(void *d, struct wl_keyboard *k, uint32_t s,
                     struct wl_surface *sf, struct wl_array *keys) {
  (void)d, (void)k, (void)s, (void)sf, (void)keys;
}
static void kb_leave(void *d, struct wl_keyboard *k, uint32_t s,
                     struct wl_surface *sf) {
  (void)d, (void)k, (void)s, (void)sf;
}
static void kb_modifiers(void *d, struct wl_keyboard *k, uint32_t s,
                         uint32_t dep, uint32_t lat, uint32_t lock,
                         uint32_t group) {
  (void)d, (void)k, (void)s, (void)dep, (void)lat, (void)lock, (void)group;
}
static void kb_repeat(void *d, struct wl_keyboard *k, int32_t rate,
                      int32_t delay) {
  (void)d, (void)k, (void)rate, (void)delay;
}
static const struct wl_keyboard_listener kb_listener = {
    kb_keymap, kb_enter, kb_leave, lt_wl_on_key, kb_modifiers, kb_repeat};

static void p_enter(void *d, struct wl_pointer *p, uint32_t s,
                    struct wl_surface *sf, wl_fixed_t x, wl_fixed_t y) {
  (void)d, (void)p, (void)s, (void)sf, (void)x, (void)y;
}
static void p_leave(void *d, struct wl_pointer *p, uint32_t s,
                    struct wl_surface *sf) {
  (void)d, (void)p, (void)s, (void)sf;
}
static void p_motion(void *d, struct wl_pointer *p, uint32_t t, wl_fixed_t x,
                     wl_fixed_t y) {
  (void)d, (void)p, (void)t, (void)x, (void)y;
}
static void p_axis(void *d, struct wl_pointer *p, uint32_t t, uint32_t a,
                   wl_fixed_t v) {
  (void)d, (void)p, (void)t, (void)a, (void)v;
}
static void p_frame(void *d, struct wl_pointer *p) { (void)d, (void)p; }
static void p_axis_source(void *d, struct wl_pointer *p, uint32_t s) {
  (void)d, (void)p, (void)s;
}
static void p_axis_stop(void *d, struct wl_pointer *p, uint32_t t, uint32_t a) {
  (void)d, (void)p, (void)t, (void)a;
}
static void p_axis_discrete(void *d, struct wl_pointer *p, uint32_t a,
                            int32_t v) {
  (void)d, (void)p, (void)a, (void)v;
}
static const struct wl_pointer_listener p_listener = {
    .enter = p_enter,
    .leave = p_leave,
    .motion = p_motion,
    .button = lt_wl_on_button,
    .axis = p_axis,
    .frame = p_frame,
    .axis_source = p_axis_source,
    .axis_stop = p_axis_stop,
    .axis_discrete = p_axis_discrete};

static void seat_caps(void *d, struct wl_seat *s, uint32_t caps) {
  (void)d;
  if ((caps & WL_SEAT_CAPABILITY_KEYBOARD) && !ckbd) {
    ckbd = wl_seat_get_keyboard(s);
    wl_keyboard_add_listener(ckbd, &kb_listener, NULL);
  }
  if ((caps & WL_SEAT_CAPABILITY_POINTER) && !cptr) {
    cptr = wl_seat_get_pointer(s);
    wl_pointer_add_listener(cptr, &p_listener, NULL);
  }
}
static void seat_name(void *d, struct wl_seat *s, const char *n) {
  (void)d, (void)s, (void)n;
}
static const struct wl_seat_listener seat_listener = {seat_caps, seat_name};

static void reg_global(void *d, struct wl_registry *r, uint32_t name,
                       const char *iface, uint32_t version) {
  (void)d;
  if (strcmp(iface, "wl_seat") == 0 && !cseat) {
    cseat = wl_registry_bind(r, name, &wl_seat_interface,
                             version < 5 ? version : 5);
    wl_seat_add_listener(cseat, &seat_listener, NULL);
  }
}
static void reg_remove(void *d, struct wl_registry *r, uint32_t name) {
  (void)d, (void)r, (void)name;
}
static const struct wl_registry_listener reg_listener = {reg_global,
                                                         reg_remove};

static int client(const char *name) {
  struct wl_display *d = wl_display_connect(name);
  if (!d) {
    perror("wl_pair: connect");
    return 1;
  }
  struct wl_registry *reg = wl_display_get_registry(d);
  wl_registry_add_listener(reg, &reg_listener, NULL);
  wl_display_roundtrip(d);
  wl_display_roundtrip(d);
  if (!ckbd) {
    fprintf(stderr, "wl_pair: no keyboard\n");
    return 1;
  }
  fprintf(stderr, "wl_pair: ready\n");
  struct pollfd pfd = {.fd = wl_display_get_fd(d), .events = POLLIN};
  while (!quit) {
    while (wl_display_prepare_read(d) != 0) wl_display_dispatch_pending(d);
    wl_display_flush(d);
    if (poll(&pfd, 1, -1) < 0) {
      wl_display_cancel_read(d);
      continue;
    }
    int64_t before = now_ns();
    if (wl_display_read_events(d) != 0) break;
    int64_t after = now_ns();
    fprintf(logfp,
            "{\"event\":\"read\",\"before_ns\":%lld,\"after_ns\":%lld}\n",
            (long long)before, (long long)after);
    if (wl_display_dispatch_pending(d) < 0) break;
  }
  wl_display_disconnect(d);
  return quit ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc >= 4 && strcmp(argv[1], "server") == 0) {
    logfp = fopen(argv[3], "w");
    return logfp ? server(argv[2]) : 1;
  }
  if (argc >= 6 && strcmp(argv[1], "client") == 0) {
    logfp = fopen(argv[3], "w");
    stall_code = (uint32_t)atoi(argv[4]);
    stall_ns = (int64_t)atoi(argv[5]) * 1000000;
    return logfp ? client(argv[2]) : 1;
  }
  fprintf(stderr,
          "usage: wl_pair server NAME LOG | client NAME LOG STALL_CODE "
          "STALL_MS\n");
  return 2;
}
