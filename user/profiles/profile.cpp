#include "profiles/profile.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "base/log.h"
#include "proc/process.h"
#include "profiles/key_expr.h"
#include "trace/input_message.h"

namespace looptrace {
namespace {

// The reference app (refapp/): Looper::dispatchMessage(Message*) with
// Message { Handler* target @0; callback @8; int32 what @16 }. The target's
// vtable names the handler class, as Android's printer names msg.target.
// Idle handlers run through MessageQueue::runIdleHandler(IdleHandler*).
// Its Choreographer stand-in draws each frame in FrameHandler::doFrame(k,
// frameTimeNanos, frameIntervalNanos): a frame, its tick the vsync it was
// scheduled for, at the display's interval (refresh_ns); its
// phases are doCallbacks(type, frameTimeNanos), input, animation and
// traversal.
constexpr std::string_view kRefappProfile = R"json({
  "name": "refapp",
  "description": "looptrace's reference app: an Android-like Looper",
  "probes": [
    {
      "role": "dispatch",
      "binary": "refapp",
      "symbol": "refapp::Looper::dispatchMessage(refapp::Message*)",
      "keys": [
        {"name": "target", "expr": "*(*(arg1+0))", "format": "vtable"},
        {"name": "callback", "expr": "*(arg1+8)", "format": "sym"},
        {"name": "what", "expr": "u32 *(arg1+16)", "format": "int"},
        {"name": "msg", "expr": "arg1", "format": "ptr"}
      ]
    },
    {
      "role": "dispatch",
      "binary": "refapp",
      "symbol": "refapp::FrameHandler::doFrame(long, long, long)",
      "label": "doFrame",
      "keys": [
        {"name": "index", "expr": "arg1", "format": "int"},
        {"name": "due_ns", "expr": "arg2", "format": "int"},
        {"name": "refresh_ns", "expr": "arg3", "format": "int"}
      ],
      "frame": {}
    },
    {
      "role": "dispatch",
      "binary": "refapp",
      "symbol": "refapp::FrameHandler::doCallbacks(int, long)",
      "label": "doCallbacks",
      "keys": [
        {"name": "type", "expr": "arg1", "format": "enum",
         "names": {"0": "input", "1": "animation", "3": "traversal"}}
      ],
      "phase": true
    },
    {
      "role": "enqueue",
      "binary": "refapp",
      "symbol": "refapp::MessageQueue::enqueueMessage(refapp::Message*, long)",
      "async_mask": 2,
      "keys": [
        {"name": "queue", "expr": "arg0", "format": "ptr"},
        {"name": "msg", "expr": "arg1", "format": "ptr"},
        {"name": "when", "expr": "arg2", "format": "int"},
        {"name": "flags", "expr": "u32 *(arg1+56)", "format": "hex"}
      ]
    },
    {
      "role": "idle",
      "binary": "refapp",
      "symbol": "refapp::MessageQueue::runIdleHandler(refapp::IdleHandler*)",
      "keys": [
        {"name": "handler", "expr": "*(arg1+0)", "format": "vtable"}
      ]
    },
    {
      "role": "barrier.post",
      "binary": "refapp",
      "symbol": "refapp::MessageQueue::postSyncBarrier(long)",
      "keys": [{"name": "queue", "expr": "arg0", "format": "ptr"}]
    },
    {
      "role": "barrier.remove",
      "binary": "refapp",
      "symbol": "refapp::MessageQueue::removeSyncBarrier(int)",
      "keys": [
        {"name": "queue", "expr": "arg0", "format": "ptr"},
        {"name": "token", "expr": "arg1", "format": "int"}
      ]
    }
  ]
})json";

// GLib's main loop (GTK, GNOME programs, python3-gi): one span per source
// dispatch, by the source's kind. Each kind's dispatch function is static
// (no symbol in a distribution's stripped libglib) but its GSourceFuncs
// table is exported: { prepare, check, dispatch @16, finalize }. A
// dispatch is called as dispatch(GSource*, GSourceFunc callback, gpointer
// user_data): the callback names what ran, and the source's name
// (g_source_set_name) is GSource.name at +80: GSource is declared in
// GLib's public header, its layout fixed for all of GLib 2; checked against
// GLib 2.74 (Debian 12). A timeout's due time is its GSourcePrivate's
// ready_time (us, CLOCK_MONOTONIC; priv at GSource+88, ready_time at +16):
// a private structure, so the profile is gated on the GLib versions it
// was checked against (glib_major_version, glib_minor_version). Sources with
// their own GSourceFuncs (GDK's events, a program's custom sources) are
// not seen: probe g_main_context_dispatch for whole batches. A callback
// given from Python (python3-gi's GLib.timeout_add, idle_add,
// io_add_watch, ...) is PyGObject's closure, its user_data a PyGICClosure
// { info; PyObject *function @8; ... } (pygi-closure.h, unchanged since
// PyGObject 3.8): the kernel checks that what is there is a Python function
// or bound method and reads its code object (format pyfunc). GTK 3 and 4
// paint each frame from a timeout their frame clock names
// gdk_frame_clock_paint_idle (gdkframeclockidle.c): those spans are frames,
// the timeout's due time their tick. Its name is read once per callback
// (and Python function) on a thread, not at each dispatch ("by"): GTK
// names the sources of gdk_frame_clock_paint_idle alike.
constexpr std::string_view kGlibProfile = R"json({
  "name": "glib",
  "description": "GLib main loops (GTK, python3-gi): a span per source dispatch, by kind, naming its callback",
  "version": {"binary": "libglib-2.0.so.0", "name": "GLib",
              "major": "glib_major_version", "minor": "glib_minor_version",
              "checked": ["2.74"]},
  "probes": [
    {
      "role": "dispatch",
      "binary": "libglib-2.0.so.0",
      "symbol": "*(g_timeout_funcs+16)",
      "label": "GLib timeout",
      "keys": [
        {"name": "callback", "expr": "arg1", "format": "sym"},
        {"name": "name", "expr": "*(arg0+80)", "format": "str"},
        {"name": "python", "expr": "*(arg2+8)", "format": "pyfunc"},
        {"name": "due_us", "expr": "*(*(arg0+88)+16)", "format": "int"}
      ],
      "frame": {"names": ["[gtk+] gdk_frame_clock_paint_idle",
                          "[gtk] gdk_frame_clock_paint_idle"],
                "by": ["callback", "python"]}
    },
    {
      "role": "idle",
      "binary": "libglib-2.0.so.0",
      "symbol": "*(g_idle_funcs+16)",
      "label": "GLib idle",
      "keys": [
        {"name": "callback", "expr": "arg1", "format": "sym"},
        {"name": "name", "expr": "*(arg0+80)", "format": "str"},
        {"name": "python", "expr": "*(arg2+8)", "format": "pyfunc"}
      ]
    },
    {
      "role": "dispatch",
      "binary": "libglib-2.0.so.0",
      "symbol": "*(g_io_watch_funcs+16)",
      "label": "GLib I/O watch",
      "keys": [
        {"name": "callback", "expr": "arg1", "format": "sym"},
        {"name": "name", "expr": "*(arg0+80)", "format": "str"},
        {"name": "python", "expr": "*(arg2+8)", "format": "pyfunc"}
      ]
    },
    {
      "role": "dispatch",
      "binary": "libglib-2.0.so.0",
      "symbol": "*(g_unix_fd_source_funcs+16)",
      "label": "GLib unix fd",
      "keys": [
        {"name": "callback", "expr": "arg1", "format": "sym"},
        {"name": "name", "expr": "*(arg0+80)", "format": "str"},
        {"name": "python", "expr": "*(arg2+8)", "format": "pyfunc"}
      ]
    },
    {
      "role": "dispatch",
      "binary": "libglib-2.0.so.0",
      "symbol": "*(g_child_watch_funcs+16)",
      "label": "GLib child watch",
      "keys": [
        {"name": "callback", "expr": "arg1", "format": "sym"},
        {"name": "name", "expr": "*(arg0+80)", "format": "str"},
        {"name": "python", "expr": "*(arg2+8)", "format": "pyfunc"}
      ]
    },
    {
      "role": "dispatch",
      "binary": "libglib-2.0.so.0",
      "symbol": "*(g_unix_signal_funcs+16)",
      "label": "GLib unix signal",
      "keys": [
        {"name": "callback", "expr": "arg1", "format": "sym"},
        {"name": "name", "expr": "*(arg0+80)", "format": "str"},
        {"name": "python", "expr": "*(arg2+8)", "format": "pyfunc"}
      ]
    }
  ]
})json";

