import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseConfig, durationMs, isClusterService, isLabHost, parseTarget } from './config.js';
import { PROFILES } from './profiles.mjs';
import { SCENARIO_NAMES } from './settings.js';

// parseConfig as a scenario file calls it: with its profile.
const config = (env, scenario) => parseConfig(env, scenario, PROFILES[scenario]);

const bad = (env, scenario, re) => assert.throws(() => config(env, scenario), re);

test('defaults per scenario follow the seed measurements', () => {
  const rps = config({}, 'rps');
  assert.equal(rps.url, 'http://198.18.0.2/1kb.bin');
  assert.equal(rps.bodyBytes, 1024);
  assert.equal(rps.reuse, true);
  assert.equal(rps.connections, 100); // 50 per client core, 2 cores assumed
  const tps = config({}, 'tps');
  assert.equal(tps.url, 'https://198.18.0.2/0kb.bin');
  assert.equal(tps.reuse, false);
  const tp = config({}, 'throughput');
  assert.equal(tp.bodyBytes, 1048576);
  assert.equal(tp.discardBodies, true);
});

test('connections scale with client cores and cap at the seed 1000', () => {
  assert.equal(config({ CLIENT_CPUS: '8' }, 'rps').connections, 400);
  assert.equal(config({ CLIENT_CPUS: '88' }, 'rps').connections, 1000);
  assert.equal(config({ CONNECTIONS: '7' }, 'rps').connections, 7);
});

test('numbers are validated with the variable name in the message', () => {
  bad({ CONNECTIONS: 'abc' }, 'rps', /CONNECTIONS must be a whole number, got 'abc'/);
  bad({ CONNECTIONS: '-5' }, 'rps', /CONNECTIONS must be a whole number/);
  bad({ CONNECTIONS: '0' }, 'rps', /CONNECTIONS must be at least 1/);
  bad({ RATE: '1.5' }, 'rps', /RATE must be a whole number/);
  bad({ P95_MS: 'fast' }, 'rps', /P95_MS must be a number/);
  bad({ P95_MS: '-1' }, 'rps', /P95_MS must be a number/);
  bad({ ERROR_RATE_MAX: '1e' }, 'rps', /ERROR_RATE_MAX must be a number/);
  assert.equal(config({ ERROR_RATE_MAX: '1e-3' }, 'rps').thresholds.errorRate, 0.001);
});

test('durations: k6 syntax, never zero', () => {
  assert.equal(durationMs('1m30s'), 90000);
  assert.equal(durationMs('180s'), 180000);
  assert.ok(Number.isNaN(durationMs('10')));
  assert.ok(Number.isNaN(durationMs('-5s')));
  bad({ DURATION: '0s' }, 'rps', /DURATION must be longer than zero/);
  bad({ DURATION: 'ten' }, 'rps', /DURATION must look like/);
  // A request's timeout: k6's syntax, 10 s unless given, never zero.
  assert.equal(config({}, 'rps').timeoutMs, 10000);
  assert.equal(config({ REQUEST_TIMEOUT: '1500ms' }, 'rps').timeout, '1500ms');
  bad({ REQUEST_TIMEOUT: '0s' }, 'rps', /REQUEST_TIMEOUT must be longer than zero/);
  bad({ REQUEST_TIMEOUT: '2' }, 'rps', /REQUEST_TIMEOUT must look like/);
});

test('targets outside the lab need the explicit opt-in', () => {
  assert.ok(isLabHost('198.18.0.2'));
  assert.ok(isLabHost('198.19.255.1'));
  assert.ok(isLabHost('127.0.0.1'));
  assert.ok(isLabHost('localhost'));
  assert.ok(!isLabHost('198.20.0.1'));
  assert.ok(!isLabHost('192.0.2.1'));
  assert.ok(!isLabHost('example.com'));
  assert.ok(!isLabHost('198.18.0.256'));
  bad({ TARGET: 'http://198.51.100.3' }, 'rps', /outside the lab .* ALLOW_EXTERNAL_TARGET=1/);
  const ok = config({ TARGET: 'https://ingress.example.com:8443', ALLOW_EXTERNAL_TARGET: '1' }, 'rps');
  assert.equal(ok.url, 'https://ingress.example.com:8443/1kb.bin');
  assert.equal(ok.scheme, 'https');
});

