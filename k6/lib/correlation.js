// End-of-run correlation: what the ingress, NIC, backends and load generator did during the
// run, read from Prometheus' bench:* rules (monitoring/README.md), and the verdict on what
// limited it. Pure: the request is made by the scenario's teardown; unit-tested under node.

// The signal contract (monitoring/signals.yaml): the summary keys and their rules, the rules'
// window, the verdict's saturation levels and order. signals.js is generated from it by
// monitoring/generate.py; SIGNALS, SATURATION and RULE_WINDOW_S are re-exported for the lib.
import { LIMITS, RULE_WINDOW_S, SATURATION, SIGNALS } from './signals.js';

export { RULE_WINDOW_S, SATURATION, SIGNALS };

// The averaging window for a run from start to end (unix seconds): the run minus the rules'
// warm-up (a rule's value at t covers the RULE_WINDOW_S before t, so the first seconds of a run
// still average in the idle time before it), or the whole run when it is too short to drop that much.
export function windowSeconds(start, end) {
  const run = Math.max(1, Math.floor(end - start));
  return run >= RULE_WINDOW_S + 2 ? run - RULE_WINDOW_S : run;
}

// One instant query for every signal: each rule averaged over the window ending at `end`,
// per-pod series summed (cores, limits). Names are kept in a label: functions drop them.
export function correlationQuery(seconds) {
  const names = Object.values(SIGNALS).join('|');
  return `sum by (signal) (avg_over_time(label_replace({__name__=~"${names}"}, "signal", "$1", "__name__", "(.+)")[${seconds}s:1s]))`;
}

// Prometheus' JSON answer -> { key: value }; NaN/Inf (a ratio over an idle zero) are dropped.
export function parseSignals(body) {
  const byRule = Object.fromEntries(Object.entries(SIGNALS).map(([k, r]) => [r, k]));
  const out = {};
  for (const s of (body && body.data && body.data.result) || []) {
    const key = byRule[s.metric.signal];
    const v = Number(s.value[1]);
    if (key && Number.isFinite(v)) out[key] = v;
  }
  return out;
}

const pct = (v) => `${(v * 100).toFixed(0)}%`;

// A utilization is the larger of the ingress' own share of its CPUs and how busy those CPUs
// are (its rule in monitoring/signals.yaml): when the second decided, other work on them (the
// lab's backends share the LB's CPUs) took the rest, and the summary says so.
function sharedCpus(s) {
  const own = s.ingress_cpu_cores / s.ingress_cpu_limit_cores;
  return Number.isFinite(own) && s.ingress_cpu_utilization - own > 0.05
    ? `its CPUs ${pct(s.ingress_cpu_utilization)} busy, ${s.ingress_cpu_cores.toFixed(2)} of ${s.ingress_cpu_limit_cores.toFixed(2)} cores its own: other work on them took the rest`
    : null;
}

export function verdict(signals) {
  for (const { key, limit, why, valid } of LIMITS) {
    const v = signals[key];
    if (v !== undefined && v >= SATURATION[key]) {
      const shared = limit === 'ingress-cpu' && sharedCpus(signals);
      return { limit, valid, rule: `${SIGNALS[key]} ${v.toFixed(2)} >= ${SATURATION[key]}`, text: `${limit}-bound: ${why} (${shared || pct(v)})` };
    }
  }
  const absent = LIMITS.map(({ key }) => key).filter((k) => signals[k] === undefined);
  if (absent.length) {
    return { limit: 'unknown', valid: true, rule: `no data for ${absent.map((k) => SIGNALS[k]).join(', ')}`, text: `unknown: nothing measured saturated, but ${absent.join(', ')} could not be measured` };
  }
  return {
    limit: 'none', valid: true,
    rule: `every signal below saturation: ${LIMITS.map(({ key: k }) => `${SIGNALS[k]} ${signals[k].toFixed(2)} < ${SATURATION[k]}`).join(', ')}`,
    text: 'nothing saturated: the ingress, NIC, backends and load generator all had headroom (a higher load would measure more)',
  };
}

// Why a signal is missing, for the summary: no monitoring, Prometheus silent, or no data.
export function missingReasons(signals, cfg, answered) {
  const why = !cfg.prometheusUrl
    ? 'monitoring is off (MONITORING=0, or no Prometheus was given)'
    : !answered
      ? `Prometheus at ${cfg.prometheusUrl} did not answer the correlation query (see k6.log)`
      : null;
  const out = {};
  for (const key of Object.keys(SIGNALS)) {
    if (signals[key] === undefined) out[key] = why || 'no data in the run window (bench:* rules not loaded, or their inputs not scraped)';
  }
  return out;
}

// The summary's correlation lines.
export function correlationText(c, v, col) {
  const s = c.signals;
  const f = (key, fmt) => (s[key] === undefined ? 'n/a' : fmt(s[key]));
  const lines = [];
  if (Object.keys(s).length) {
    const shared = sharedCpus(s);
    lines.push(`${'ingress'.padEnd(col)}${f('ingress_cpu_cores', (x) => x.toFixed(2))} of ${f('ingress_cpu_limit_cores', (x) => x.toFixed(2))} cores (${f('ingress_cpu_utilization', pct)}${shared ? `: its CPUs' load, shared` : ''}), ` +
      `${f('rps_per_ingress_core', (x) => Math.round(x))} req/s per core, server ${f('server_rps', (x) => Math.round(x))} req/s`);
    lines.push(`${'network'.padEnd(col)}NIC ${f('nic_utilization', pct)} of ${f('link_capacity_bits', (x) => `${x / 1e9} Gbit/s`)} ` +
      `(tx ${f('nic_transmit_bits', (x) => (x / 1e9).toFixed(2))}, rx ${f('nic_receive_bits', (x) => (x / 1e9).toFixed(2))} Gbit/s), drops ${f('nic_drops', (x) => x.toFixed(1))}/s`);
    lines.push(`${'cpu'.padEnd(col)}backends ${f('backend_cpu_cores', (x) => x.toFixed(2))} cores (${f('backend_cpu_utilization', pct)}), load generator ${f('loadgen_cpu_cores', (x) => x.toFixed(2))} cores (${f('loadgen_cpu_utilization', pct)})`);
  }
  // One line per reason, naming the signals it cost.
  const byReason = {};
  for (const [key, reason] of Object.entries(c.missing)) (byReason[reason] = byReason[reason] || []).push(key);
  for (const [reason, keys] of Object.entries(byReason)) {
    lines.push(`${'missing'.padEnd(col)}${keys.length === Object.keys(SIGNALS).length ? 'every signal' : keys.join(', ')}: ${reason}`);
  }
  lines.push(`${'verdict'.padEnd(col)}${v.text}${v.valid ? '' : ' — NOT VALID for the ingress'} [${v.rule}]`);
  return lines;
}