// Node.js (libuv inside /usr/bin/node): the timers' run
// (node::Environment::RunTimers, every expired timer's JS callback) and
// every call from native code into JavaScript
// (node::InternalMakeCallback: I/O completions, immediates, fs, net,
// thread-pool results, close callbacks). JavaScript function names come
// from the process's perf map (`node --perf-basic-prof`) in the stacks.
// Checked against Node 20 (Debian 12).
constexpr std::string_view kNodeProfile = R"json({
  "name": "node",
  "description": "Node.js: timer runs, every callback into JavaScript and HTTP requests read",
  "probes": [
    {
      "role": "dispatch",
      "binary": "node",
      "symbol": "node::Environment::RunTimers(uv_timer_s*)",
      "label": "Node timers"
    },
    {
      "role": "dispatch",
      "binary": "node",
      "symbol": "node::InternalMakeCallback(node::Environment*, v8::Local<v8::Object>, v8::Local<v8::Object>, v8::Local<v8::Function>, int, v8::Local<v8::Value>*, node::async_context)",
      "label": "Node callback"
    },
    {
      "role": "dispatch",
      "binary": "node",
      "symbol": "non-virtual thunk to node::(anonymous namespace)::Parser::OnStreamRead(long, uv_buf_t const&)",
      "label": "Node HTTP"
    }
  ]
})json";

// Qt 5 and Qt 6 (QtCore, any front end: widgets, QML, PyQt): the
// outermost QCoreApplication::notifyInternal2(QObject *receiver, QEvent
// *event) per event, named by the receiver's class (its vtable's symbol)
// and the event's QEvent::Type. Events sent from inside a handler
// (sendEvent) are part of the one being handled. QEvent in Qt 5 is { vptr;
// QEventPrivate *d; ushort t @16; ... }, in Qt 6 { vptr; quint16 t @8;
// ... }; Qt keeps the layout of its public classes for a whole major
// version, and libQt5Core.so.5 is Qt 5, libQt6Core.so.6 Qt 6: checked
// against 5.15.8 and 6.4.2 (Debian 12). One template, @QT@ the major
// version and @TYPE_AT@ the offset of QEvent::t; the type numbers are
// the same in both.
constexpr std::string_view kQtProfile = R"json({
  "name": "qt@QT@",
  "description": "Qt @QT@: the outermost event notification, by receiver class and event type",
  "probes": [
    {
      "role": "dispatch",
      "binary": "libQt@QT@Core.so.@QT@",
      "symbol": "QCoreApplication::notifyInternal2(QObject*, QEvent*)",
      "label": "Qt event",
      "outermost": true,
      "keys": [
        {"name": "receiver", "expr": "*(arg0+0)", "format": "vtable"},
        {"name": "type", "expr": "u16 *(arg1+@TYPE_AT@)", "format": "enum",
          "names": {
            "0": "None",
            "1": "Timer",
            "2": "MouseButtonPress",
            "3": "MouseButtonRelease",
            "4": "MouseButtonDblClick",
            "5": "MouseMove",
            "6": "KeyPress",
            "7": "KeyRelease",
            "8": "FocusIn",
            "9": "FocusOut",
            "10": "Enter",
            "11": "Leave",
            "12": "Paint",
            "13": "Move",
            "14": "Resize",
            "15": "Create",
            "16": "Destroy",
            "17": "Show",
            "18": "Hide",
            "19": "Close",
            "20": "Quit",
            "21": "ParentChange",
            "22": "ThreadChange",
            "23": "FocusAboutToChange",
            "24": "WindowActivate",
            "25": "WindowDeactivate",
            "26": "ShowToParent",
            "27": "HideToParent",
            "31": "Wheel",
            "33": "WindowTitleChange",
            "34": "WindowIconChange",
            "39": "PaletteChange",
            "40": "Clipboard",
            "43": "MetaCall",
            "50": "SockAct",
            "51": "ShortcutOverride",
            "52": "DeferredDelete",
            "60": "DragEnter",
            "61": "DragMove",
            "62": "DragLeave",
            "63": "Drop",
            "68": "ChildAdded",
            "69": "ChildPolished",
            "71": "ChildRemoved",
            "74": "PolishRequest",
            "75": "Polish",
            "76": "LayoutRequest",
            "77": "UpdateRequest",
            "78": "UpdateLater",
            "82": "ContextMenu",
            "83": "InputMethod",
            "97": "FontChange",
            "98": "EnabledChange",
            "99": "ActivationChange",
            "100": "StyleChange",
            "105": "WindowStateChange",
            "110": "ToolTip",
            "117": "Shortcut",
            "121": "ApplicationActivate",
            "122": "ApplicationDeactivate",
            "127": "HoverEnter",
            "128": "HoverLeave",
            "129": "HoverMove",
            "170": "DynamicPropertyChange",
            "178": "ContentsRectChange",
            "183": "CursorChange",
            "194": "TouchBegin",
            "195": "TouchUpdate",
            "196": "TouchEnd",
            "197": "NativeGesture",
            "198": "Gesture",
            "203": "WinIdChange",
            "205": "Scroll",
            "206": "Expose",
            "207": "InputMethodQuery",
            "209": "TouchCancel",
            "210": "ThemeChange",
            "211": "SockClose",
            "213": "StyleAnimationUpdate",
            "214": "ApplicationStateChange",
            "217": "PlatformSurface",
            "1000": "User"
          }},
        {"name": "object", "expr": "arg0", "format": "ptr"}
      ]
    }
  ]
})json";