test('target syntax and scheme rules', () => {
  assert.throws(() => parseTarget('ftp://198.18.0.2'), /TARGET must be a base URL/);
  assert.throws(() => parseTarget('http://198.18.0.2/path'), /TARGET must be a base URL/);
  assert.throws(() => parseTarget('http://198.18.0.2:70000'), /port must be 1-65535/);
  bad({ TARGET: 'http://198.18.0.2' }, 'tps', /TARGET must be https/);
  bad({ SCHEME: 'http' }, 'tps', /SCHEME must be https/);
  bad({ SCHEME: 'quic' }, 'rps', /unknown SCHEME 'quic' \(known: http, https\)/);
  assert.equal(config({ SCHEME: 'https' }, 'rps').url, 'https://198.18.0.2/1kb.bin');
});

test('unknown names are refused and listed', () => {
  bad({}, 'latency', new RegExp(`unknown scenario 'latency' \\(known: ${SCENARIO_NAMES.join(', ')}\\)`));
  bad({ PAYLOAD: '2kb' }, 'rps', /unknown PAYLOAD '2kb'/);
  bad({ NO_REUSE: 'yes' }, 'rps', /NO_REUSE must be 1\/true or 0\/false/);
  bad({ TESTID: 'a/b' }, 'rps', /TESTID must be letters, digits, '.', '_' and '-' only, not starting with '.', got 'a\/b'/);
  bad({ TESTID: '..' }, 'rps', /TESTID .* not starting with '.', got '..'/);
  bad({ HOST: 'a\r\nX-Evil: 1' }, 'rps', /HOST must be a host name, got 'a\\x0d\\x0aX-Evil: 1'/);
  bad({ CONNECTIONS: '200000' }, 'rps', /CONNECTIONS must be at most 20000, got 200000/);
  bad({ BENCH_META: '{' }, 'rps', /BENCH_META is not JSON/);
});

