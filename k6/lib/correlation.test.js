import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SIGNALS, windowSeconds, correlationQuery, parseSignals, verdict, missingReasons, correlationText } from './correlation.js';

const calm = { loadgen_cpu_utilization: 0.5, nic_utilization: 0.1, ingress_cpu_utilization: 0.5, backend_cpu_utilization: 0.2 };

test('window drops the rules\' warm-up only when the run is long enough', () => {
  assert.equal(windowSeconds(100, 130), 24);
  assert.equal(windowSeconds(100, 112), 6);
  assert.equal(windowSeconds(100, 108), 2);
  assert.equal(windowSeconds(100, 107), 7);
  assert.equal(windowSeconds(100, 100.2), 1);
});

test('one query names every rule and the window', () => {
  const q = correlationQuery(24);
  for (const rule of Object.values(SIGNALS)) assert.ok(q.includes(rule), rule);
  assert.match(q, /\[24s:1s\]/);
});

test('Prometheus answer -> signals; unknown names and NaN dropped', () => {
  const body = { data: { result: [
    { metric: { signal: 'bench:ingress_cpu_utilization:ratio' }, value: [1, '0.97'] },
    { metric: { signal: 'bench:rps_per_ingress_core:ratio' }, value: [1, 'NaN'] },
    { metric: { signal: 'bench:unknown' }, value: [1, '1'] },
  ] } };
  assert.deepEqual(parseSignals(body), { ingress_cpu_utilization: 0.97 });
  assert.deepEqual(parseSignals(null), {});
});

test('verdict: the load generator first, and it invalidates the result', () => {
  const v = verdict({ ...calm, loadgen_cpu_utilization: 0.95, ingress_cpu_utilization: 0.99 });
  assert.equal(v.limit, 'load-generator');
  assert.equal(v.valid, false);
  assert.equal(v.rule, 'bench:loadgen_cpu_utilization:ratio 0.95 >= 0.9');
});

test('verdict: NIC before ingress CPU, ingress before backends', () => {
  assert.equal(verdict({ ...calm, nic_utilization: 0.86, ingress_cpu_utilization: 0.95 }).limit, 'nic');
  assert.equal(verdict({ ...calm, ingress_cpu_utilization: 0.9, backend_cpu_utilization: 0.95 }).limit, 'ingress-cpu');
  assert.equal(verdict({ ...calm, backend_cpu_utilization: 0.95 }).limit, 'backend');
  assert.equal(verdict({ ...calm, nic_utilization: 0.84 }).limit, 'none');
});

test('verdict: unknown when an unsaturated run lacks a signal, saturation still wins', () => {
  const { nic_utilization: _, ...noNic } = calm;
  const v = verdict(noNic);
  assert.equal(v.limit, 'unknown');
  assert.match(v.rule, /bench:nic_utilization:ratio/);
  assert.equal(verdict({ ...noNic, ingress_cpu_utilization: 0.99 }).limit, 'ingress-cpu');
});

test('missing reasons: monitoring off, Prometheus silent, or no data', () => {
  const off = missingReasons({}, { prometheusUrl: '' }, false);
  assert.equal(Object.keys(off).length, Object.keys(SIGNALS).length);
  assert.match(off.nic_utilization, /monitoring is off/);
  assert.match(missingReasons({}, { prometheusUrl: 'http://198.18.0.1:9090' }, false).server_rps, /did not answer/);
  const some = missingReasons({ ...calm }, { prometheusUrl: 'http://198.18.0.1:9090' }, true);
  assert.ok(!('nic_utilization' in some));
  assert.match(some.server_rps, /no data in the run window/);
});

test('text: one line per missing reason, and NOT VALID for a client-bound run', () => {
  const c = { signals: { loadgen_cpu_utilization: 0.99 }, missing: missingReasons({ loadgen_cpu_utilization: 0.99 }, { prometheusUrl: 'http://x' }, true) };
  const lines = correlationText(c, verdict(c.signals), 14);
  assert.equal(lines.filter((l) => l.startsWith('missing')).length, 1);
  assert.match(lines.at(-1), /^verdict {7}load-generator-bound.*NOT VALID/);
});

test('ingress CPUs busy with other work: the verdict says whose the time was', () => {
  const shared = { ...calm, ingress_cpu_utilization: 0.96, ingress_cpu_cores: 0.52, ingress_cpu_limit_cores: 1 };
  const v = verdict(shared);
  assert.equal(v.limit, 'ingress-cpu');
  assert.match(v.text, /its CPUs 96% busy, 0\.52 of 1\.00 cores its own/);
  assert.match(correlationText({ signals: shared, missing: {} }, v, 14)[0], /\(96%: its CPUs' load, shared\)/);
  const own = verdict({ ...shared, ingress_cpu_cores: 0.95 });
  assert.match(own.text, /\(96%\)$/);
});

test('the verdict reads the contract (signals.js): each limit a signal with its level', async () => {
  const { LIMITS, SATURATION } = await import('./signals.js');
  assert.deepEqual(LIMITS.map((l) => l.key).sort(), Object.keys(SATURATION).sort());
  for (const { key, limit } of LIMITS) {
    assert.ok(SIGNALS[key], key);
    const at = verdict({ ...calm, [key]: SATURATION[key] });
    assert.equal(at.limit, limit, `${key} at its level ${SATURATION[key]}`);
    assert.notEqual(verdict({ ...calm, [key]: SATURATION[key] - 0.001 }).limit, limit, `${key} below its level`);
  }
});