// GTK 3: GLib's sources (above) and every GDK event GTK handles,
// gtk_main_do_event(GdkEvent*), named by its type. GDK's event source has
// its own static GSourceFuncs, which the glib probes do not see; this
// does. GdkEvent is a union whose every member starts { GdkEventType type;
// GdkWindow *window; ... }: public API, fixed for all of GTK 3
// (libgtk-3.so.0); checked against 3.24 (Debian 12). A handler a Python
// program connected (widget.connect("key-press-event", on_key)) runs from
// g_closure_invoke(GClosure*, ...) as PyGObject's closure, PyGClosure {
// GClosure closure (32 bytes); PyObject *callback @32; ... } (pygi-closure.h
// and pygtype.h, both kinds, unchanged since PyGObject 3.0): a span named
// by that callable, nested in the event's; a closure whose callable is no
// Python function (every C handler) is no span ("only_if").
constexpr std::string_view kGtk3Profile = R"json({
  "name": "gtk3",
  "description": "GTK 3: GDK events by type, and GLib's sources as the glib profile",
  "probes": [
    {
      "role": "dispatch",
      "binary": "libgtk-3.so.0",
      "symbol": "gtk_main_do_event",
      "label": "GTK event",
      "phase": true,
      "keys": [
        {"name": "type", "expr": "u32 *(arg0+0)", "format": "enum",
          "names": {
            "-1": "GDK_NOTHING",
            "0": "GDK_DELETE",
            "1": "GDK_DESTROY",
            "2": "GDK_EXPOSE",
            "3": "GDK_MOTION_NOTIFY",
            "4": "GDK_BUTTON_PRESS",
            "5": "GDK_2BUTTON_PRESS",
            "6": "GDK_3BUTTON_PRESS",
            "7": "GDK_BUTTON_RELEASE",
            "8": "GDK_KEY_PRESS",
            "9": "GDK_KEY_RELEASE",
            "10": "GDK_ENTER_NOTIFY",
            "11": "GDK_LEAVE_NOTIFY",
            "12": "GDK_FOCUS_CHANGE",
            "13": "GDK_CONFIGURE",
            "14": "GDK_MAP",
            "15": "GDK_UNMAP",
            "16": "GDK_PROPERTY_NOTIFY",
            "17": "GDK_SELECTION_CLEAR",
            "18": "GDK_SELECTION_REQUEST",
            "19": "GDK_SELECTION_NOTIFY",
            "20": "GDK_PROXIMITY_IN",
            "21": "GDK_PROXIMITY_OUT",
            "22": "GDK_DRAG_ENTER",
            "23": "GDK_DRAG_LEAVE",
            "24": "GDK_DRAG_MOTION",
            "25": "GDK_DRAG_STATUS",
            "26": "GDK_DROP_START",
            "27": "GDK_DROP_FINISHED",
            "28": "GDK_CLIENT_EVENT",
            "29": "GDK_VISIBILITY_NOTIFY",
            "31": "GDK_SCROLL",
            "32": "GDK_WINDOW_STATE",
            "33": "GDK_SETTING",
            "34": "GDK_OWNER_CHANGE",
            "35": "GDK_GRAB_BROKEN",
            "36": "GDK_DAMAGE",
            "37": "GDK_TOUCH_BEGIN",
            "38": "GDK_TOUCH_UPDATE",
            "39": "GDK_TOUCH_END",
            "40": "GDK_TOUCH_CANCEL",
            "41": "GDK_TOUCHPAD_SWIPE",
            "42": "GDK_TOUCHPAD_PINCH",
            "43": "GDK_PAD_BUTTON_PRESS",
            "44": "GDK_PAD_BUTTON_RELEASE",
            "45": "GDK_PAD_RING",
            "46": "GDK_PAD_STRIP",
            "47": "GDK_PAD_GROUP_MODE"
          }},
        {"name": "window", "expr": "*(arg0+8)", "format": "ptr"},
        {"name": "time", "expr": "u32 *(arg0+20)", "format": "int"}
      ],
      "input": {"type": "type", "time": "time",
        "kinds": {"3": "motion", "4": "button_press", "5": "button_press",
          "6": "button_press", "7": "button_release", "8": "key_press",
          "9": "key_release", "37": "touch_begin", "38": "touch_update",
          "39": "touch_end"}}
    },
    {
      "role": "dispatch",
      "binary": "libgobject-2.0.so.0",
      "symbol": "g_closure_invoke",
      "label": "GObject signal handler",
      "keys": [
        {"name": "python", "expr": "*(arg0+32)", "format": "pyfunc"}
      ],
      "only_if": "python"
    }
  ]
})json";

// GTK 4 (libgtk-4.so.1; checked against 4.8, Debian 12): GLib's sources,
// its frames the glib profile's (the frame clock's paint idle), and their
// phases from functions GTK exports: the layout of the widget tree
// (gtk_widget_allocate, the outermost call), its snapshot (each widget's
// gtk_widget_snapshot_child from its parent, the outermost: where the
// application's draw functions run) and the render of the snapshot to the
// surface (gsk_renderer_render).
constexpr std::string_view kGtk4Profile = R"json({
  "name": "gtk4",
  "description": "GTK 4: GLib's sources as the glib profile, and each frame's layout, snapshot and render",
  "probes": [
    {
      "role": "dispatch",
      "binary": "libgtk-4.so.1",
      "symbol": "gtk_widget_allocate",
      "label": "layout",
      "outermost": true,
      "phase": true
    },
    {
      "role": "dispatch",
      "binary": "libgtk-4.so.1",
      "symbol": "gtk_widget_snapshot_child",
      "label": "snapshot",
      "outermost": true,
      "phase": true
    },
    {
      "role": "dispatch",
      "binary": "libgtk-4.so.1",
      "symbol": "gsk_renderer_render",
      "label": "render",
      "phase": true
    }
  ]
})json";

// Qt Quick (libQt@QT@Quick.so.@QT@; checked against 5.15 and 6.4, Debian 12):
// Qt's events as the qt@QT@ profile, and the scene graph's frames. Each
// frame ends where the window emits frameSwapped() after its buffer swap:
// on the render thread in the threaded render loop (the default where
// OpenGL allows it), on the GUI thread in the basic one. The frame began
// at that thread's previous swap, and what held it back may have run on
// any thread of the process (a stalled GUI thread delays the render
// thread's next frame). Its phases are the GUI thread's polish of the
// items (QQuickWindowPrivate::polishItems), the sync of the scene graph
// with them (syncSceneGraph: the render thread's, while the GUI thread
// waits for it) and its render (renderSceneGraph), all exported.
constexpr std::string_view kQtQuickProfile = R"json({
  "name": "qtquick@QT@",
  "description": "Qt Quick @QT@: Qt's events as the qt@QT@ profile, and each frame of the scene graph with its polish, sync and render",
  "probes": [
    {
      "role": "dispatch",
      "binary": "libQt@QT@Quick.so.@QT@",
      "symbol": "QQuickWindow::frameSwapped()",
      "label": "Qt Quick frameSwapped",
      "frame": {"end": true}
    },
    {
      "role": "dispatch",
      "binary": "libQt@QT@Quick.so.@QT@",
      "symbol": "QQuickWindowPrivate::polishItems()",
      "label": "polish",
      "phase": true
    },
    {
      "role": "dispatch",
      "binary": "libQt@QT@Quick.so.@QT@",
      "symbol": "QQuickWindowPrivate::syncSceneGraph()",
      "label": "sync",
      "phase": true
    },
    {
      "role": "dispatch",
      "binary": "libQt@QT@Quick.so.@QT@",
      "symbol": "QQuickWindowPrivate::renderSceneGraph(QSize const&, QSize const&)",
      "label": "render",
      "phase": true
    }
  ]
})json";

