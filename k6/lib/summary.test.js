import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from './config.js';
import { correlation, headline, textSummary, summaryFiles, fmtInt, gbits, tlsLine } from './summary.js';
import { verdict } from './correlation.js';
import { PROFILES } from './profiles.mjs';

// parseConfig as a scenario file calls it: with its profile.
const config = (env, scenario) => parseConfig(env, scenario, PROFILES[scenario]);

// The shape k6 hands to handleSummary, trimmed to what the summary reads.
const data = (failedRate = 0, ok = true) => ({
  state: { testRunDurationMs: 10000 },
  metrics: {
    http_reqs: { values: { count: 184220, rate: 18422 } },
    http_req_duration: {
      values: { med: 1.2, 'p(95)': 3.01, 'p(99)': 4.1, max: 20 },
      thresholds: { 'p(95)<250': { ok: true }, 'p(99)<500': { ok } },
    },
    http_req_failed: { values: { rate: failedRate, passes: Math.round(failedRate * 184220) }, thresholds: { 'rate<0.0001': { ok: failedRate < 0.0001 } } },
    data_received: { values: { count: 125e6 * 10, rate: 125e6 } },
  },
});

test('formatting helpers', () => {
  assert.equal(fmtInt(18422.4), '18,422');
  assert.equal(fmtInt(999), '999');
  assert.equal(gbits(125e6), 1);
});

test('headline: pass when every threshold passed', () => {
  const h = headline(data(), config({}, 'rps'));
  assert.equal(h.requests, 184220);
  assert.equal(h.gbit_per_s, 1);
  assert.equal(h.thresholds.length, 3);
  assert.equal(h.passed, true);
});

test('headline: the teardown\'s Prometheus queries are not counted as requests', () => {
  const d = data();
  assert.equal(headline(d, config({ PROMETHEUS_URL: 'http://198.18.0.1:9090' }, 'rps')).requests, 184220);
  d.metrics.bench_correlation_queries = { values: { count: 3 } };
  assert.equal(headline(d, config({ PROMETHEUS_URL: 'http://198.18.0.1:9090' }, 'rps')).requests, 184217);
});

test('headline and text name the crossed threshold', () => {
  const cfg = config({}, 'rps');
  const h = headline(data(0.01, false), cfg);
  assert.equal(h.passed, false);
  assert.equal(h.errors, 1842);
  const text = textSummary(h, cfg);
  assert.match(text, /FAIL \(1\/3 thresholds\)/);
  assert.match(text, /✗ http_req_duration p\(99\)<500/);
  assert.match(text, /18,422 req\/s/);
  assert.match(text, /100 connections × 15s/);
  assert.match(textSummary(h, config({ HTTP_VERSION: '2', STREAMS: '8' }, 'rps')), /100 connections of HTTP\/2, 8 streams each, × 15s/);
});

test('files: summary.json, summary.txt, meta.json in the run directory', () => {
  const cfg = config({ TESTID: 't1', RESULTS_DIR: 'out/t1', BENCH_META: '{"git_revision":"abc"}' }, 'rps');
  const files = summaryFiles(data(), cfg, new Date('2026-11-21T00:00:00Z'));
  assert.deepEqual(Object.keys(files).sort(), ['out/t1/meta.json', 'out/t1/summary.json', 'out/t1/summary.txt', 'stdout']);
  const meta = JSON.parse(files['out/t1/meta.json']);
  assert.equal(meta.git_revision, 'abc');
  assert.equal(meta.variant, 'default');
  assert.equal(meta.target, 'http://198.18.0.2/1kb.bin');
  assert.equal(JSON.parse(files['out/t1/summary.json']).result.rps, 18422);
});

