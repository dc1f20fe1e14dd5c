import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig } from './config.js';
import { headline, textSummary, summaryFiles, fmtInt, gbits } from './summary.js';

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
  const h = headline(data(), parseConfig({}, 'rps'));
  assert.equal(h.requests, 184220);
  assert.equal(h.gbit_per_s, 1);
  assert.equal(h.thresholds.length, 3);
  assert.equal(h.passed, true);
});

test('headline and text name the crossed threshold', () => {
  const cfg = parseConfig({}, 'rps');
  const h = headline(data(0.01, false), cfg);
  assert.equal(h.passed, false);
  assert.equal(h.errors, 1842);
  const text = textSummary(h, cfg);
  assert.match(text, /FAIL \(1\/3 thresholds\)/);
  assert.match(text, /✗ http_req_duration p\(99\)<500/);
  assert.match(text, /18,422 req\/s/);
});

test('files: summary.json, summary.txt, meta.json in the run directory', () => {
  const cfg = parseConfig({ TESTID: 't1', RESULTS_DIR: 'out/t1', BENCH_META: '{"git_revision":"abc"}' }, 'rps');
  const files = summaryFiles(data(), cfg, new Date('2026-11-21T00:00:00Z'));
  assert.deepEqual(Object.keys(files).sort(), ['out/t1/meta.json', 'out/t1/summary.json', 'out/t1/summary.txt', 'stdout']);
  const meta = JSON.parse(files['out/t1/meta.json']);
  assert.equal(meta.git_revision, 'abc');
  assert.equal(meta.variant, 'default');
  assert.equal(meta.target, 'http://198.18.0.2/1kb.bin');
  assert.equal(JSON.parse(files['out/t1/summary.json']).result.rps, 18422);
});