// AOSP's native Looper (libutils: system/core/libutils/Looper.cpp), the
// message loop under every Android app's MessageQueue. pollInner runs
// each due native message as handler->handleMessage(const Message&) and
// each ready fd's callback->handleEvent(int fd, int events, void* data):
// virtual calls through vtable offset 0x10 to the program's own classes,
// not functions of the library, so each is a call-site span ("call"),
// told apart by how the call site sets the argument after `this` (a
// Message pointer, an int fd). Message is {int what}. sendMessageAtTime
// (what sendMessage and sendMessageDelayed call, through the PLT) queues
// a copy of the message: an enqueue pairs with its dispatch by handler
// (msg) and what (msg_tag). The loop waits for work in pollInner's one
// call to epoll_wait (idle time: "wait"); another thread's wake() writes
// the eventfd that ends such a wait ("wake"). Checked against
// AOSP 10 as Debian builds it (android-libutils; docs/android.md).
constexpr std::string_view kAndroidProfile = R"json({
  "name": "android",
  "description": "AOSP's native Looper (libutils): each message and fd callback pollInner dispatches, by class; its waits (idle time)",
  "probes": [
    {
      "role": "dispatch",
      "binary": "libutils.so",
      "symbol": "android::Looper::pollInner(int)",
      "call": {"slot": 16, "arg1": "pointer"},
      "label": "Looper message",
      "keys": [
        {"name": "target", "expr": "*(arg0+0)", "format": "vtable"},
        {"name": "what", "expr": "u32 *(arg1+0)", "format": "int"},
        {"name": "msg", "expr": "arg0", "format": "ptr"},
        {"name": "msg_tag", "expr": "u32 *(arg1+0)", "format": "int"}
      ]
    },
    {
      "role": "enqueue",
      "binary": "libutils.so",
      "symbol": "android::Looper::sendMessageAtTime(long, android::sp<android::MessageHandler> const&, android::Message const&)",
      "keys": [
        {"name": "queue", "expr": "arg0", "format": "ptr"},
        {"name": "when", "expr": "arg1", "format": "int"},
        {"name": "msg", "expr": "*(arg2+0)", "format": "ptr"},
        {"name": "msg_tag", "expr": "u32 *(arg3+0)", "format": "int"}
      ]
    },
    {
      "role": "dispatch",
      "binary": "libutils.so",
      "symbol": "android::Looper::pollInner(int)",
      "call": {"slot": 16, "arg1": "int"},
      "label": "Looper fd callback",
      "keys": [
        {"name": "target", "expr": "*(arg0+0)", "format": "vtable"},
        {"name": "fd", "expr": "arg1", "format": "int"},
        {"name": "events", "expr": "arg2", "format": "int"}
      ]
    },
    {
      "role": "wait",
      "binary": "libutils.so",
      "symbol": "android::Looper::pollInner(int)",
      "call": {"to": "epoll_wait"},
      "label": "Looper epoll_wait"
    },
    {
      "role": "wake",
      "binary": "libutils.so",
      "symbol": "android::Looper::wake()",
      "label": "Looper::wake()"
    }
  ]
})json";

struct Builtin {
  const char* name;
  std::string_view json;
  // A built-in whose probes come first (gtk3 has glib's).
  const char* base = nullptr;
  // The values of a template's placeholders (@QT@, @TYPE_AT@), in order.
  std::array<std::pair<std::string_view, std::string_view>, 2> vars{};
};
constexpr Builtin kBuiltins[] = {
    {"refapp", kRefappProfile},
    {"glib", kGlibProfile},
    {"node", kNodeProfile},
    {"qt5", kQtProfile, nullptr, {{{"@QT@", "5"}, {"@TYPE_AT@", "16"}}}},
    {"qt6", kQtProfile, nullptr, {{{"@QT@", "6"}, {"@TYPE_AT@", "8"}}}},
    {"gtk3", kGtk3Profile, "glib"},
    {"gtk4", kGtk4Profile, "glib"},
    {"qtquick5", kQtQuickProfile, "qt5", {{{"@QT@", "5"}}}},
    {"qtquick6", kQtQuickProfile, "qt6", {{{"@QT@", "6"}}}},
    {"android", kAndroidProfile}};

// A built-in's JSON, its placeholders filled in.
std::string builtin_json(const Builtin& b) {
  std::string text(b.json);
  for (const auto& [key, value] : b.vars) {
    if (key.empty()) continue;
    for (size_t at = text.find(key); at != std::string::npos;
         at = text.find(key, at + value.size()))
      text.replace(at, key.size(), value);
  }
  return text;
}

Status profile_error(const std::string& origin, const std::string& what) {
  return Status::Error(fmt::format("profile {}: {}", origin, what),
                       ErrorKind::kUsage);
}

}  // namespace

const char* role_name(uint32_t role) {
  switch (role) {
    case LT_ROLE_DISPATCH:
      return "dispatch";
    case LT_ROLE_IDLE:
      return "idle";
    case LT_ROLE_BARRIER_POST:
      return "barrier.post";
    case LT_ROLE_BARRIER_REMOVE:
      return "barrier.remove";
    case LT_ROLE_ENQUEUE:
      return "enqueue";
    case LT_ROLE_DELIVERY:
      return "delivery";
    case LT_ROLE_INPUT_RECV:
      return "input.recv";
    case LT_ROLE_INPUT_SEND:
      return "input.send";
    case LT_ROLE_WAIT:
      return "wait";
    case LT_ROLE_WAKE:
      return "wake";
    default:
      return "unknown";
  }
}

Result<uint32_t> parse_role(std::string_view name) {
  if (name == "dispatch") return static_cast<uint32_t>(LT_ROLE_DISPATCH);
  if (name == "idle") return static_cast<uint32_t>(LT_ROLE_IDLE);
  if (name == "barrier.post")
    return static_cast<uint32_t>(LT_ROLE_BARRIER_POST);
  if (name == "barrier.remove")
    return static_cast<uint32_t>(LT_ROLE_BARRIER_REMOVE);
  if (name == "enqueue") return static_cast<uint32_t>(LT_ROLE_ENQUEUE);
  if (name == "input.recv") return static_cast<uint32_t>(LT_ROLE_INPUT_RECV);
  if (name == "input.send") return static_cast<uint32_t>(LT_ROLE_INPUT_SEND);
  if (name == "wait") return static_cast<uint32_t>(LT_ROLE_WAIT);
  if (name == "wake") return static_cast<uint32_t>(LT_ROLE_WAKE);
  return Status::Error(
      fmt::format("unknown role '{}': expected dispatch, idle, barrier.post, "
                  "barrier.remove, enqueue, input.recv, input.send, wait or "
                  "wake",
                  log::printable(name, 60)),
      ErrorKind::kUsage);
}