test('an existing ingress: the values its rules take, checked, and its Prometheus\'s timing', () => {
  const e = { interval: 30, ingress: 'namespace="i", pod=~"a|b"', backend: 'namespace="b"', loadgen: 'namespace="l"', link: 1e9, nodes: 'instance=~"(n1)(:[0-9]+)?"', nic: 'device=~"eth0"' };
  const cfg = config({ IB_EXISTING: JSON.stringify(e) }, 'rps');
  assert.deepEqual(cfg.existing, e);
  assert.deepEqual(cfg.timing, { window: 90, interval: 30, lag: 30 });
  assert.deepEqual(config({}, 'rps').timing, { window: 6, interval: 2, lag: 1 });
  assert.equal(config({}, 'rps').existing, null);
  bad({ IB_EXISTING: '{' }, 'rps', /IB_EXISTING is not JSON/);
  bad({ IB_EXISTING: JSON.stringify({ ...e, ingress: undefined }) }, 'rps', /IB_EXISTING\.ingress must be a string, got undefined/);
  bad({ IB_EXISTING: JSON.stringify({ ...e, interval: 0 }) }, 'rps', /IB_EXISTING\.interval must be at least 1/);
  bad({ IB_EXISTING: JSON.stringify({ ...e, rules: 'Run 1' }) }, 'rps', /IB_EXISTING\.rules must be a PrometheusRule's name, got "Run 1"/);
});

test('NO_REUSE turns keep-alive off (ab without -k); tps never reuses', () => {
  assert.equal(config({ NO_REUSE: '1' }, 'rps').reuse, false);
  assert.equal(config({ NO_REUSE: '0' }, 'tps').reuse, false);
});

test('tags carry testid, variant, platform, scenario', () => {
  const c = config({ TESTID: 'run-1', VARIANT: 'keepalive', PLATFORM: 'lab' }, 'rps');
  assert.deepEqual(c.tags, { testid: 'run-1', variant: 'keepalive', platform: 'lab', scenario: 'rps' });
  assert.equal(c.resultsDir, 'results/run-1');
});

test('the engine: native unless ENGINE=js, anything else refused', () => {
  assert.equal(config({}, 'rps').engine, 'native');
  assert.equal(config({ ENGINE: 'js' }, 'tps').engine, 'js');
  bad({ ENGINE: 'turbo' }, 'rps', /unknown ENGINE 'turbo' \(known: js, native\)/);
  bad({ K6_HTTP_DEBUG: 'full' }, 'rps', /ENGINE=native does not support K6_HTTP_DEBUG/);
  assert.equal(config({ ENGINE: 'js', K6_HTTP_DEBUG: 'full' }, 'rps').engine, 'js');
  assert.equal(config({ REQUEST_SAMPLES: '1' }, 'rps').requestSamples, true);
  // TLS: the version on either engine; the group and resumption the native engine's only.
  assert.deepEqual(config({}, 'tps').tls, { version: '1.2', group: 'x25519', resumption: 'none' });
  assert.deepEqual(config({ TLS_VERSION: '1.3', TLS_GROUP: 'p256', TLS_RESUMPTION: 'tickets' }, 'tps').tls, { version: '1.3', group: 'p256', resumption: 'tickets' });
  assert.equal(config({ ENGINE: 'js', TLS_VERSION: '1.3' }, 'tps').tls.version, '1.3');
  bad({ ENGINE: 'js', TLS_GROUP: 'x25519' }, 'tps', /TLS_GROUP is the native engine's: k6\/http offers Go's default groups/);
  bad({ ENGINE: 'js', TLS_RESUMPTION: 'tickets' }, 'tps', /TLS_RESUMPTION is the native engine's/);
  bad({ TLS_VERSION: '1.1' }, 'tps', /TLS_VERSION/);
  bad({ TLS_RESUMPTION: 'ids' }, 'tps', /TLS_RESUMPTION/);
  assert.equal(config({}, 'rps').requestSamples, false);
});

test('HTTP/2: the native engine, keep-alive, closed model; streams only with it', () => {
  assert.deepEqual([config({}, 'rps').http2, config({}, 'rps').streams], [false, 1]);
  assert.deepEqual([config({ HTTP_VERSION: '2', STREAMS: '8' }, 'throughput').http2, config({ HTTP_VERSION: '2', STREAMS: '8' }, 'rps').streams], [true, 8]);
  bad({ HTTP_VERSION: '2', ENGINE: 'js' }, 'rps', /HTTP_VERSION=2 is the native engine's/);
  bad({ HTTP_VERSION: '2' }, 'tps', /HTTP_VERSION=2 runs on keep-alive connections/);
  bad({ HTTP_VERSION: '2', NO_REUSE: '1' }, 'rps', /HTTP_VERSION=2 runs on keep-alive connections/);
  bad({ HTTP_VERSION: '2', RATE: '100' }, 'rps', /HTTP_VERSION=2 runs the closed model/);
  bad({ STREAMS: '4' }, 'rps', /STREAMS is HTTP\/2's/);
  bad({ HTTP_VERSION: '3' }, 'rps', /HTTP_VERSION/);
  bad({ HTTP_VERSION: '2', STREAMS: '0' }, 'rps', /STREAMS/);
});

test('a Service DNS name is inside only from a pod', () => {
  const pod = { KUBERNETES_SERVICE_HOST: '198.18.128.1' };
  assert.ok(isClusterService('prometheus.monitoring.svc', pod));
  assert.ok(isClusterService('nginx-lb.ingress-bench.svc.cluster.local', pod));
  assert.ok(!isClusterService('prometheus.monitoring.svc', {}));
  assert.ok(!isClusterService('example.com', pod));
  assert.ok(!isClusterService('svc', pod));
  const cfg = config({ ...pod, PROMETHEUS_URL: 'http://prometheus.monitoring.svc:9090', TARGET: 'http://nginx-lb.ingress-bench.svc' }, 'rps');
  assert.equal(cfg.prometheusUrl, 'http://prometheus.monitoring.svc:9090');
  assert.throws(() => config({ PROMETHEUS_URL: 'http://prometheus.monitoring.svc:9090' }, 'rps'), /outside the lab/);
});

test('a confirmation pass asks under the recorded path, its readiness request beside it', () => {
  const c = config({ IB_RECORD_PATH: '/bench-tls-record/run-1' }, 'tps');
  assert.deepEqual([c.url, c.readyUrl], ['https://198.18.0.2/bench-tls-record/run-1/0kb.bin', 'https://198.18.0.2/bench-tls-record/run-1.ready/0kb.bin']);
  const plain = config({}, 'tps');
  assert.deepEqual([plain.url, plain.readyUrl], ['https://198.18.0.2/0kb.bin', 'https://198.18.0.2/0kb.bin']);
  bad({ IB_RECORD_PATH: '/elsewhere/x' }, 'tps', /IB_RECORD_PATH must be \/bench-tls-record\/RUN/);
});
