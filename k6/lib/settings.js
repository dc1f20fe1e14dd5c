// The settings registry's JavaScript reader (k6 and node): bench/settings/settings.yaml is the
// registry, as data; bench/settings/generate.py writes it into ./registry.js (k6 cannot read
// YAML), which this file turns into what the config, the unit tests and the tools use:
// SETTINGS (patterns as RegExp, named value lists resolved), ENVIRONMENT, PAYLOADS and the
// scenario names, with the one check of a value by its type (check) and durationMs.
// Pure data and pure functions (no k6 imports): node loads this file too.
import { REGISTRY } from './registry.js';

export const PAYLOADS = REGISTRY.payloads;
// The scenarios: each k6/<name>.js, which holds its own profile (a test holds the list to the files).
export const SCENARIO_NAMES = REGISTRY.scenarios;
const LISTS = { scenarios: SCENARIO_NAMES, payloads: Object.keys(PAYLOADS) };

export const SETTINGS = REGISTRY.settings.map((s) => ({
  ...s,
  ...(typeof s.values === 'string' ? { values: LISTS[s.values] } : {}),
  ...(s.pattern ? { pattern: new RegExp(s.pattern) } : {}),
}));
// Every other environment variable the runtime reads (settings.yaml says who sets each).
export const ENVIRONMENT = REGISTRY.environment;

export const BY_NAME = Object.fromEntries(SETTINGS.map((s) => [s.name, s]));

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

// isCpuQuantity(text): a Kubernetes CPU quantity above 0 (2, 500m, 0.5); bash's is_cpu_quantity
// (bench/lib/placement.sh) is the same rule, and ci/tests/test_settings.py holds them to one table.
export function isCpuQuantity(text) {
  return /^([0-9]+m|[0-9]+|[0-9]*\.[0-9]+)$/.test(text) && !/^[0.]*m?$/.test(text);
}

// check(setting, raw) -> the typed value of a given (non-empty) raw string, or one readable
// Error: the same rule for every setting of a type.
function check(s, raw) {
  const text = String(raw).trim();
  // A value is quoted in the message with its control characters escaped: the error stays one
  // line even for a value that tries to be two (a HOST with CR/LF, a header injection).
  raw = String(raw).replace(/[\x00-\x1f\x7f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
  switch (s.type) {
    case 'int': {
      if (!/^\d+$/.test(text)) fail(`${s.name} must be a whole number, got '${raw}'`);
      const n = Number(text);
      if (s.min !== undefined && n < s.min) fail(`${s.name} must be at least ${s.min}, got ${n}`);
      if (s.max !== undefined && n > s.max) fail(`${s.name} must be at most ${s.max}, got ${n}`);
      return n;
    }
    case 'number': {
      const n = Number(text);
      if (!/^\d*\.?\d+(e-?\d+)?$/i.test(text) || !Number.isFinite(n)) fail(`${s.name} must be a number, got '${raw}'`);
      return n;
    }
    case 'flag':
      if (text === '0' || text === 'false') return false;
      if (text === '1' || text === 'true') return true;
      return fail(`${s.name} must be 1/true or 0/false, got '${raw}'`);
    case 'enum':
      if (!s.values.includes(text)) fail(`unknown ${s.name} '${raw}' (known: ${s.values.join(', ')})`);
      return text;
    case 'list': {
      const words = text.split(/ +/);
      const bad = words.find((w) => !s.values.includes(w));
      if (bad !== undefined) fail(`unknown ${s.name} '${bad}' (known: ${s.values.join(', ')})`);
      return text;
    }
    case 'duration': {
      const ms = durationMs(text);
      if (Number.isNaN(ms)) fail(`${s.name} must look like 30s, 3m or 1m30s, got '${raw}'`);
      return text;
    }
    case 'cpu':
      if (!(s.keywords || []).includes(text) && !isCpuQuantity(text)) fail(`${s.name} must be ${s.rule}, got '${raw}'`);
      return text;
    case 'cpus':
      if (!text.split(/[ ,]+/).every(isCpuQuantity)) fail(`${s.name} must be ${s.rule}, got '${raw}'`);
      return text;
    case 'text':
      if (!s.pattern.test(text)) fail(`${s.name} must be ${s.rule}, got '${raw}'`);
      return text;
    default:
      return fail(`setting ${s.name} has an unknown type '${s.type}' in bench/settings/settings.yaml`);
  }
}

// setting(env, name, fallback) -> the validated value of NAME in env, or `fallback` (else the
// registry's default, typed) when it is unset or empty.
export function setting(env, name, fallback) {
  const s = BY_NAME[name] || fail(`${name} is not in the settings registry (bench/settings/settings.yaml)`);
  const raw = env[name];
  if (raw === undefined || raw === '') {
    if (fallback !== undefined) return fallback;
    return s.default === null ? undefined : check(s, s.default);
  }
  return check(s, raw);
}

// The values of the given settings a run received, for its summary: what k6 actually saw.
// Those reaching k6 or its in-cluster pods (SEGMENTS: the pods' alone).
export function received(env, reaches = ['k6', 'pods']) {
  return Object.fromEntries(SETTINGS.filter((s) => reaches.some((r) => s.reaches.includes(r)) && env[s.name] !== undefined && env[s.name] !== '')
    .map((s) => [s.name, String(env[s.name])]));
}