std::vector<std::string> builtin_profile_names() {
  std::vector<std::string> out;
  for (const Builtin& b : kBuiltins) out.emplace_back(b.name);
  return out;
}

namespace {

using Json = nlohmann::json;

// Bytes of a value from the file quoted in a message: enough to recognise
// it, and a message stays one readable line.
constexpr size_t kQuoted = 60;
// Names in one enum key's table (QEvent::Type has about 180).
constexpr size_t kMaxEnumNames = 1024;

// A JSON location for messages: "probes[2].keys[0].format".
std::string at(const std::string& parent, std::string_view field) {
  return parent.empty() ? std::string(field)
                        : fmt::format("{}.{}", parent, field);
}
std::string at(const std::string& parent, size_t index) {
  return fmt::format("{}[{}]", parent, index);
}

// Reads one profile's JSON tree; every error names the file and the JSON
// path of the value at fault, on one line.
class ProfileReader {
 public:
  explicit ProfileReader(const std::string& origin) : origin_(origin) {}

  Status error(const std::string& where, std::string_view what) const {
    return profile_error(origin_, fmt::format("{}: {}", where, what));
  }

  // Fields outside `known` are refused: a misspelt "async_mask" would
  // otherwise be ignored without a word.
  Status only_known(const Json& obj, const std::string& where,
                    std::initializer_list<std::string_view> known) const {
    for (const auto& [key, value] : obj.items()) {
      if (std::find(known.begin(), known.end(), key) != known.end()) continue;
      std::string list;
      for (std::string_view k : known)
        list += fmt::format("{}\"{}\"", list.empty() ? "" : ", ", k);
      return error(where.empty() ? "top level" : where,
                   fmt::format("unknown field \"{}\" (expected {})",
                               log::printable(key, kQuoted), list));
    }
    return Status::Ok();
  }

  // A string member; `fallback` when absent (nullopt: required).
  Result<std::string> string(const Json& obj, const std::string& parent,
                             std::string_view key,
                             std::optional<std::string> fallback) const {
    std::string where = at(parent, key);
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (fallback) return *fallback;
      return error(where, "missing (a string is required)");
    }
    if (!it->is_string())
      return error(where,
                   fmt::format("expected a string, got {}", it->type_name()));
    const std::string& v = it->get_ref<const std::string&>();
    // A C API (open, fnmatch) would stop at the NUL and quietly use a
    // shorter name.
    if (v.find('\0') != std::string::npos)
      return error(where, fmt::format("\"{}\" contains a NUL byte",
                                      log::printable(v, kQuoted)));
    return v;
  }

  Result<KeyDef> key(const Json& jk, const std::string& where) const {
    if (!jk.is_object())
      return error(where, fmt::format("expected an object with \"name\" and "
                                      "\"expr\", got {}",
                                      jk.type_name()));
    LT_RETURN_IF_ERROR(
        only_known(jk, where, {"name", "expr", "format", "names"}));
    KeyDef k;
    auto name = string(jk, where, "name", std::nullopt);
    if (!name.ok()) return name.status();
    k.name = std::move(*name);
    k.role = key_role_for(k.name);
    auto expr = string(jk, where, "expr", std::nullopt);
    if (!expr.ok()) return expr.status();
    k.expr = std::move(*expr);
    auto spec = parse_key_expr(k.expr);
    if (!spec.ok()) return error(at(where, "expr"), spec.status().message());
    k.spec = *spec;
    auto format = string(jk, where, "format", "hex");
    if (!format.ok()) return format.status();
    auto f = parse_key_format(*format);
    if (!f.ok()) return error(at(where, "format"), f.status().message());
    k.format = *f;
    auto names = jk.find("names");
    if (k.format != KeyFormat::kEnum) {
      if (names != jk.end())
        return error(at(where, "names"), "only with \"format\": \"enum\"");
      return k;
    }
    if (names == jk.end() || !names->is_object() || names->empty())
      return error(at(where, "names"),
                   names == jk.end()
                       ? "missing (an enum key names its values: {\"1\": "
                         "\"Timer\", ...})"
                       : fmt::format("expected a non-empty object, got {}",
                                     names->type_name()));
    if (names->size() > kMaxEnumNames)
      return error(
          at(where, "names"),
          fmt::format("{} names; at most {}", names->size(), kMaxEnumNames));
    for (const auto& [value, name] : names->items()) {
      std::string name_at = at(at(where, "names"), value);
      int64_t v = 0;
      auto [end, ec] =
          std::from_chars(value.data(), value.data() + value.size(), v);
      if (value.empty() || ec != std::errc() ||
          end != value.data() + value.size())
        return error(name_at, "expected a decimal integer as the name's key");
      if (!name.is_string() || name.get_ref<const std::string&>().empty())
        return error(name_at,
                     fmt::format("expected a non-empty string, got {}",
                                 name.is_string() ? "\"\"" : name.type_name()));
      const std::string& n = name.get_ref<const std::string&>();
      if (n.find('\0') != std::string::npos || n.size() > kQuoted)
        return error(name_at, fmt::format("\"{}\": a NUL byte or longer than "
                                          "{} bytes",
                                          log::printable(n, kQuoted), kQuoted));
      k.names[v] = n;
    }
    return k;
  }

  Status keys(const Json& jp, const std::string& where, ProbeDef* def) const {
    auto it = jp.find("keys");
    if (it == jp.end()) return Status::Ok();
    std::string keys_at = at(where, "keys");
    if (!it->is_array())
      return error(keys_at,
                   fmt::format("expected an array, got {}", it->type_name()));
    if (it->size() > LT_MAX_KEYS)
      return error(keys_at,
                   fmt::format("{} keys; at most {}", it->size(), LT_MAX_KEYS));
    for (size_t i = 0; i < it->size(); ++i) {
      auto k = key((*it)[i], at(keys_at, i));
      if (!k.ok()) return k.status();
      // Two values under one name: a report would show only one.
      if (std::any_of(def->keys.begin(), def->keys.end(),
                      [&](const KeyDef& d) { return d.name == k->name; }))
        return error(at(at(keys_at, i), "name"),
                     fmt::format("\"{}\": a key of this probe already has "
                                 "that name",
                                 log::printable(k->name, kQuoted)));
      def->keys.push_back(std::move(*k));
    }
    if (std::count_if(def->keys.begin(), def->keys.end(), [](const KeyDef& k) {
          return k.format == KeyFormat::kString;
        }) > 1)
      return error(keys_at, "at most one key of format \"str\" per probe");
    return Status::Ok();
  }

