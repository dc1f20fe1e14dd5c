// Every setting a scenario reads: its type, default and rule come from the registry
// (settings.js); the rules between settings (tps needs TLS, a target outside the lab needs
// the opt-in) are here. Pure functions only (no k6 imports): node's test runner loads this file too.
import { PAYLOADS, SCENARIO_NAMES, durationMs, received, setting } from './settings.js';
import { PROJECT_TIMING, existingTiming } from './correlation.js';

// The lab's load balancer: a bare k6 run's default target (the ci/ entry points pass their
// own). LAB_LB_IP in bench/platforms/lab.env, checked by ci/tests/test_settings.py.
export const LAB_LB_ADDRESS = '198.18.0.2';

// Payloads every backend serves as /<name>.bin (must match PAYLOADS in bench/platforms/lab.sh).
export { PAYLOADS, durationMs };


// The seed's TLS 1.2 cipher (seed 002: RSA-2048, PFS, ECDHE-RSA-AES256-GCM-SHA384), and its
// twin for a server with an ECDSA key: the server's key decides which one it takes.
export const TLS_CIPHERS = ['TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384', 'TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384'];

function fail(message) {
  throw new Error(message);
}

// True for addresses the project may load: loopback and the RFC 2544 range it assigns.
export function isLabHost(host) {
  if (host === 'localhost' || host === '[::1]' || host === '::1') return true;
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(host);
  if (!m) return false;
  const o = m.slice(1).map(Number);
  if (o.some((x) => x > 255)) return false;
  return o[0] === 127 || (o[0] === 198 && (o[1] === 18 || o[1] === 19));
}

// True for a Kubernetes Service's DNS name (name.namespace.svc, or with the cluster's domain)
// seen from a pod (the kubelet sets KUBERNETES_SERVICE_HOST in every container): an address
// inside the cluster the run deployed into, resolved there. The guard above is the host's.
export function isClusterService(host, env) {
  return Boolean(env.KUBERNETES_SERVICE_HOST)
    && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?\.[a-z0-9]([-a-z0-9]*[a-z0-9])?\.svc(\.[a-z0-9.-]+)?$/.test(host);
}

export function parseTarget(text) {
  const m = /^(https?):\/\/(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+)(?::(\d{1,5}))?\/?$/.exec(text);
  if (!m) fail(`TARGET must be a base URL like http://198.18.0.2 or https://host:8443, got '${text}'`);
  const port = m[3] ? Number(m[3]) : undefined;
  if (port !== undefined && (port < 1 || port > 65535)) fail(`TARGET port must be 1-65535, got ${port}`);
  return { scheme: m[1], host: m[2], port, base: text.replace(/\/$/, '') };
}

// The native engine drives many connections from one VU: k6 gives every VU its own JS runtime
// (~0.7 MB), so 1000 connections as 1000 VUs would hold ~700 MB before the first request. A
// VU's keep-alive connections are one event loop (xk6/eloop.go), of at most
// LOOP_MAX_CONNECTIONS: fewer, larger loops find more sockets ready per wait and park less
// often, as wrk's one thread does; and at least one loop per client CPU while each keeps
// LOOP_MIN_CONNECTIONS, so that every CPU of the client has a loop to run.
export const LOOP_MAX_CONNECTIONS = 250;
export const LOOP_MIN_CONNECTIONS = 25;

// VUs of a closed-model run: one per connection, or the native engine's loops.
export function closedModelVus(cfg) {
  if (cfg.engine !== 'native') return cfg.connections;
  const loops = Math.max(Math.ceil(cfg.connections / LOOP_MAX_CONNECTIONS),
    Math.min(Math.ceil(cfg.connections / LOOP_MIN_CONNECTIONS), cfg.clientCpus || 1));
  // At least a VU per execution segment: k6 splits VUs, not connections, between the pods,
  // and a pod given none ends at once (10 connections in two pods once loaded from one).
  return Math.max(loops, cfg.segments || 1);
}

// The connections VU `id` (exec.vu.idInTest, 1-based, unique across execution segments)
// drives: the connections split as evenly as the VU count allows, summing to exactly cfg.connections.
export function vuConnections(cfg, id) {
  const vus = closedModelVus(cfg);
  return Math.floor(cfg.connections / vus) + (((id - 1) % vus) < cfg.connections % vus ? 1 : 0);
}

// The 0-based index, across the whole test, of VU `id`'s first connection: the open model's
// schedule gives every connection its own slots (xk6/pacing.go).
export function vuFirstConnection(cfg, id) {
  let first = 0;
  for (let i = 1; i < id; i++) first += vuConnections(cfg, i);
  return first;
}

