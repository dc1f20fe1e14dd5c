// The one request loop every scenario shares; a scenario file holds its question and profile.
import http from 'k6/http';
import { check, sleep } from 'k6';
import exec from 'k6/execution';
import { Counter, Gauge } from 'k6/metrics';
import { parseConfig, vuConnections, vuFirstConnection } from './config.js';
import { buildOptions } from './options.js';
import { summaryFiles } from './summary.js';
import { SIGNALS, askAgain, correlationQuery, existingQuery, parseSignals, steadyWindow } from './correlation.js';

// Gauges are declared in the init context: one per correlation signal, so thresholds can
// name them, plus whether Prometheus answered at all and how many evaluations of the rules the
// signals average.
const gauges = Object.fromEntries(Object.keys(SIGNALS).map((k) => [k, new Gauge(`bench_${k}`)]));
const answered = new Gauge('bench_prometheus_answered');
const evaluations = new Gauge('bench_signal_evaluations');
// The teardown's queries: HTTP requests too, not load (summary.js takes them from the count).
const queries = new Counter('bench_correlation_queries');

export function scenario(name, profile) {
  const cfg = parseConfig(__ENV, name, profile);
  // The native engine (xk6/) only when asked for: stock k6 (Grafana's image on a user's
  // cluster) still runs the k6/http path, and says it lacks k6/x/ingressbench otherwise.
  const ib = cfg.engine === 'native' ? require('k6/x/ingressbench') : null; // eslint-disable-line no-undef
  const params = {
    headers: { Host: cfg.host, ...(cfg.reuse ? {} : { Connection: 'close' }) },
    // Body-less scenarios would otherwise keep 1 MB per response in memory.
    responseType: cfg.discardBodies ? 'none' : 'binary',
    timeout: cfg.timeout,
  };
  const bodyOk = (res) => (cfg.discardBodies
    ? Number(res.headers['Content-Length']) === cfg.bodyBytes
    : (res.body ? res.body.byteLength : 0) === cfg.bodyBytes);
  const checks = {
    'status is 200': (res) => res.status === 200,
    [`body is ${cfg.bodyBytes} B`]: bodyOk,
  };
  const checkNames = Object.keys(checks); // the native engine's checks carry the same names

  return {
    options: buildOptions(cfg),
    // Fail fast, before load starts, when the target does not answer as the scenario expects.
    // HTTP/2 is asked of the native engine's own client (k6/http is held to HTTP/1.1 and has
    // no h2c): a server without it is named before the load.
    setup() {
      // A TLS version the server does not offer, said as that (its alert alone names no version).
      const refused = (error) => {
        if (/protocol version not supported/.test(error || '')) {
          throw new Error(`the server at ${cfg.target} does not negotiate TLS ${cfg.tls.version} (TLS_VERSION): ${error}`);
        }
      };
      // The native engine's own client asks, with the load's TLS group: k6/http offers its own,
      // and a server's record of the connection (bench.sh's confirmation pass) would show them.
      if (ib) {
        const res = ib.probe(cfg.readyUrl, cfg.host, 5000, { http2: cfg.http2, tlsGroup: cfg.scheme === 'https' ? cfg.tls.group : '' });
        refused(res.error);
        if (res.error || res.status !== 200 || res.bodyBytes !== cfg.bodyBytes) {
          throw new Error(`target ${cfg.readyUrl} not ready${cfg.http2 ? ' for HTTP/2' : ''}: ${res.error || `status ${res.status}, ${res.bodyBytes} bytes`}`);
        }
        return { start: Date.now() / 1000 };
      }
      const res = http.get(cfg.readyUrl, { ...params, timeout: '5s' });
      refused(res.error);
      if (res.status !== 200 || !bodyOk(res)) {
        throw new Error(`target ${cfg.readyUrl} not ready: status ${res.status}${res.error ? ` (${res.error})` : ''}`);
      }
      return { start: Date.now() / 1000 };
    },
    // The run's server side, from Prometheus: one query, again while a rule's last evaluation
    // before the load's end is still to be written or the connection is refused (askAgain), each tagged
    // apart from the load (counted in bench_correlation_queries, which the client's count
    // leaves out) and never a failed request, so a silent Prometheus costs the correlation, not
    // the run's thresholds.
    teardown(data) {
      if (ib) ib.publishLatency(); // every request in: the latency thresholds' final values
      if (!cfg.prometheusUrl) return;
      // The load ran from setup's end for DURATION; the signals are read over its steady part.
      const w = steadyWindow(data.start, Math.min(Date.now() / 1000, data.start + cfg.durationMs / 1000), cfg.timing);
      const { interval } = cfg.timing;
      const q = cfg.existing && !cfg.existing.rules ? existingQuery(w, { ...cfg.existing, window: `${cfg.timing.window}s` }, interval)
        : correlationQuery(w, cfg.existing && cfg.existing.rules);
      // An existing ingress's inputs: the scrape at or before the window's end is in one interval after it.
      if (cfg.existing) sleep(Math.max(0, w.to + interval + 1 - Date.now() / 1000));
      let res;
      for (;;) {
        queries.add(1);
        res = http.get(`${cfg.prometheusUrl}/api/v1/query?query=${encodeURIComponent(q)}&time=${w.to}`, {
          // responseType: the throughput scenario discards bodies by default; this one is read.
          timeout: '10s', responseType: 'text', tags: { name: 'bench-correlation' }, responseCallback: http.expectedStatuses({ min: 0, max: 599 }),
        });
        if (!askAgain(res.status, res.status === 200 ? res.json() : null, w.to, Date.now() / 1000, interval)) break;
        sleep(res.status === 0 ? 1 : 0.2);
      }
      if (res.status !== 200) {
        console.warn(`correlation: Prometheus at ${cfg.prometheusUrl} answered ${res.status || res.error}`);
        answered.add(0);
        return;
      }
      answered.add(1);
      // -1: no data for the signal (all are >= 0); a Gauge never set would read 0.
      const got = parseSignals(res.json(), w.from);
      for (const key of Object.keys(gauges)) gauges[key].add(key in got.signals ? got.signals[key] : -1);
      evaluations.add(got.evaluations);
    },
    iteration: cfg.engine === 'native'
      ? () => ib.run({
        url: cfg.url, host: cfg.host, reuse: cfg.reuse, bodyBytes: cfg.bodyBytes, requestSamples: cfg.requestSamples,
        tlsGroup: cfg.tls.group, tlsResumption: cfg.tls.resumption === 'tickets', http2: cfg.http2, streams: cfg.streams,
        // This VU's share of the connections, 100 ms of requests on each per call (the JS
        // call is then ~0.01% of the time), never past the scenario's end. Open model: each
        // connection sends on its slots of the test's RATE/s schedule from the scenario's
        // start (xk6/pacing.go), not one JS iteration per request.
        connections: vuConnections(cfg, exec.vu.idInTest),
        sliceMs: 100, endMs: exec.scenario.startTime + cfg.durationMs, timeoutMs: cfg.timeoutMs,
        // The timeline's origin (xk6/timeline.go), and the open model's schedule's.
        startMs: exec.scenario.startTime,
        ...(cfg.rate ? {
          rate: cfg.rate, totalConnections: cfg.connections,
          firstConnection: vuFirstConnection(cfg, exec.vu.idInTest),
        } : {}),
        checkStatus: checkNames[0], checkBody: checkNames[1],
      })
      : () => check(http.get(cfg.url, params), checks),
    // The native engine's run histogram rides along: a distributed run merges its segments'.
    handleSummary: (data) => summaryFiles(data, cfg, new Date(), ib ? { histogram: ib.latencyHistogram(), outcomes: ib.outcomes(), timeline: ib.timeline() } : null),
  };
}
