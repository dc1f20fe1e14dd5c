import { test } from 'node:test';
import assert from 'node:assert/strict';
import { REFUSED_GRACE_S, RULE_INTERVAL_S, SIGNALS, STEADY_MIN_S, askAgain, steadyWindow, correlationQuery, evaluationsIn, existingQuery, existingTiming, parseSignals, steadyMinS, verdict, missingReasons, correlationText } from './correlation.js';
import { EXISTING_QUERIES } from './signals.js';

const calm = { loadgen_cpu_utilization: 0.5, nic_utilization: 0.1, ingress_cpu_utilization: 0.5, backend_cpu_utilization: 0.2 };

test('the steady window: from the ramp, the collection lag and a rule window into the load, to its end', () => {
  // RAMP_S 1 + COLLECT_LAG_S 1 + RULE_WINDOW_S 6: the first evaluation that saw only full load.
  assert.deepEqual(steadyWindow(100, 120), { from: 108, to: 120, steady: true });
  assert.deepEqual(steadyWindow(100, 110), { from: 108, to: 110, steady: true });
  assert.equal(STEADY_MIN_S, 10);
  // Shorter: every evaluation after the rules' warm-up, then the whole run; not steady.
  assert.deepEqual(steadyWindow(100, 109), { from: 106, to: 109, steady: false });
  assert.deepEqual(steadyWindow(100, 107), { from: 100, to: 107, steady: false });
});

test('an existing ingress at a 2 s scrape: the load\'s first sample up to the kubelet\'s 30 s late, the window after it', () => {
  const t2 = existingTiming(2);
  assert.deepEqual(t2, { window: 6, interval: 2, lag: 30 });
  // RAMP_S 1 + 30 s for an idle container's first collection + three scrapes + one evaluation
  assert.equal(steadyMinS(t2), 39);
  assert.deepEqual(steadyWindow(100, 140, t2), { from: 137, to: 140, steady: true });
  assert.deepEqual(steadyWindow(100, 112, t2), { from: 106, to: 112, steady: false });
});

test('an existing ingress at a 30 s scrape: three scrapes a window, one of lag, the window from there', () => {
  const t30 = existingTiming(30);
  assert.deepEqual(t30, { window: 90, interval: 30, lag: 30 });
  // RAMP_S 1 + one scrape of lag + three scrapes: the first evaluation that saw only full load.
  assert.equal(steadyMinS(t30), 151);
  assert.deepEqual(steadyWindow(100, 300, t30), { from: 221, to: 300, steady: true });
  assert.deepEqual(steadyWindow(100, 240, t30), { from: 190, to: 240, steady: false });
  assert.deepEqual(steadyWindow(100, 200, t30), { from: 100, to: 200, steady: false });
});