test('native open model: the asked and achieved rates, late and dropped sends, the service time', () => {
  const d = data();
  Object.assign(d.metrics, {
    bench_sends_late: { values: { count: 12 } }, bench_sends_client_late: { values: { count: 2 } }, bench_sends_dropped: { values: { count: 0 } },
    bench_http_req_service_p95: { values: { value: 0.21 } }, bench_http_req_service_p99: { values: { value: 0.35 } },
  });
  const cfg = config({ ENGINE: 'native', RATE: '18500' }, 'rps');
  const h = headline(d, cfg);
  assert.deepEqual([h.sends_late, h.sends_dropped, h.service_p99_ms], [12, 0, 0.35]);
  assert.match(textSummary(h, cfg), /open model {4}18,422 of 18,500 req\/s asked \(99\.58%\), late 12 \(the client's own 2\), dropped 0; .*service time p95 0\.21 ms {2}p99 0\.35 ms/);
  assert.equal(headline(d, config({ ENGINE: 'native' }, 'rps')).sends_late, undefined);
});

test('a load-generator-bound run fails its validity threshold, and the result line says why', () => {
  const d = data();
  d.metrics.bench_loadgen_cpu_utilization = { values: { value: 0.97 }, thresholds: { 'value<0.9': { ok: false } } };
  const cfg = config({}, 'rps');
  const h = headline(d, cfg);
  const v = verdict({ loadgen_cpu_utilization: 0.97 });
  assert.equal(h.passed, false);
  const result = textSummary(h, cfg, null, v).split('\n').find((l) => l.startsWith('result'));
  assert.match(result, /^result +FAIL \(3\/4 thresholds\) +✗ bench_loadgen_cpu_utilization value<0\.9 +NOT VALID: load-generator-bound: the load generator \(k6\) ran out of CPU.*\(97%\) \(REQUIRE_VALID=0 reports it without failing\)$/);
});

test('correlation: only the signals the teardown set from an answer; -1 is a signal without data', () => {
  const d = data();
  d.metrics.bench_loadgen_cpu_utilization = { values: { value: 0 }, thresholds: { 'value<0.9': { ok: true } } }; // never set
  const cfg = config({ PROMETHEUS_URL: 'http://198.18.0.1:9090' }, 'rps');
  assert.deepEqual(correlation(d, cfg, new Date()).signals, {});
  d.metrics.bench_prometheus_answered = { values: { value: 1 } };
  d.metrics.bench_ingress_cpu_cores = { values: { value: -1 } };
  d.metrics.bench_loadgen_cpu_utilization.values.value = 0.42;
  const c = correlation(d, cfg, new Date());
  assert.deepEqual(c.signals, { loadgen_cpu_utilization: 0.42 });
  assert.match(c.missing.ingress_cpu_cores, /no data in the run window/);
});

test('correlation: the window the teardown averaged, from setup\'s end for DURATION', () => {
  const d = { ...data(), setup_data: { start: 1000 } };
  d.metrics.bench_prometheus_answered = { values: { value: 1 } };
  d.metrics.bench_signal_evaluations = { values: { value: 7 } };
  const cfg = config({ PROMETHEUS_URL: 'http://198.18.0.1:9090', DURATION: '20s' }, 'rps');
  const w = correlation(d, cfg, new Date(1021.5 * 1000)).window;
  assert.deepEqual(w, { start: 1011.5, end: 1021.5, load_start: 1000, from: 1008, to: 1020, steady: true, evaluations: 7,
    interval_s: 2, rule_window_s: 6, steady_min_s: 10 });
  // An existing ingress scraped every 30 s: its window, from its own timing.
  const existing = config({ PROMETHEUS_URL: 'http://198.18.0.1:9090', DURATION: '300s',
    IB_EXISTING: JSON.stringify({ interval: 30, ingress: 'namespace="i"', backend: 'namespace="b"', loadgen: 'namespace="l"', link: 1e9, nodes: 'instance=~"(n1)(:[0-9]+)?"', nic: 'device=~"eth0"' }) }, 'rps');
  assert.deepEqual(correlation(d, existing, new Date(1301.5 * 1000)).window, { start: 1291.5, end: 1301.5, load_start: 1000,
    from: 1121, to: 1300, steady: true, evaluations: 7, interval_s: 30, rule_window_s: 90, steady_min_s: 151 });
  // No answer: no averaging window.
  delete d.metrics.bench_prometheus_answered;
  assert.deepEqual(Object.keys(correlation(d, cfg, new Date(1021.5 * 1000)).window), ['start', 'end']);
});

test('native engine: the headline percentiles are its histogram\'s, the buckets kept to merge', () => {
  const hist = { relative_error: 1 / 256, buckets: [[1, 99], [5, 1]], p50_ms: 1, p95_ms: 1, p99_ms: 1.04 };
  const files = summaryFiles(data(), config({ RESULTS_DIR: 'out/t2' }, 'rps'), new Date('2026-11-21T00:00:00Z'), { histogram: hist });
  const r = JSON.parse(files['out/t2/summary.json']).result;
  assert.deepEqual([r.p50_ms, r.p95_ms, r.p99_ms], [1, 1, 1.04]);
  assert.deepEqual(r.latency_histogram, { relative_error: 1 / 256, buckets: [[1, 99], [5, 1]] });
  assert.match(files['out/t2/summary.txt'], /p99 1\.04 ms/);
});

test('native engine: errors, checks, the maximum and the TLS average are its counts of the load, not k6\'s few samples', () => {
  const outcomes = {
    requests: 1000, failed: 3, failed_rate: 0.003, max_ms: 42.5, latency_ms_sum: 900, tls_handshakes: 4, tls_handshake_ms_sum: 20,
    checks: { 'status is 200': { passes: 997, fails: 3 }, 'body is 1024 B': { passes: 998, fails: 2 } }, checks_rate: 0.9975,
  };
  const h = headline(data(0.5), config({}, 'rps'), outcomes); // k6's Rate: setup's and the teardown's requests only
  assert.deepEqual([h.errors, h.error_rate, h.max_ms], [3, 0.003, 42.5]);
  assert.deepEqual(h.checks, { passes: 1995, fails: 5 });
  assert.equal(h.tls_handshakes, 4);
  assert.equal(h.tls_handshake_avg_ms, 0.02); // k6's average: over requests, a reused connection's 0 included
  const js = headline({ ...data(), metrics: { ...data().metrics, checks: { values: { passes: 10, fails: 1 } } } }, config({}, 'rps'));
  assert.deepEqual([js.errors, js.max_ms, js.checks], [0, 20, { passes: 10, fails: 1 }]);
});

test('native engine: the handshakes by what they negotiated, beside what was asked', () => {
  const cfg = config({ TLS_VERSION: '1.3', TLS_RESUMPTION: 'tickets' }, 'tps');
  const line = tlsLine({ 'TLS 1.3 TLS_AES_128_GCM_SHA256 X25519 http/1.1 resumed': 1196, 'TLS 1.3 TLS_AES_128_GCM_SHA256 X25519 http/1.1 full': 4 }, cfg);
  assert.equal(line, 'tls           asked TLS 1.3, x25519, resumption tickets; negotiated TLS 1.3 TLS_AES_128_GCM_SHA256 X25519 http/1.1: 4 full, 1,196 resumed');
});