// Where the run's correlation comes from (bench/run/bench.sh passes the platform's Prometheus):
// a base URL inside the lab unless ALLOW_EXTERNAL_TARGET, or '' (no Prometheus).
function prometheusUrlOf(env, inside) {
  const url = (setting(env, 'PROMETHEUS_URL', '')).replace(/\/$/, '');
  if (url) {
    const p = /^https?:\/\/(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$/.exec(url);
    if (!p) fail(`PROMETHEUS_URL must be a base URL like http://198.18.0.1:9090, got '${env.PROMETHEUS_URL}'`);
    if (!inside(p[1])) fail(`PROMETHEUS_URL ${url} is outside the lab (198.18.0.0/15, loopback): set ALLOW_EXTERNAL_TARGET=1 if you own it`);
  }
  return url;
}

// An ingress the suite did not deploy (IB_EXISTING, set by bench/run/bench.sh once it found the
// pods and measured the scrape interval): the values its rules' placeholders take, or null.
const EXISTING_FIELDS = { interval: 'number', ingress: 'string', backend: 'string', loadgen: 'string', link: 'number', nodes: 'string', nic: 'string' };
function existingOf(env) {
  if (!env.IB_EXISTING) return null;
  let e;
  try { e = JSON.parse(env.IB_EXISTING); } catch (err) { fail(`IB_EXISTING is not JSON: ${err.message}`); }
  for (const [k, type] of Object.entries(EXISTING_FIELDS)) {
    // eslint-disable-next-line valid-typeof
    if (!e || typeof e[k] !== type) fail(`IB_EXISTING.${k} must be a ${type}, got ${JSON.stringify(e && e[k])}`);
  }
  if (!(e.interval >= 1)) fail(`IB_EXISTING.interval must be at least 1 (seconds), got ${e.interval}`);
  // rules: the PrometheusRule installed for the run (EXISTING_RULES=install), whose series carry
  // bench_rules=<it>; absent: the rules are evaluated as one query.
  if (e.rules !== undefined && !/^[a-z0-9][-a-z0-9]*$/.test(e.rules)) fail(`IB_EXISTING.rules must be a PrometheusRule's name, got ${JSON.stringify(e.rules)}`);
  return e;
}

// The pass/fail thresholds: the client's, and the server-side ones on the correlation
// (k6/lib/correlation.js; 0: none).
function thresholdsOf(env, profile) {
  return {
    errorRate: setting(env, 'ERROR_RATE_MAX'), // seed 003: errors under 1 in 10,000
    p95: setting(env, 'P95_MS', profile.p95),
    p99: setting(env, 'P99_MS', profile.p99),
    rpsMin: setting(env, 'RPS_MIN', 0),
    droppedMax: setting(env, 'DROPPED_MAX'),
    lateMax: setting(env, 'LATE_MAX'),
    loadgenCpuMax: setting(env, 'LOADGEN_CPU_MAX', 0),
    requireValid: setting(env, 'REQUIRE_VALID'),
    rpsPerCoreMin: setting(env, 'RPS_PER_CORE_MIN', 0),
  };
}

// Turns the environment into a validated config for SCENARIO, whose file's PROFILE gives the
// defaults (k6/<scenario>.js); throws one readable Error on bad input.
export function parseConfig(env, scenario, profile) {
  if (!SCENARIO_NAMES.includes(scenario)) fail(`unknown scenario '${scenario}' (known: ${SCENARIO_NAMES.join(', ')})`);
  if (!profile || !profile.payload || !profile.headline) fail(`scenario '${scenario}' has no profile (k6/${scenario}.js exports it)`);

  const payload = setting(env, 'PAYLOAD', profile.payload);
  const scheme = setting(env, 'SCHEME', profile.scheme);
  // profile.tls: the scenario measures TLS handshakes, so https only.
  if (profile.tls && scheme !== 'https') fail(`the ${scenario} scenario measures TLS handshakes: SCHEME must be https`);

  const target = parseTarget(env.TARGET || `${scheme}://${LAB_LB_ADDRESS}`);
  if (profile.tls && target.scheme !== 'https') fail(`the ${scenario} scenario measures TLS handshakes: TARGET must be https://`);
  const allowExternal = setting(env, 'ALLOW_EXTERNAL_TARGET');
  const inside = (host) => allowExternal || isLabHost(host) || isClusterService(host, env);
  if (!inside(target.host)) {
    fail(`TARGET ${target.base} is outside the lab (198.18.0.0/15, loopback): set ALLOW_EXTERNAL_TARGET=1 if you own it`);
  }

  const duration = setting(env, 'DURATION');
  const ms = durationMs(duration);
  if (ms <= 0) fail(`DURATION must be longer than zero, got '${duration}'`);

  // Like wrk -c: one keep-alive connection per VU. Default scales with the client's cores
  // (the seed used 1000 connections from 44 cores). CLIENT_CPUS: set by bench/run/bench.sh.
  const clientCpus = /^[1-9]\d*$/.test(env.CLIENT_CPUS || '') ? Number(env.CLIENT_CPUS) : 2;
  const connections = setting(env, 'CONNECTIONS', Math.min(1000, 50 * clientCpus));
  // In-cluster runs: the k6 pods sharing the load (bench/run/distributed.sh), each a segment.
  const segments = setting(env, 'SEGMENTS', 1);
  if (connections < segments) fail(`CONNECTIONS ${connections} is fewer than SEGMENTS ${segments}: each k6 pod needs a connection of its own`);
  const rate = setting(env, 'RATE', 0); // 0: closed model
  const timeoutText = setting(env, 'REQUEST_TIMEOUT');
  const timeoutMs = durationMs(timeoutText);
  if (timeoutMs <= 0) fail(`REQUEST_TIMEOUT must be longer than zero, got '${timeoutText}'`);
  const reuse = profile.reuse && !setting(env, 'NO_REUSE');
  // The request loop: k6/http in JS (the reference) or the project's Go extension
  // (k6/x/ingressbench, xk6/), which costs the client a fraction of the CPU per request.
  const engine = setting(env, 'ENGINE');
  if (engine === 'native' && env.K6_HTTP_DEBUG) {
    fail('ENGINE=native does not support K6_HTTP_DEBUG (request dumps are k6/http\'s): use ENGINE=js to debug requests');
  }
  const requestSamples = setting(env, 'REQUEST_SAMPLES'); // k6/http's samples are per request anyway
  // TLS: the version (both engines, k6's tlsVersion); the group offered and resumption are
  // the native engine's (k6/http offers Go's default groups and never resumes).
  const tls = { version: setting(env, 'TLS_VERSION'), group: setting(env, 'TLS_GROUP'), resumption: setting(env, 'TLS_RESUMPTION') };
  if (engine === 'js') {
    for (const name of ['TLS_GROUP', 'TLS_RESUMPTION']) {
      if (env[name]) fail(`${name} is the native engine's: k6/http offers Go's default groups and never resumes a session (ENGINE=js): leave it out or use ENGINE=native`);
    }
  }

  // HTTP/2: the native engine's event loop runs it, on keep-alive connections, closed model.
  const http2 = setting(env, 'HTTP_VERSION') === '2';
  const streams = setting(env, 'STREAMS');
  if (http2 && engine === 'js') fail('HTTP_VERSION=2 is the native engine\'s: k6/http chooses the protocol itself (ENGINE=js): leave it out or use ENGINE=native');
  if (http2 && !reuse) fail('HTTP_VERSION=2 runs on keep-alive connections: tps and NO_REUSE=1 open a connection per request over HTTP/1.1');
  if (http2 && rate) fail('HTTP_VERSION=2 runs the closed model: leave RATE out');
  if (!http2 && env.STREAMS) fail('STREAMS is HTTP/2\'s (streams in flight per connection): set HTTP_VERSION=2 or leave it out');

  const testid = setting(env, 'TESTID', `${new Date().toISOString().replace(/[-:]|\.\d+/g, '')}-${scenario}`);
  const variant = setting(env, 'VARIANT', 'default');
  // The tag of a run started by k6 alone (no ci/ entry point resolved a platform): it loads a
  // URL, which is the lab platform's way.
  const platform = setting(env, 'PLATFORM', 'lab');

  const prometheusUrl = prometheusUrlOf(env, inside);
  const existing = existingOf(env);
  let meta = {};
  if (env.BENCH_META) {
    try { meta = JSON.parse(env.BENCH_META); } catch (e) { fail(`BENCH_META is not JSON: ${e.message}`); }
  }

  // A run's confirmation pass (bench/run/bench.sh, before its load): the same requests under
  // the path whose every connection the LB records (components/nginx-lb's TLS record).
  const recordPath = env.IB_RECORD_PATH || '';
  if (!/^(\/bench-tls-record\/[A-Za-z0-9._-]+)?$/.test(recordPath)) fail(`IB_RECORD_PATH must be /bench-tls-record/RUN, got '${recordPath}'`);

  return {
    scenario, payload, bodyBytes: PAYLOADS[payload], url: `${target.base}${recordPath}/${payload}.bin`,
    // setup's readiness request (k6/http's own groups and ALPN): in a confirmation pass, under
    // a path of its own beside the pass's (the record keeps it apart; the access log never sees
    // the pass).
    readyUrl: `${target.base}${recordPath && `${recordPath}.ready`}/${payload}.bin`,
    target: target.base, scheme: target.scheme, host: setting(env, 'HOST'),
    duration, durationMs: ms, timeout: timeoutText, timeoutMs, connections, clientCpus, segments, rate, reuse, engine, requestSamples, tls, http2, streams, discardBodies: profile.discardBodies,
    thresholds: thresholdsOf(env, profile),
    prometheusUrl,
    existing,
    // The rules' window and interval the correlation reads (k6/lib/correlation.js).
    timing: existing ? existingTiming(existing.interval) : PROJECT_TIMING,
    tags: { testid, variant, platform, scenario },
    resultsDir: env.RESULTS_DIR || `results/${testid}`,
    meta,
    // What this k6 received of the registry's settings, as given: the summary records it.
    settings: received(env),
  };
}