test('without the rules loaded: one query, every signal written out, filled, evaluated every scrape and named by its rule', () => {
  const values = { window: '90s', ingress: 'namespace="ingress", pod=~"ctl-1|ctl-2"', backend: 'namespace="shop"', loadgen: 'namespace="ingress-bench"', link: 1e9, nodes: 'instance=~"(198\\.18\\.70\\.1|node-a)(:[0-9]+)?"', nic: 'device!~"lo|veth.*"' };
  const q = existingQuery({ from: 221, to: 300 }, values, 30);
  assert.ok(!q.includes('$'), q);
  assert.ok(!/bench:[a-z_]+:[a-z_]+[^"a-z_]/.test(q), 'every rule read is written out');
  assert.match(q, /^\(label_replace\(label_replace\(/);
  assert.match(q, /\)\[80s:30s\]$/);
  for (const [key, rule] of Object.entries(SIGNALS)) {
    assert.ok(q.includes(`"__name__", "${rule}", "", ""), "bench_signal", "${key}", "", "")`), key);
  }
  assert.equal(q.split(' or label_replace(label_replace(').length, Object.keys(EXISTING_QUERIES).length);
  assert.ok(q.includes('container_cpu_usage_seconds_total{namespace="ingress", pod=~"ctl-1|ctl-2", container!~"|POD|shutdown-manager"}[90s]'), q);
  assert.ok(q.includes('vector(1000000000)'), q);
  assert.ok(q.includes('node_network_transmit_bytes_total{instance=~"(198\\.18\\.70\\.1|node-a)(:[0-9]+)?", device!~"lo|veth.*"}[90s]'), q);
  const { link, ...noLink } = values;
  assert.throws(() => existingQuery({ from: 221, to: 300 }, noLink, 30), /no value for \$link/);
});

test('the evaluations are in when each signal\'s newest is within the interval it is evaluated at', () => {
  const body = { data: { result: [{ metric: { __name__: 'bench:a' }, values: [[270, '1']] }] } };
  assert.equal(evaluationsIn(body, 300, 30), false);
  assert.equal(evaluationsIn(body, 299, 30), true);
  assert.equal(askAgain(200, body, 300, 330, 30), true);
  assert.equal(askAgain(200, body, 300, 361, 30), false);
});

test('one query reads every rule\'s samples over the window', () => {
  const q = correlationQuery({ from: 108, to: 120 });
  for (const rule of Object.values(SIGNALS)) assert.ok(q.includes(rule), rule);
  assert.match(q, /\}\[13s\]$/);
  // an existing ingress's rules installed for its run: their series only
  assert.equal(correlationQuery({ from: 108, to: 120 }, 'run-1'), q.replace('"}[13s]', '", bench_rules="run-1"}[13s]'));
});

test('Prometheus samples -> per-evaluation sums, averaged from the window\'s start; NaN and unknown names dropped', () => {
  const body = { data: { result: [
    { metric: { __name__: 'bench:ingress_cpu_cores:rate', pod: 'a' }, values: [[106, '9'], [108, '0.25'], [110, '0.35']] },
    { metric: { __name__: 'bench:ingress_cpu_cores:rate', pod: 'b' }, values: [[108, '0.25'], [110, '0.25']] },
    { metric: { __name__: 'bench:ingress_cpu_utilization:ratio' }, values: [[108, '0.9'], [110, '1.0'], [112, '0.95']] },
    { metric: { __name__: 'bench:rps_per_ingress_core:ratio' }, values: [[108, 'NaN']] },
    { metric: { __name__: 'bench:unknown' }, values: [[108, '1']] },
  ] } };
  const got = parseSignals(body, 108);
  assert.deepEqual(Object.keys(got.signals).sort(), ['ingress_cpu_cores', 'ingress_cpu_utilization']);
  assert.ok(Math.abs(got.signals.ingress_cpu_cores - 0.55) < 1e-9); // (0.5 + 0.6) / 2: 106 is before the window
  assert.ok(Math.abs(got.signals.ingress_cpu_utilization - 0.95) < 1e-9);
  assert.equal(got.evaluations, 3);
  assert.deepEqual(parseSignals(null), { signals: {}, evaluations: 0 });
});

test('the teardown asks again while a rule is late, and while the connection is refused for its grace', () => {
  assert.equal(REFUSED_GRACE_S, 10);
  const late = { data: { result: [{ metric: { __name__: 'bench:a' }, values: [[116, '1']] }] } };
  const inBody = { data: { result: [{ metric: { __name__: 'bench:a' }, values: [[119.5, '1']] }] } };
  // refused (status 0): again up to 10 s past the window's end, then given up
  assert.equal(askAgain(0, null, 120, 121), true);
  assert.equal(askAgain(0, null, 120, 129.9), true);
  assert.equal(askAgain(0, null, 120, 130), false);
  // answered: again only while an evaluation is still to be written, two intervals at most
  assert.equal(askAgain(200, late, 120, 123), true);
  assert.equal(askAgain(200, late, 120, 124.1), false);
  assert.equal(askAgain(200, inBody, 120, 120.5), false);
  // any other answer (Prometheus reached, refusing the query) is final
  assert.equal(askAgain(503, null, 120, 120.5), false);
});

test('the evaluations up to the window\'s end are in when every rule\'s newest sample is within an interval of it', () => {
  assert.equal(RULE_INTERVAL_S, 2);
  const at = (...rules) => ({ data: { result: rules.map(([name, ts, pod]) => ({ metric: { __name__: name, pod }, values: ts.map((t) => [t, '1']) })) } });
  // The last slot before 120 was 119.5: in for one rule, still to be written for the other.
  assert.equal(evaluationsIn(at(['bench:a', [117.5, 119.5]], ['bench:b', [116.2, 118.2]]), 120), true);
  assert.equal(evaluationsIn(at(['bench:a', [117.5, 119.5]], ['bench:b', [116, 118]]), 120), false);
  // A pod gone mid-run leaves its series short: the rule's newest sample, over its series, decides.
  assert.equal(evaluationsIn(at(['bench:c', [110], 'old'], ['bench:c', [117.5, 119.5], 'new']), 120), true);
  // No samples at all is a missing rule, not a late one; no answer waits for nothing.
  assert.equal(evaluationsIn(at(['bench:d', []]), 120), true);
  assert.equal(evaluationsIn(null, 120), true);
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

test('text: the window the signals were averaged over, in seconds of the load', () => {
  const signals = { ...calm };
  const at = (w) => correlationText({ signals, missing: {}, window: { start: 99, end: 121, load_start: 100, ...w } }, verdict(signals), 14)
    .find((l) => l.startsWith('window'));
  assert.equal(at({ from: 108, to: 120, steady: true, evaluations: 7 }), 'window        signals averaged over 8-20 s of the load (7 evaluations of the rules)');
  assert.match(at({ from: 106, to: 109, steady: false, evaluations: 2 }), /over 6-9 s .*: a load under 10 s has no steady window/);
  assert.equal(at({}), undefined);
  // An existing ingress's: the interval and window its scrapes gave, and its own shortest steady run.
  assert.equal(at({ from: 221, to: 300, steady: true, evaluations: 3, interval_s: 30, rule_window_s: 90, steady_min_s: 151 }),
    'window        signals averaged over 121-200 s of the load (3 evaluations of the rules, every 30 s over 90 s: the scrape interval of the ingress\'s series)');
  assert.match(at({ from: 190, to: 240, steady: false, evaluations: 2, interval_s: 30, rule_window_s: 90, steady_min_s: 151 }),
    /: a load under 151 s has no steady window/);
  assert.equal(at({ from: 108, to: 120, steady: true, evaluations: 7, interval_s: 2, rule_window_s: 6, steady_min_s: 10 }),
    'window        signals averaged over 8-20 s of the load (7 evaluations of the rules)');
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
