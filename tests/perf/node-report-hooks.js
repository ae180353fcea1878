// The nodeReport preload's per-request hooks alone (issue #30.3): a listening http.Server, its
// 'request' and the response's 'close' emitted N times with a no-op handler, in a child with the
// launcher's kind of channel (fork, json), without and with the preload, rounds in turn. Prints
// ns per request for each; the difference is what the preload adds to every request.
// Usage: node tests/perf/node-report-hooks.js [ROUNDS]
'use strict';
const path = require('path');
const N = 2e6;

if (process.argv[2] === 'child') {
  const http = require('http');
  const { EventEmitter } = require('events');
  const server = http.createServer(() => {});
  server.listen(0, '127.0.0.1', () => {
    const times = [];
    for (let round = 0; round < 4; round++) {
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < N; i++) {
        const res = new EventEmitter();
        server.emit('request', null, res);
        res.emit('close');
      }
      times.push(Number(process.hrtime.bigint() - t0) / N);
    }
    // The first round warms up.
    process.send({ type: 'bench', ns: Math.min(...times.slice(1)) });
    server.close();
  });
} else {
  const cp = require('child_process');
  const preload = path.join(__dirname, '../../src/node_report.js');
  const rounds = Number(process.argv[2] || 3);
  const run = (on) => new Promise((resolve) => {
    const c = cp.fork(__filename, ['child'], {
      execArgv: on ? ['--require', preload] : [], serialization: 'json',
      env: { ...process.env, PORT: '' },
    });
    let ns = null;
    c.on('message', (m) => { if (m && m.type === 'bench') ns = m.ns; });
    c.on('exit', () => resolve(ns));
  });
  (async () => {
    const off = [];
    const on = [];
    for (let r = 0; r < rounds; r++) {
      off.push(await run(false));
      on.push(await run(true));
      console.log(`round ${r + 1}: off ${off[r].toFixed(1)} ns, on ${on[r].toFixed(1)} ns`);
    }
    const median = (a) => a.slice().sort((x, y) => x - y)[Math.floor(a.length / 2)];
    console.log(`median: off ${median(off).toFixed(1)} ns, on ${median(on).toFixed(1)} ns, ` +
      `the preload adds ${(median(on) - median(off)).toFixed(1)} ns per request`);
  })();
}
