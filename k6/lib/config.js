// Every setting a scenario reads, with its default and its validation, in one place.
// Pure functions only (no k6 imports): node's test runner loads this file too.

// The lab's load balancer. Must match LB_IP in ci/lab.sh.
export const LAB_LB_ADDRESS = '198.18.0.2';

// Payloads every backend serves as /<name>.bin (must match PAYLOADS in ci/lab.sh).
export const PAYLOADS = { '0kb': 0, '1kb': 1024, '4kb': 4096, '100kb': 102400, '1mb': 1048576 };

// Per-scenario defaults: what each of the seeds' three measurements means.
export const PROFILES = {
  // Seed 002 RPS: 1 KB over keep-alive connections (wrk -c N).
  rps: { payload: '1kb', scheme: 'http', reuse: true, discardBodies: false, p95: 250, p99: 500 },
  // Seed 002 TPS: a new TLS connection per request, Connection: close, 0 KB response.
  tps: { payload: '0kb', scheme: 'https', reuse: false, discardBodies: false, p95: 250, p99: 500 },
  // Seed 002 throughput: 1 MB responses; bodies discarded so 1000 VUs do not hold 1000 MB.
  throughput: { payload: '1mb', scheme: 'http', reuse: true, discardBodies: true, p95: 2000, p99: 4000 },
};

// The seed's TLS client settings (seed 002: RSA-2048, PFS, ECDHE-RSA-AES256-GCM-SHA384).
export const TLS_CIPHER = 'TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384';

const DURATION_RE = /^(\d+(ms|s|m|h))+$/;
const UNIT_MS = { ms: 1, s: 1000, m: 60000, h: 3600000 };

export function durationMs(text) {
  if (!DURATION_RE.test(text)) return NaN;
  let total = 0;
  for (const [, n, unit] of text.matchAll(/(\d+)(ms|s|m|h)/g)) total += Number(n) * UNIT_MS[unit];
  return total;
}

function fail(message) {
  throw new Error(message);
}

function wholeNumber(env, name, fallback, min) {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(String(raw).trim())) fail(`${name} must be a whole number, got '${raw}'`);
  const n = Number(raw);
  if (n < min) fail(`${name} must be at least ${min}, got ${n}`);
  return n;
}

function positiveNumber(env, name, fallback) {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!/^\d*\.?\d+(e-?\d+)?$/i.test(String(raw).trim()) || !Number.isFinite(n)) fail(`${name} must be a number, got '${raw}'`);
  if (n < 0) fail(`${name} must not be negative, got ${raw}`);
  return n;
}