  // "frame": {} (every span is a frame) or {"names": [...]} (spans whose
  // str key's string is one of them), with "by": [...] the keys whose
  // values decide the name. The kernel matches the names, so their number
  // and length are its (abi.h LT_FRAME_*). "end": true: each return ends a
  // frame instead (a buffer swap; --frame-end).
  Status frame(const Json& jp, const std::string& where, ProbeDef* def) const {
    auto it = jp.find("frame");
    if (it == jp.end()) return Status::Ok();
    const std::string fr_at = at(where, "frame");
    if (!it->is_object())
      return error(fr_at,
                   fmt::format("expected an object, got {}", it->type_name()));
    LT_RETURN_IF_ERROR(only_known(*it, fr_at, {"names", "by", "end"}));
    if (def->role != LT_ROLE_DISPATCH && def->role != LT_ROLE_IDLE)
      return error(fr_at, "only for the dispatch and idle roles (spans)");
    ProbeDef::FrameMatch m;
    if (auto n = it->find("names"); n != it->end()) {
      const std::string names_at = at(fr_at, "names");
      if (!n->is_array() || n->empty() || n->size() > LT_FRAME_NAMES)
        return error(names_at, fmt::format("expected an array of 1 to {} "
                                           "strings",
                                           LT_FRAME_NAMES));
      for (size_t i = 0; i < n->size(); ++i) {
        const Json& v = (*n)[i];
        if (!v.is_string() || v.get_ref<const std::string&>().empty() ||
            v.get_ref<const std::string&>().size() >= LT_FRAME_NAME_LEN)
          return error(at(names_at, i),
                       fmt::format("expected a string of 1 to {} bytes",
                                   LT_FRAME_NAME_LEN - 1));
        m.names.push_back(v.get<std::string>());
      }
      if (std::none_of(def->keys.begin(), def->keys.end(), [](const KeyDef& k) {
            return k.format == KeyFormat::kString;
          }))
        return error(names_at,
                     "the probe needs a key of format \"str\" to match "
                     "names against");
    }
    LT_RETURN_IF_ERROR(frame_by(*it, fr_at, *def, &m));
    if (auto e = it->find("end"); e != it->end()) {
      if (!e->is_boolean())
        return error(
            at(fr_at, "end"),
            fmt::format("expected true or false, got {}", e->type_name()));
      m.end = e->get<bool>();
      if (m.end && !m.names.empty())
        return error(at(fr_at, "end"), "not with \"names\"");
    }
    def->frame = std::move(m);
    return Status::Ok();
  }

  // "by": 1 to LT_FRAME_BY names of the probe's keys, with "names".
  Status frame_by(const Json& jf, const std::string& fr_at, const ProbeDef& def,
                  ProbeDef::FrameMatch* m) const {
    auto b = jf.find("by");
    if (b == jf.end()) return Status::Ok();
    const std::string by_at = at(fr_at, "by");
    if (m->names.empty()) return error(by_at, "only with \"names\"");
    if (!b->is_array() || b->empty() || b->size() > LT_FRAME_BY)
      return error(by_at, fmt::format("expected an array of 1 to {} key "
                                      "names",
                                      LT_FRAME_BY));
    for (size_t i = 0; i < b->size(); ++i) {
      const Json& v = (*b)[i];
      auto k = v.is_string()
                   ? std::find_if(def.keys.begin(), def.keys.end(),
                                  [&](const KeyDef& kd) {
                                    return kd.name ==
                                           v.get_ref<const std::string&>();
                                  })
                   : def.keys.end();
      if (k == def.keys.end())
        return error(at(by_at, i),
                     "expected the name of one of the "
                     "probe's keys");
      auto idx = static_cast<uint32_t>(k - def.keys.begin() + 1);
      if (std::find(m->by.begin(), m->by.end(), idx) != m->by.end())
        return error(at(by_at, i), "a key named twice");
      m->by.push_back(idx);
    }
    return Status::Ok();
  }

  // "only_if": KEY, a span only where the probe's key KEY reads nonzero.
  Status only_if(const Json& jp, const std::string& where,
                 ProbeDef* def) const {
    if (!jp.contains("only_if")) return Status::Ok();
    const std::string only_at = at(where, "only_if");
    auto name = string(jp, where, "only_if", std::nullopt);
    if (!name.ok()) return name.status();
    if (def->role != LT_ROLE_DISPATCH && def->role != LT_ROLE_IDLE)
      return error(only_at, "only for the dispatch and idle roles (spans)");
    auto k = std::find_if(def->keys.begin(), def->keys.end(),
                          [&](const KeyDef& d) { return d.name == *name; });
    if (k == def->keys.end())
      return error(only_at,
                   fmt::format("\"{}\": no key of this probe has that name",
                               log::printable(*name, kQuoted)));
    def->only_if = static_cast<uint32_t>(k - def->keys.begin() + 1);
    return Status::Ok();
  }

  // "call": {"slot": N}: the function's virtual calls through vtable
  // offset N (any without "slot"), each a span; {"to": "NAME"}: its
  // direct calls to function NAME (through the PLT or not).
  Status call(const Json& jp, const std::string& where, ProbeDef* def) const {
    auto it = jp.find("call");
    if (it == jp.end()) return Status::Ok();
    const std::string call_at = at(where, "call");
    if (!it->is_object())
      return error(call_at,
                   fmt::format("expected an object, got {}", it->type_name()));
    LT_RETURN_IF_ERROR(only_known(*it, call_at, {"slot", "arg1", "to"}));
    if (def->role != LT_ROLE_DISPATCH && def->role != LT_ROLE_IDLE &&
        def->role != LT_ROLE_WAIT)
      return error(call_at,
                   "only for the dispatch, idle and wait roles (spans)");
    ProbeDef::CallMatch m;
    if (auto t = it->find("to"); t != it->end()) {
      if (!t->is_string() || t->get<std::string>().empty() ||
          t->get<std::string>().size() > 256)
        return error(at(call_at, "to"),
                     "expected the name of the function called (a string)");
      if (it->contains("slot") || it->contains("arg1"))
        return error(call_at,
                     "\"to\" names a direct call: not with \"slot\" or "
                     "\"arg1\" (virtual calls)");
      m.to = t->get<std::string>();
    }
    if (auto s = it->find("slot"); s != it->end()) {
      if (!s->is_number_unsigned() || s->get<uint64_t>() > 0xffff ||
          s->get<uint64_t>() % 8 != 0)
        return error(at(call_at, "slot"),
                     "expected a vtable offset in bytes: a multiple of 8 "
                     "from 0 to 65528");
      m.slot = static_cast<int64_t>(s->get<uint64_t>());
    }
    if (auto a = it->find("arg1"); a != it->end()) {
      if (*a == "pointer")
        m.arg1_bits = 64;
      else if (*a == "int")
        m.arg1_bits = 32;
      else
        return error(at(call_at, "arg1"),
                     "expected \"pointer\" or \"int\": how the call site "
                     "sets the argument after `this`");
    }
    if (def->outermost) return error(call_at, "not with \"outermost\"");
    def->call = m;
    return Status::Ok();
  }

  // "async_mask" is lt_probe_cfg.async_mask, a __u32 in the ABI.
  Status async_mask(const Json& jp, const std::string& where,
                    ProbeDef* def) const {
    auto it = jp.find("async_mask");
    if (it == jp.end()) return Status::Ok();
    std::string mask_at = at(where, "async_mask");
    if (!it->is_number_unsigned() ||
        it->get<uint64_t>() > std::numeric_limits<uint32_t>::max())
      return error(mask_at,
                   fmt::format("expected an integer 0..{} (a 32-bit mask), "
                               "got {}",
                               std::numeric_limits<uint32_t>::max(),
                               it->is_number() ? it->dump() : it->type_name()));
    def->async_mask = it->get<uint32_t>();
    return Status::Ok();
  }

