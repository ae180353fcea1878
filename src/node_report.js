// fhircluster's Node preload (server.cluster.nodeReport): loaded with `node --require` into each
// Node process the launcher starts, it speaks fhircluster's IPC protocol (cluster.md, "The IPC
// protocol", 1.1) for a server that doesn't: `hello` and `ready` when the process's HTTP server
// on $PORT starts listening, then `status` every statusSeconds (JS heap, requests in flight and
// served, event-loop delay) and `sample` every sampleSeconds, over Node's own channel (fd 3,
// NODE_CHANNEL_FD, json serialization: `process.send`).
//
// It only watches: it never changes what a server answers, never throws into it (every hook is
// in try/catch, send errors are swallowed), and keeps nothing alive (the timers and the channel
// are unref'd, so a server that closes still exits as it would without it). Plain JavaScript
// with no dependencies; the launcher embeds it and writes it to a 0600 file in a 0700 directory.
'use strict';

(function fhirclusterNodeReport() {
  const LOADED = Symbol.for('fhircluster.nodeReport');
  // Loaded twice (argv and NODE_OPTIONS under a wrapper): the first one reports.
  if (globalThis[LOADED]) return;
  globalThis[LOADED] = true;
  // Started by hand, without the launcher's channel: nothing to report to.
  if (typeof process.send !== 'function') return;

  let http, https, net, v8, perfHooks;
  try {
    http = require('http');
    https = require('https');
    net = require('net');
    v8 = require('v8');
    perfHooks = require('perf_hooks');
  } catch (_) {
    return;
  }

  const PROTOCOL = '1.1';
  const WATCHED = Symbol('fhircluster.watched');
  const wantedPort = Number.parseInt(process.env.PORT || '', 10);
  let code = process.env.FHIRSMITH_INSTANCE_CODE || '';
  let role = process.env.FHIRSMITH_ROLE || '';
  let statusMs = 15000;
  let sampleMs = 60000;
  let said = false;
  let statusTimer = null;
  let sampleTimer = null;

  // The figures: requests in flight and served since start; per sample interval the count and
  // the summed turnaround (ms).
  let inFlight = 0;
  let served = 0;
  let intervalRequests = 0;
  let intervalTurnaround = 0;

  // The histogram records the time between its timer's ticks, the resolution included: that is
  // taken off, so an idle loop is ~0 ms.
  const RESOLUTION_MS = 20;
  let delay = null;
  try {
    delay = perfHooks.monitorEventLoopDelay({ resolution: RESOLUTION_MS });
    delay.enable();
  } catch (_) {
    delay = null;
  }

  // Messages handed to the channel and not yet written: a launcher that stops reading holds at
  // most this many in the process's memory; the figures in between are dropped, not queued.
  const MAX_UNSENT = 8;
  let unsent = 0;

  function send(message) {
    try {
      if (!process.connected || unsent >= MAX_UNSENT) return;
      unsent += 1;
      // With a callback a failed send is handed to it, never thrown or emitted as 'error'.
      process.send(message, undefined, undefined, () => {
        unsent -= 1;
      });
    } catch (_) {
      // The channel is gone: the launcher ended. Nothing to do; the server runs on.
    }
  }

  function heap() {
    try {
      const h = v8.getHeapStatistics();
      return { used: h.used_heap_size, limit: h.heap_size_limit };
    } catch (_) {
      return { used: null, limit: null };
    }
  }

  // The event loop's delay over the last status interval: the 99th percentile, ms (null before
  // any measurement).
  function loopDelayMs() {
    try {
      if (!delay || delay.count === 0) return null;
      const p99 = Math.max(0, delay.percentile(99) / 1e6 - RESOLUTION_MS);
      delay.reset();
      return Math.round(p99 * 1000) / 1000;
    } catch (_) {
      return null;
    }
  }

  function sendStatus() {
    const h = heap();
    send({
      type: 'status', heapUsed: h.used, heapLimit: h.limit, clientCaches: null,
      clientConcepts: null, expansionItems: null, inFlight, refusing: false, requests: served,
      eventLoopDelayMs: loopDelayMs(),
    });
  }

  function sendSample() {
    const h = heap();
    send({
      type: 'sample', at: Date.now(), requests: intervalRequests, clientCaches: null,
      clientConcepts: null, refusals: 0, heapUsed: h.used,
      turnaroundMs: intervalRequests > 0 ? intervalTurnaround / intervalRequests : null,
    });
    intervalRequests = 0;
    intervalTurnaround = 0;
  }

  function startTimers() {
    if (statusTimer) clearInterval(statusTimer);
    if (sampleTimer) clearInterval(sampleTimer);
    statusTimer = setInterval(sendStatus, statusMs);
    statusTimer.unref();
    sampleTimer = setInterval(sendSample, sampleMs);
    sampleTimer.unref();
  }

  function onRequest(req, res) {
    try {
      const start = perfHooks.performance.now();
      inFlight += 1;
      let ended = false;
      // 'close' comes after 'finish', or alone when the client went first: once per response.
      res.once('close', () => {
        if (ended) return;
        ended = true;
        inFlight -= 1;
        served += 1;
        intervalRequests += 1;
        intervalTurnaround += perfHooks.performance.now() - start;
      });
    } catch (_) {
      // Never into the server.
    }
  }

  function onListening() {
    try {
      if (said) return;
      const address = this.address();
      const port = address && typeof address === 'object' ? address.port : null;
      // The launcher's port when it gave one; another server (metrics, admin) is not it.
      if (Number.isInteger(wantedPort) && port !== wantedPort) return;
      said = true;
      send({ type: 'hello', protocol: PROTOCOL, code, pid: process.pid });
      send({
        type: 'ready', code, role, pid: process.pid, port, protocol: PROTOCOL, memoryLimit: null,
      });
      sendStatus();
      startTimers();
    } catch (_) {
      // Never into the server.
    }
  }

  function watch(server) {
    if (!(server instanceof http.Server || server instanceof https.Server)) return;
    if (server[WATCHED]) return;
    server[WATCHED] = true;
    server.prependListener('request', onRequest);
    server.once('listening', onListening);
  }

  try {
    // https.Server is a tls.Server, not an http.Server: both listen through net.Server.
    const listen = net.Server.prototype.listen;
    net.Server.prototype.listen = function listenWatched(...args) {
      try {
        watch(this);
      } catch (_) {
        // Never into the server.
      }
      return listen.apply(this, args);
    };
  } catch (_) {
    return;
  }

  try {
    process.on('message', (message) => {
      try {
        if (!message || message.type !== 'hello') return;
        if (typeof message.code === 'string' && message.code) code = message.code;
        if (typeof message.role === 'string' && message.role) role = message.role;
        const s = Number(message.statusSeconds);
        const m = Number(message.sampleSeconds);
        if (Number.isFinite(s) && s > 0) statusMs = Math.max(100, s * 1000);
        if (Number.isFinite(m) && m > 0) sampleMs = Math.max(100, m * 1000);
        if (said) startTimers();
      } catch (_) {
        // Never into the server.
      }
    });
    // Listening for messages refs the channel; the preload must not keep the process alive.
    if (process.channel && typeof process.channel.unref === 'function') process.channel.unref();
  } catch (_) {
    // No messages: the defaults stand.
  }
})();
