/* A GLib loop with no Python in it that execs another program once it has
 * dispatched its timeouts: the same thread then runs the new program's
 * loop (python3 and PyGObject, say). GLib is loaded with dlopen (no
 * development headers needed).
 *
 *   glib_exec N PROGRAM [ARGS...]   N timeouts of 2 ms, then exec PROGRAM
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef int (*source_func)(void *);
static void *(*loop_new)(void *, int);
static unsigned (*timeout_add)(unsigned, source_func, void *);
static void (*loop_run)(void *);
static void (*loop_quit)(void *);

static int left;

static int on_timeout(void *loop) {
  if (--left > 0) return 1;
  loop_quit(loop);
  return 0;
}

int main(int argc, char **argv) {
  void *glib, *loop;

  if (argc < 3 || (left = atoi(argv[1])) <= 0) {
    fprintf(stderr, "usage: glib_exec N PROGRAM [ARGS...]\n");
    return 2;
  }
  glib = dlopen("libglib-2.0.so.0", RTLD_NOW);
  if (!glib) {
    fprintf(stderr, "glib_exec: %s\n", dlerror());
    return 1;
  }
  *(void **)&loop_new = dlsym(glib, "g_main_loop_new");
  *(void **)&timeout_add = dlsym(glib, "g_timeout_add");
  *(void **)&loop_run = dlsym(glib, "g_main_loop_run");
  *(void **)&loop_quit = dlsym(glib, "g_main_loop_quit");
  if (!loop_new || !timeout_add || !loop_run || !loop_quit) {
    fprintf(stderr, "glib_exec: %s\n", dlerror());
    return 1;
  }
  loop = loop_new(NULL, 0);
  timeout_add(2, on_timeout, loop);
  loop_run(loop);
  fprintf(stderr, "glib_exec: %s dispatches done, exec %s\n", argv[1], argv[2]);
  execv(argv[2], argv + 2);
  perror("glib_exec: execv");
  return 127;
}