  // "input": {"type": KEY, "time": KEY, "kinds": {"8": "key_press", ...}}:
  // the dispatch handles display input events; its key `type` says which
  // (values 0..63: the kernel keeps the set as a 64-bit mask), `time`
  // the event's server time to match it by.
  Status input(const Json& jp, const std::string& where, ProbeDef* def) const {
    auto it = jp.find("input");
    if (it == jp.end()) return Status::Ok();
    const std::string in_at = at(where, "input");
    if (!it->is_object())
      return error(in_at,
                   fmt::format("expected an object, got {}", it->type_name()));
    LT_RETURN_IF_ERROR(only_known(*it, in_at, {"type", "time", "kinds"}));
    if (def->role != LT_ROLE_DISPATCH)
      return error(in_at, "only for the dispatch role");
    ProbeDef::InputMatch m;
    for (auto [field, out] :
         {std::pair<std::string_view, uint32_t*>{"type", &m.type_key},
          {"time", &m.time_key}}) {
      auto name = string(
          *it, in_at, field,
          field == "time" ? std::optional<std::string>("") : std::nullopt);
      if (!name.ok()) return name.status();
      if (name->empty() && field == "time") continue;
      auto k = std::find_if(def->keys.begin(), def->keys.end(),
                            [&](const KeyDef& d) { return d.name == *name; });
      if (k == def->keys.end())
        return error(at(in_at, field),
                     fmt::format("\"{}\": no key of this probe has that name",
                                 log::printable(*name, kQuoted)));
      *out = static_cast<uint32_t>(k - def->keys.begin() + 1);
    }
    auto kinds = it->find("kinds");
    if (kinds == it->end() || !kinds->is_object() || kinds->empty())
      return error(at(in_at, "kinds"),
                   "a non-empty object from type values to \"key_press\", "
                   "\"key_release\", \"button_press\", \"button_release\", "
                   "\"motion\", \"touch_begin\", \"touch_update\" or "
                   "\"touch_end\" is required");
    for (const auto& [value, kind] : kinds->items()) {
      const std::string kind_at = at(at(in_at, "kinds"), value);
      int64_t v = 0;
      auto [end, ec] =
          std::from_chars(value.data(), value.data() + value.size(), v);
      if (value.empty() || ec != std::errc() ||
          end != value.data() + value.size() || v < 0 || v > 63)
        return error(kind_at, "expected a decimal integer 0..63 as the key");
      if (!kind.is_string() ||
          !display_input_type(kind.get_ref<const std::string&>()))
        return error(kind_at,
                     fmt::format("expected an input kind (\"key_press\", "
                                 "\"motion\", ...), got {}",
                                 log::printable(kind.dump(), kQuoted)));
      m.kinds[v] = kind.get<std::string>();
    }
    def->input = std::move(m);
    return Status::Ok();
  }

  Result<ProbeDef> probe(const Json& jp, const std::string& where) const {
    if (!jp.is_object())
      return error(where,
                   fmt::format("expected an object, got {}", jp.type_name()));
    LT_RETURN_IF_ERROR(only_known(
        jp, where,
        {"role", "binary", "symbol", "label", "outermost", "phase",
         "async_mask", "buffer", "keys", "only_if", "call", "input", "frame"}));
    ProbeDef def;
    auto role_text = string(jp, where, "role", "dispatch");
    if (!role_text.ok()) return role_text.status();
    auto role = parse_role(*role_text);
    if (!role.ok()) return error(at(where, "role"), role.status().message());
    def.role = *role;
    auto binary = string(jp, where, "binary", std::nullopt);
    if (!binary.ok()) return binary.status();
    def.binary = std::move(*binary);
    auto symbol = string(jp, where, "symbol", std::nullopt);
    if (!symbol.ok()) return symbol.status();
    def.symbol = std::move(*symbol);
    if (def.binary.empty()) return error(at(where, "binary"), "empty");
    if (def.symbol.empty()) return error(at(where, "symbol"), "empty");
    auto label = string(jp, where, "label", "");
    if (!label.ok()) return label.status();
    def.label = std::move(*label);
    if (auto o = jp.find("outermost"); o != jp.end()) {
      if (!o->is_boolean())
        return error(
            at(where, "outermost"),
            fmt::format("expected true or false, got {}", o->type_name()));
      if (def.role != LT_ROLE_DISPATCH && def.role != LT_ROLE_IDLE)
        return error(at(where, "outermost"),
                     "only for the dispatch and idle roles (spans)");
      def.outermost = o->get<bool>();
    }
    if (auto o = jp.find("phase"); o != jp.end()) {
      if (!o->is_boolean())
        return error(
            at(where, "phase"),
            fmt::format("expected true or false, got {}", o->type_name()));
      if (def.role != LT_ROLE_DISPATCH && def.role != LT_ROLE_IDLE)
        return error(at(where, "phase"),
                     "only for the dispatch and idle roles (spans)");
      def.phase = o->get<bool>();
    }
    LT_RETURN_IF_ERROR(async_mask(jp, where, &def));
    if (jp.contains("buffer")) {
      auto buffer = string(jp, where, "buffer", std::nullopt);
      if (!buffer.ok()) return buffer.status();
      if (*buffer != "msghdr" && *buffer != "plain")
        return error(at(where, "buffer"),
                     fmt::format("\"{}\": expected \"plain\" or \"msghdr\"",
                                 log::printable(*buffer, kQuoted)));
      def.msghdr = *buffer == "msghdr";
    }
    LT_RETURN_IF_ERROR(keys(jp, where, &def));
    if ((def.role == LT_ROLE_WAIT || def.role == LT_ROLE_WAKE) &&
        !def.keys.empty())
      return error(at(where, "keys"),
                   "none for the wait and wake roles: they record no values, "
                   "only counts and times per thread");
    LT_RETURN_IF_ERROR(only_if(jp, where, &def));
    LT_RETURN_IF_ERROR(call(jp, where, &def));
    LT_RETURN_IF_ERROR(input(jp, where, &def));
    LT_RETURN_IF_ERROR(frame(jp, where, &def));
    if (def.phase && def.frame)
      return error(at(where, "phase"),
                   "not with \"frame\": a span is a frame "
                   "or a phase of one");
    return def;
  }

