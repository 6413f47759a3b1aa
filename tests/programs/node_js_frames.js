// A Node program for the JavaScript frames test
// (tests/integration/node_js_test.cpp), run with no flag: its slow
// dispatches stall through two levels of plain JavaScript calls (onTimer
// or onImmediate -> stall) into one hot function (busy) that V8 has
// optimized by then; and an HTTP server whose route handler stalls the
// same way for each request the test sends to it.
//
//   node node_js_frames.js LOG RUNS BUSY_MS
//
// Logs JSON lines, times in CLOCK_MONOTONIC nanoseconds
// (process.hrtime.bigint()): {"event": "ready", "pid", "port"} once
// listening; per stall {"event": "stall", "via": "timer" | "immediate" |
// "http", "start_ns", "end_ns", "stack"}, where stack is the err.stack of
// an Error made inside the stall, on the line that calls busy (V8's own
// names and lines: the ground truth looptrace's frames are compared with);
// {"event": "exit"} at the end (after the test's request and RUNS timer
// and immediate stalls).
'use strict';
const fs = require('fs');
const http = require('http');

const log = process.argv[2];
const runs = Number(process.argv[3] || 2);
const busyMs = Number(process.argv[4] || 200);

function write(obj) {
  fs.appendFileSync(log, JSON.stringify(obj) + '\n');
}

let sink = 0;
// The hot function: called thousands of times at start, so TurboFan has
// compiled it before the first stall.
function busy(ms) {
  const end = process.hrtime.bigint() + BigInt(Math.round(ms * 1e6));
  let x = 1;
  do {
    for (let i = 0; i < 2000; i++) x = (x * 1103515245 + 12345) % 2147483647;
  } while (process.hrtime.bigint() < end);
  sink += x;
  return x;
}

// The middle level: a plain function, called a few times only.
function stall(via) {
  const start = process.hrtime.bigint();
  const where = new Error('stall'); busy(busyMs);
  const end = process.hrtime.bigint();
  write({event: 'stall', via: via, start_ns: start.toString(),
         end_ns: end.toString(), stack: where.stack});
}

let timers = 0;
function onTimer() {
  stall('timer');
  if (++timers < runs) setTimeout(onTimer, 300);
  else setTimeout(() => setImmediate(onImmediate), 300);
}

let immediates = 0;
function onImmediate() {
  stall('immediate');
  if (++immediates < runs) setTimeout(() => setImmediate(onImmediate), 300);
  else setTimeout(finish, 300);
}

let served = 0;
function handleRequest(req, res) {
  stall('http');
  res.end('ok\n');
  served++;
}

function finish() {
  // The test's request may come after the timers.
  if (served === 0) return setTimeout(finish, 100);
  server.close();
  clearInterval(tick);
  write({event: 'exit', sink: sink % 1000});
}

for (let i = 0; i < 5000; i++) busy(0);

// Fast dispatches between the slow ones.
const tick = setInterval(() => {}, 20);
const server = http.createServer(handleRequest);
server.listen(0, '127.0.0.1', () => {
  write({event: 'ready', pid: process.pid, port: server.address().port});
  // looptrace attaches meanwhile.
  setTimeout(onTimer, 2500);
});