function flag(env, name) {
  const raw = env[name];
  if (raw === undefined || raw === '' || raw === '0' || raw === 'false') return false;
  if (raw === '1' || raw === 'true') return true;
  return fail(`${name} must be 1/true or 0/false, got '${raw}'`);
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

export function parseTarget(text) {
  const m = /^(https?):\/\/(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+)(?::(\d{1,5}))?\/?$/.exec(text);
  if (!m) fail(`TARGET must be a base URL like http://198.18.0.2 or https://host:8443, got '${text}'`);
  const port = m[3] ? Number(m[3]) : undefined;
  if (port !== undefined && (port < 1 || port > 65535)) fail(`TARGET port must be 1-65535, got ${port}`);
  return { scheme: m[1], host: m[2], port, base: text.replace(/\/$/, '') };
}

// Turns the environment into a validated config; throws one readable Error on bad input.
export const ENGINES = ['js', 'native'];

// The native engine's closed model drives up to this many connections from one VU (a
// goroutine each): k6 gives every VU its own JS runtime (~0.7 MB), so 1000 connections as
// 1000 VUs hold ~700 MB before the first request.
export const NATIVE_CONNECTIONS_PER_VU = 25;

// VUs of a closed-model run: one per connection, or the native engine's groups of them.
export function closedModelVus(cfg) {
  return cfg.engine === 'native' ? Math.ceil(cfg.connections / NATIVE_CONNECTIONS_PER_VU) : cfg.connections;
}

// The connections VU `id` (exec.vu.idInTest, 1-based, unique across execution segments)
// drives: the connections split as evenly as the VU count allows, summing to exactly cfg.connections.
export function vuConnections(cfg, id) {
  const vus = closedModelVus(cfg);
  return Math.floor(cfg.connections / vus) + (((id - 1) % vus) < cfg.connections % vus ? 1 : 0);
}

export function parseConfig(env, scenario) {
  const profile = PROFILES[scenario];
  if (!profile) fail(`unknown scenario '${scenario}' (known: ${Object.keys(PROFILES).join(', ')})`);

  const payload = env.PAYLOAD || profile.payload;
  if (!(payload in PAYLOADS)) fail(`unknown PAYLOAD '${payload}' (known: ${Object.keys(PAYLOADS).join(', ')})`);

  const scheme = env.SCHEME || profile.scheme;
  if (scheme !== 'http' && scheme !== 'https') fail(`SCHEME must be http or https, got '${scheme}'`);
  if (scenario === 'tps' && scheme !== 'https') fail('the tps scenario measures TLS handshakes: SCHEME must be https');

  const target = parseTarget(env.TARGET || `${scheme}://${LAB_LB_ADDRESS}`);
  if (scenario === 'tps' && target.scheme !== 'https') fail('the tps scenario measures TLS handshakes: TARGET must be https://');
  const allowExternal = flag(env, 'ALLOW_EXTERNAL_TARGET');
  if (!allowExternal && !isLabHost(target.host)) {
    fail(`TARGET ${target.base} is outside the lab (198.18.0.0/15, loopback): set ALLOW_EXTERNAL_TARGET=1 if you own it`);
  }

  const duration = env.DURATION || '10s';
  const ms = durationMs(duration);
  if (Number.isNaN(ms)) fail(`DURATION must look like 30s, 3m or 1m30s, got '${duration}'`);
  if (ms <= 0) fail(`DURATION must be longer than zero, got '${duration}'`);

  // Like wrk -c: one keep-alive connection per VU. Default scales with the client's cores
  // (the seed used 1000 connections from 44 cores).
  const clientCpus = wholeNumber(env, 'CLIENT_CPUS', 2, 1);
  const connections = wholeNumber(env, 'CONNECTIONS', Math.min(1000, 50 * clientCpus), 1);
  const rate = wholeNumber(env, 'RATE', 0, 1); // 0: closed model
  const reuse = profile.reuse && !flag(env, 'NO_REUSE');
  // The request loop: k6/http in JS (the reference) or the project's Go extension
  // (k6/x/ingressbench, xk6/), which costs the client a fraction of the CPU per request.
  const engine = env.ENGINE || 'js';
  if (!ENGINES.includes(engine)) fail(`unknown ENGINE '${engine}' (known: ${ENGINES.join(', ')})`);
  if (engine === 'native' && env.K6_HTTP_DEBUG) {
    fail('ENGINE=native does not support K6_HTTP_DEBUG (request dumps are k6/http\'s): use ENGINE=js to debug requests');
  }

  const testid = env.TESTID || `${new Date().toISOString().replace(/[-:]|\.\d+/g, '')}-${scenario}`;
  if (!/^[A-Za-z0-9._-]+$/.test(testid)) fail(`TESTID may hold letters, digits, '.', '_' and '-' only, got '${testid}'`);
  const variant = env.VARIANT || 'default';
  const platform = env.PLATFORM || 'lab';

  // Where the run's correlation comes from (ci/bench.sh passes the platform's Prometheus).
  const prometheusUrl = (env.PROMETHEUS_URL || '').replace(/\/$/, '');
  if (prometheusUrl) {
    const p = /^https?:\/\/(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$/.exec(prometheusUrl);
    if (!p) fail(`PROMETHEUS_URL must be a base URL like http://198.18.0.1:9090, got '${env.PROMETHEUS_URL}'`);
    if (!allowExternal && !isLabHost(p[1])) fail(`PROMETHEUS_URL ${prometheusUrl} is outside the lab (198.18.0.0/15, loopback): set ALLOW_EXTERNAL_TARGET=1 if you own it`);
  }

  let meta = {};
  if (env.BENCH_META) {
    try { meta = JSON.parse(env.BENCH_META); } catch (e) { fail(`BENCH_META is not JSON: ${e.message}`); }
  }

  return {
    scenario, payload, bodyBytes: PAYLOADS[payload], url: `${target.base}/${payload}.bin`,
    target: target.base, scheme: target.scheme, host: env.HOST || 'bench.ingress.test',
    duration, durationMs: ms, connections, rate, reuse, engine, discardBodies: profile.discardBodies,
    thresholds: {
      errorRate: positiveNumber(env, 'ERROR_RATE_MAX', 0.0001), // seed 003: errors under 1 in 10,000
      p95: positiveNumber(env, 'P95_MS', profile.p95),
      p99: positiveNumber(env, 'P99_MS', profile.p99),
      rpsMin: positiveNumber(env, 'RPS_MIN', 0),
      droppedMax: wholeNumber(env, 'DROPPED_MAX', 0, 0),
      // Server-side thresholds on the correlation (k6/lib/correlation.js); 0: none.
      loadgenCpuMax: positiveNumber(env, 'LOADGEN_CPU_MAX', 0),
      rpsPerCoreMin: positiveNumber(env, 'RPS_PER_CORE_MIN', 0),
    },
    prometheusUrl,
    tags: { testid, variant, platform, scenario },
    resultsDir: env.RESULTS_DIR || `results/${testid}`,
    meta,
  };
}