  // "version": {"binary", "name", "major", "minor", "checked": ["2.74"]}
  Result<VersionGate> version(const Json& jv) const {
    const std::string where = "version";
    if (!jv.is_object())
      return error(where,
                   fmt::format("expected an object, got {}", jv.type_name()));
    LT_RETURN_IF_ERROR(
        only_known(jv, where, {"binary", "name", "major", "minor", "checked"}));
    VersionGate g;
    for (auto [field, out] :
         {std::pair<std::string_view, std::string*>{"binary", &g.binary},
          {"name", &g.name},
          {"major", &g.major},
          {"minor", &g.minor}}) {
      auto v = string(jv, where, field, std::nullopt);
      if (!v.ok()) return v.status();
      if (v->empty()) return error(at(where, field), "empty");
      *out = std::move(*v);
    }
    auto it = jv.find("checked");
    if (it == jv.end() || !it->is_array() || it->empty())
      return error(at(where, "checked"),
                   "a non-empty array of \"MAJOR.MINOR\" strings is required");
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& c = (*it)[i];
      unsigned major = 0, minor = 0;
      char end = 0;
      if (!c.is_string() || std::sscanf(c.get_ref<const std::string&>().c_str(),
                                        "%u.%u%c", &major, &minor, &end) != 2)
        return error(at(at(where, "checked"), i),
                     fmt::format("expected \"MAJOR.MINOR\", got {}",
                                 log::printable(c.dump(), kQuoted)));
      g.checked.push_back(fmt::format("{}.{}", major, minor));
    }
    return g;
  }

  Result<Profile> profile(const Json& j) const {
    if (!j.is_object())
      return profile_error(
          origin_,
          fmt::format("expected a JSON object, got {}", j.type_name()));
    LT_RETURN_IF_ERROR(
        only_known(j, "", {"name", "description", "version", "probes"}));
    Profile p;
    auto name = string(j, "", "name", origin_);
    if (!name.ok()) return name.status();
    p.name = std::move(*name);
    auto description = string(j, "", "description", "");
    if (!description.ok()) return description.status();
    p.description = std::move(*description);
    auto it = j.find("probes");
    if (it == j.end() || !it->is_array() || it->empty())
      return error("probes", it == j.end() || it->is_array()
                                 ? "a non-empty array is required"
                                 : fmt::format("expected a non-empty array, "
                                               "got {}",
                                               it->type_name()));
    std::optional<VersionGate> gate;
    if (auto v = j.find("version"); v != j.end()) {
      auto g = version(*v);
      if (!g.ok()) return g.status();
      gate = std::move(*g);
    }
    for (size_t i = 0; i < it->size(); ++i) {
      auto def = probe((*it)[i], at("probes", i));
      if (!def.ok()) return def.status();
      if (gate && def->binary == gate->binary) def->gate = gate;
      def->profile = p.name;
      p.probes.push_back(std::move(*def));
    }
    // More than the kernel's probe table holds can never be attached (a
    // glob can only add more); input roles take no entry in it.
    auto spans =
        std::count_if(p.probes.begin(), p.probes.end(), [](const ProbeDef& d) {
          return d.role != LT_ROLE_INPUT_RECV && d.role != LT_ROLE_INPUT_SEND;
        });
    if (spans > LT_MAX_PROBES)
      return error("probes",
                   fmt::format("{} probes; at most {} can be attached in one "
                               "run",
                               spans, LT_MAX_PROBES));
    return p;
  }

 private:
  const std::string& origin_;
};

// "line 3, column 7" of a byte offset, for a JSON syntax error.
std::string text_position(std::string_view text, size_t byte) {
  size_t line = 1;
  size_t column = 1;
  for (size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return fmt::format("line {}, column {}", line, column);
}

// What the parser expected, from its message ("... column 5: syntax error
// while parsing value - invalid literal; last read: '...'"): without the
// "last read" part, which can be a whole long string of the file.
std::string syntax_detail(const char* what) {
  std::string_view w(what);
  size_t col = w.find("column ");
  size_t start = col == std::string_view::npos ? col : w.find(": ", col);
  if (start == std::string_view::npos) return "";
  w.remove_prefix(start + 2);
  w = w.substr(0, w.find("; last read"));
  constexpr size_t kMax = 120;
  return fmt::format(": {}", w.substr(0, kMax));
}

}  // namespace

Result<Profile> parse_profile(std::string_view text,
                              const std::string& origin) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return profile_error(origin, "empty file: expected a JSON object");
  Json j;
  // A field given twice in one object: JSON keeps the last silently.
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  auto note_fields = [&](int, Json::parse_event_t ev, Json& parsed) {
    if (ev == Json::parse_event_t::object_start) open_objects.emplace_back();
    if (ev == Json::parse_event_t::object_end && !open_objects.empty())
      open_objects.pop_back();
    if (ev == Json::parse_event_t::key && !open_objects.empty() &&
        !open_objects.back().insert(parsed.get<std::string>()).second &&
        duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  try {
    j = Json::parse(text, note_fields);
  } catch (const Json::parse_error& e) {
    // e.byte counts from 1 and points at the last byte read.
    return profile_error(
        origin, fmt::format("not valid JSON at {}{}",
                            text_position(text, e.byte ? e.byte - 1 : 0),
                            syntax_detail(e.what())));
  } catch (const Json::exception& e) {
    // Valid syntax the parser still cannot hold: a number past a double's
    // range ("1e999") is out_of_range.406.
    std::string_view what(e.what());
    if (size_t end = what.find("] "); end != std::string_view::npos)
      what.remove_prefix(end + 2);
    return profile_error(
        origin, fmt::format("not valid JSON: {}", log::printable(what, 120)));
  }
  if (!duplicate.empty())
    return profile_error(origin,
                         fmt::format("field \"{}\" given twice in one object",
                                     log::printable(duplicate, kQuoted)));
  return ProfileReader(origin).profile(j);
}

Result<Profile> load_profile(const std::string& name_or_file) {
  for (const Builtin& b : kBuiltins) {
    if (name_or_file != b.name) continue;
    auto p = parse_profile(builtin_json(b), b.name);
    if (!p.ok() || b.base == nullptr) return p;
    auto base = load_profile(b.base);
    if (!base.ok()) return base.status();
    p->probes.insert(p->probes.begin(), base->probes.begin(),
                     base->probes.end());
    return p;
  }
  auto text = proc::read_regular_file(name_or_file, kMaxProfileBytes);
  if (!text.ok()) {
    std::string names;
    for (const Builtin& b : kBuiltins)
      names += std::string(names.empty() ? "" : ", ") + b.name;
    Status st =
        Status::Error(fmt::format("profile: {}", text.status().message()),
                      text.status().kind());
    st.with_hint(
        fmt::format("--profile takes a built-in name ({}) or a JSON "
                    "file of at most {} KiB",
                    names, kMaxProfileBytes / 1024));
    return st;
  }
  return parse_profile(*text, name_or_file);
}

Result<ProbeDef> parse_probe_arg(std::string_view arg, uint32_t role) {
  // The first ':' that is not part of "::" separates BINARY from SYMBOL.
  size_t sep = std::string_view::npos;
  for (size_t i = 0; i < arg.size(); ++i) {
    if (arg[i] != ':') continue;
    bool dbl = (i + 1 < arg.size() && arg[i + 1] == ':') ||
               (i > 0 && arg[i - 1] == ':');
    if (!dbl) {
      sep = i;
      break;
    }
  }
  if (sep == std::string_view::npos || sep == 0 || sep + 1 == arg.size())
    return Status::Error(
        fmt::format("bad probe '{}': expected BINARY:SYMBOL (e.g. "
                    "libglib-2.0.so.0:g_main_context_dispatch)",
                    arg),
        ErrorKind::kUsage);
  ProbeDef def;
  def.role = role;
  def.binary = std::string(arg.substr(0, sep));
  def.symbol = std::string(arg.substr(sep + 1));
  return def;
}

}  // namespace looptrace
