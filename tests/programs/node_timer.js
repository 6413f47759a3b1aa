// A Node event loop for the perf-map test (tests/integration/node_test.cpp):
// timers on the loop, a few of which busy-loop in a uniquely named
// function. Each busy run's start and end are logged as JSON lines, in
// CLOCK_MONOTONIC nanoseconds (process.hrtime.bigint() on Linux), the
// ground truth looptrace's slow dispatches are compared with.
//
//   node --perf-basic-prof node_timer.js LOG [RUNS] [BUSY_MS]
//
// After the timers, one busy run in a setImmediate callback and one in an
// fs.readFile completion callback (callbacks from native code into
// JavaScript, not timers), logged as {"event": "callback_busy", "via":
// "immediate" | "fs", "start_ns", "end_ns"}.
'use strict';
const fs = require('fs');

const log = process.argv[2];
const runs = Number(process.argv[3] || 3);
const busyMs = Number(process.argv[4] || 200);
const firstAt = 500;  // ms after start: looptrace is attached by then
const gap = 300;      // ms between the end of one busy run and the next

function write(obj) {
  fs.appendFileSync(log, JSON.stringify(obj) + '\n');
}

let sink = 0;
// Pure arithmetic between clock reads, so the samples land in this
// function's own code rather than in the clock binding.
function busyLoopForLooptrace(ms) {
  const end = process.hrtime.bigint() + BigInt(ms) * 1000000n;
  let x = 1;
  do {
    for (let i = 0; i < 20000; i++) x = (x * 1103515245 + 12345) % 2147483647;
  } while (process.hrtime.bigint() < end);
  sink += x;
}

let done = 0;
function onBusyTimer() {
  const start = process.hrtime.bigint();
  busyLoopForLooptrace(busyMs);
  const end = process.hrtime.bigint();
  write({event: 'busy', start_ns: start.toString(), end_ns: end.toString()});
  if (++done < runs) {
    setTimeout(onBusyTimer, gap);
  } else {
    setTimeout(callbacks, gap);
  }
}

function busyCallback(via) {
  const start = process.hrtime.bigint();
  busyLoopForLooptrace(busyMs);
  const end = process.hrtime.bigint();
  write({event: 'callback_busy', via: via, start_ns: start.toString(),
         end_ns: end.toString()});
}

function callbacks() {
  setImmediate(() => {
    busyCallback('immediate');
    setTimeout(() => {
      fs.readFile(__filename, () => {
        busyCallback('fs');
        setTimeout(() => {
          clearInterval(tick);
          write({event: 'exit', sink: sink % 1000});
        }, gap);
      });
    }, gap);
  });
}

// Fast dispatches between the slow ones.
let ticks = 0;
const tick = setInterval(() => { ticks++; }, 20);

write({event: 'ready', pid: process.pid});
setTimeout(onBusyTimer, firstAt);
