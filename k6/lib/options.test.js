import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig, vuConnections, vuFirstConnection } from './config.js';
import { buildOptions } from './options.js';
import { PROFILES } from './profiles.mjs';

// parseConfig as a scenario file calls it: with its profile.
const config = (env, scenario) => parseConfig(env, scenario, PROFILES[scenario]);

test('closed model: constant VUs = connections, one threshold array per metric', () => {
  const o = buildOptions(config({ ENGINE: 'js', CONNECTIONS: '50', DURATION: '30s' }, 'rps'));
  // The run's tags on the scenario as well as globally: a --tag on the command line replaces the latter.
  assert.deepEqual(o.scenarios.rps, { executor: 'constant-vus', vus: 50, duration: '30s', gracefulStop: '5s', tags: o.tags });
  assert.deepEqual(Object.keys(o.tags).sort(), ['platform', 'scenario', 'testid', 'variant']);
  assert.deepEqual(o.thresholds.http_req_duration, ['p(95)<250', 'p(99)<500']);
  assert.deepEqual(o.thresholds.http_req_failed, ['rate<0.0001']);
  assert.equal(o.thresholds.dropped_iterations, undefined);
  assert.equal(o.thresholds.http_reqs, undefined);
  assert.equal(o.noConnectionReuse, false);
});

test('k6/http open model gates on dropped iterations; RPS floor is optional', () => {
  const o = buildOptions(config({ ENGINE: 'js', RATE: '5000', CONNECTIONS: '20', RPS_MIN: '4000', DROPPED_MAX: '3' }, 'rps'));
  assert.equal(o.scenarios.rps.executor, 'constant-arrival-rate');
  assert.equal(o.scenarios.rps.rate, 5000);
  assert.equal(o.scenarios.rps.maxVUs, 20);
  assert.deepEqual(o.thresholds.dropped_iterations, ['count<=3']);
  assert.deepEqual(o.thresholds.http_reqs, ['rate>=4000']);
});

test('tps: the seed TLS 1.2 cipher (its ECDSA twin for an ECDSA key), no connection reuse', () => {
  const o = buildOptions(config({}, 'tps'));
  assert.deepEqual(o.tlsVersion, { min: 'tls1.2', max: 'tls1.2' });
  assert.deepEqual(o.tlsCipherSuites, ['TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384', 'TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384']);
  assert.equal(o.noConnectionReuse, true);
  const v13 = buildOptions(config({ TLS_VERSION: '1.3' }, 'tps'));
  assert.deepEqual([v13.tlsVersion, v13.tlsCipherSuites], [{ min: 'tls1.3', max: 'tls1.3' }, undefined]);
});

test('throughput discards bodies; http has no TLS options', () => {
  const o = buildOptions(config({}, 'throughput'));
  assert.equal(o.discardResponseBodies, true);
  assert.equal(o.tlsVersion, undefined);
  assert.deepEqual(o.tags.scenario, 'throughput');
});

test('native engine: thresholds on its Gauges of counts and a bounded histogram, not on Rates and the Trend', () => {
  const o = buildOptions(config({ ENGINE: 'native', P95_MS: '20' }, 'rps'));
  assert.deepEqual(o.thresholds.bench_http_req_duration_p95, ['value<20']);
  assert.deepEqual(o.thresholds.bench_http_req_duration_p99, ['value<500']);
  assert.deepEqual(o.thresholds.bench_http_req_failed_rate, ['value<0.0001']);
  assert.deepEqual(o.thresholds.bench_checks_rate, ['value==1']);
  for (const m of ['http_req_duration', 'http_req_failed', 'checks']) assert.equal(o.thresholds[m], undefined, m);
  const js = buildOptions(config({ ENGINE: 'js', P95_MS: '20' }, 'rps'));
  assert.deepEqual(js.thresholds.http_req_duration, ['p(95)<20', 'p(99)<500']);
  assert.deepEqual(js.thresholds.checks, ['rate==1']);
});

test('native closed model: a loop (VU) per client CPU of 25 connections or more, 250 at most each, exactly CONNECTIONS in all', () => {
  const cases = [[1, 2, 1], [24, 2, 1], [25, 2, 1], [26, 2, 2], [50, 2, 2], [50, 1, 1], [999, 2, 4], [1000, 2, 4], [1001, 2, 5],
    [100, 8, 4], [1000, 8, 8], [1000, 1, 4], [20000, 2, 80]];
  for (const [n, cpus, want] of cases) {
    const cfg = config({ ENGINE: 'native', CONNECTIONS: String(n), CLIENT_CPUS: String(cpus) }, 'rps');
    const vus = buildOptions(cfg).scenarios.rps.vus;
    assert.equal(vus, want, `${n} connections on ${cpus} CPUs`);
    let total = 0;
    for (let id = 1; id <= vus; id++) total += vuConnections(cfg, id);
    assert.equal(total, n);
  }
  // k6/http's open model keeps a VU per in-flight request.
  assert.equal(buildOptions(config({ ENGINE: 'js', RATE: '100', CONNECTIONS: '40' }, 'rps')).scenarios.rps.maxVUs, 40);
});

test('in-cluster segments: a VU for each pod, and a connection for each', () => {
  // 10 connections fit one VU; two pods each need one (a pod without a VU runs nothing).
  const cfg = config({ ENGINE: 'native', CONNECTIONS: '10', SEGMENTS: '2' }, 'throughput');
  assert.equal(buildOptions(cfg).scenarios.throughput.vus, 2);
  assert.deepEqual([1, 2].map((id) => vuConnections(cfg, id)), [5, 5]);
  assert.throws(() => config({ CONNECTIONS: '2', SEGMENTS: '3' }, 'rps'), /CONNECTIONS 2 is fewer than SEGMENTS 3: each k6 pod needs a connection of its own/);
});

test('native open model: the engine paces the connections; every connection has its own index', () => {
  const cfg = config({ ENGINE: 'native', RATE: '2000', CONNECTIONS: '60', CLIENT_CPUS: '3', DURATION: '10s', LATE_MAX: '0.02' }, 'rps');
  const o = buildOptions(cfg);
  assert.equal(o.scenarios.rps.executor, 'constant-vus');
  assert.equal(o.scenarios.rps.vus, 3);
  assert.deepEqual(o.thresholds.bench_sends_dropped, ['count<=0']);
  assert.deepEqual(o.thresholds.bench_sends_client_late, ['count<=400']); // 2% of 20,000
  assert.equal(o.thresholds.dropped_iterations, undefined);
  const firsts = [1, 2, 3].map((id) => vuFirstConnection(cfg, id));
  assert.deepEqual(firsts, [0, 20, 40]);
  assert.equal(firsts[2] + vuConnections(cfg, 3), 60);
});

test('validity: the load generator\'s saturation is a threshold by default, REQUIRE_VALID=0 drops it', () => {
  const prom = { PROMETHEUS_URL: 'http://198.18.0.1:9090' };
  assert.deepEqual(buildOptions(config(prom, 'rps')).thresholds.bench_loadgen_cpu_utilization, ['value<0.9']);
  assert.equal(buildOptions(config({}, 'rps')).thresholds.bench_loadgen_cpu_utilization, undefined); // cannot be judged
  assert.equal(buildOptions(config({ REQUIRE_VALID: '0' }, 'rps')).thresholds.bench_loadgen_cpu_utilization, undefined);
  assert.deepEqual(buildOptions(config({ REQUIRE_VALID: '0', LOADGEN_CPU_MAX: '0.5' }, 'rps')).thresholds.bench_loadgen_cpu_utilization, ['value<0.5']);
});
