// End-of-run correlation: what the ingress, NIC, backends and load generator did during the
// run, read from Prometheus' bench:* rules (monitoring/README.md), and the verdict on what
// limited it. Pure: the request is made by the scenario's teardown; unit-tested under node.

// The signal contract (monitoring/signals.yaml): the summary keys and their rules, the rules'
// window and interval, the verdict's saturation levels and order. signals.js is generated from
// it by monitoring/generate.py; SIGNALS, SATURATION and RULE_WINDOW_S are re-exported for the lib.
import { EXISTING_QUERIES, LIMITS, RULE_INTERVAL_S, RULE_WINDOW_S, SATURATION, SIGNALS, WINDOW_SCRAPES } from './signals.js';

export { RULE_INTERVAL_S, RULE_WINDOW_S, SATURATION, SIGNALS };

// The run's steady window: the rules' evaluations whose whole window holds load at full rate.
// A rule's value at t covers (t - RULE_WINDOW_S, t]; a sample in it may hold a counter read up
// to COLLECT_LAG_S earlier (the lab's cgroup sampler writes once a second); the load needs
// RAMP_S to reach its rate (connections opened, the ingress's workers awake). So from
// start + RAMP_S + COLLECT_LAG_S + RULE_WINDOW_S to the load's end; the values averaged there
// cover the load from its RAMP_S-th second to its end and nothing after. A run too short to
// hold one evaluation there averages every evaluation after the rules' warm-up (the whole run
// when even that is too long), and says it was not steady.
// TIMING: the rules' window, interval and collection lag in seconds: the project's own
// platforms' (PROJECT_TIMING) or an existing ingress's (existingTiming).
export const RAMP_S = 1;
export const COLLECT_LAG_S = 1;
export const PROJECT_TIMING = { window: RULE_WINDOW_S, interval: RULE_INTERVAL_S, lag: COLLECT_LAG_S };
export function steadyWindow(start, end, timing = PROJECT_TIMING) {
  const from = start + RAMP_S + timing.lag + timing.window;
  if (end - from >= timing.interval) return { from, to: end, steady: true };
  const warm = end - start >= timing.window + timing.interval ? timing.window : 0;
  return { from: start + warm, to: end, steady: false };
}
// The shortest run with a steady window.
export const steadyMinS = (timing = PROJECT_TIMING) => RAMP_S + timing.lag + timing.window + timing.interval;
export const STEADY_MIN_S = steadyMinS();

// An existing ingress in the user's Prometheus: evaluated at its scrape interval, over as many
// scrapes as the contract's window holds, a sample up to one scrape old, and the first of the
// load's up to KUBELET_IDLE_COLLECT_S late: the kubelet's cAdvisor collects a container whose
// stats have not changed ever less often, up to every 15 s (its dynamic housekeeping,
// maxHousekeepingInterval in pkg/kubelet/cadvisor) jittered by up to as much again (an idle
// pod's collections 24 s apart on the local cluster), and stamps each sample with its
// collection (honorTimestamps), so an ingress idle before the load may have no sample of it for
// 30 s. At a 30 s scrape that is the one scrape of lag already allowed; at a 2 s one it is not.
// (bench/lib/existing.sh existing_steady_s says the same; ci/tests/test_signals.py checks.)
export const KUBELET_IDLE_COLLECT_S = 30;
export function existingTiming(interval) {
  return { window: WINDOW_SCRAPES * interval, interval, lag: Math.max(interval, KUBELET_IDLE_COLLECT_S) };
}

// One instant query for every signal's recorded samples over the window, read at its end: the
// samples themselves, stamped with their evaluation times (parseSignals keeps those from
// `from` on), not a subquery's 1 s steps, which repeat an evaluation from before `from`.
// RULES: an existing ingress's rules installed for the run, the value of their bench_rules label.
export function correlationQuery(w, rules) {
  const names = Object.values(SIGNALS).join('|');
  return `{__name__=~"${names}"${rules ? `, bench_rules="${rules}"` : ''}}[${Math.ceil(w.to - w.from) + 1}s]`;
}

// The same answer without the rules loaded (an existing ingress's Prometheus, which the suite
// changes only on the user's opt-in): every signal's rule written out (EXISTING_QUERIES), its
// placeholders filled from VALUES (window, ingress, backend, loadgen, link), evaluated as the
// rules would be, every interval (a subquery, aligned as rule evaluations are), each series named
// by its rule (and a label of its own, which keeps `or` from merging signals that have the same
// other labels), so that parseSignals reads it as it reads recorded samples.
export function existingQuery(w, values, interval) {
  const fill = (e) => e.replace(/\$([a-z]+)/g, (_, name) => {
    if (!(name in values)) throw new Error(`existingQuery: no value for $${name}`);
    return String(values[name]);
  });
  const named = Object.entries(EXISTING_QUERIES).map(([key, e]) =>
    `label_replace(label_replace(${fill(e)}, "__name__", "${SIGNALS[key]}", "", ""), "bench_signal", "${key}", "", "")`);
  return `(${named.join(' or ')})[${Math.ceil(w.to - w.from) + 1}s:${interval}s]`;
}

// Whether every rule's evaluations up to `to` are in Prometheus' answer. A rule group
// evaluates at slots RULE_INTERVAL_S apart and stamps each sample with its slot, but writes it
// when the evaluation has run: on a busy host, after the slot, so a query at the load's end can
// miss the last slot before it. A rule whose newest sample is an interval or more before `to`
// has a slot still to come; a rule with no samples at all is missing, not late.
export function evaluationsIn(body, to, interval = RULE_INTERVAL_S) {
  const newest = {};
  for (const s of (body && body.data && body.data.result) || []) {
    for (const [t] of s.values || []) newest[s.metric.__name__] = Math.max(newest[s.metric.__name__] || -Infinity, t);
  }
  return Object.values(newest).every((t) => t > to - interval);
}

// Whether the teardown asks Prometheus again, at `now` (seconds) after an answer of `status`
// (0: no connection) for the window ending at `to`: while a rule's last evaluation is still to
// be written (two intervals at most), and while the connection is refused or times out, for
// REFUSED_GRACE_S: a Service's NodePort refuses while its one endpoint is unready, which a
// readiness probe lost on a loaded host makes it for a few seconds.
export const REFUSED_GRACE_S = 10;
export function askAgain(status, body, to, now, interval = RULE_INTERVAL_S) {
  if (status === 0) return now < to + REFUSED_GRACE_S;
  return status === 200 && !evaluationsIn(body, to, interval) && now <= to + 2 * interval;
}

// Prometheus' JSON answer (a matrix) -> { signals: { key: mean }, evaluations }: per evaluation
// the series of a signal are summed (per-pod cores, limits), then averaged over the window's
// evaluations; NaN/Inf (a ratio over an idle zero) are dropped.
export function parseSignals(body, from = -Infinity) {
  const byRule = Object.fromEntries(Object.entries(SIGNALS).map(([k, r]) => [r, k]));
  const sums = {}; // key -> { t: sum }
  for (const s of (body && body.data && body.data.result) || []) {
    const key = byRule[s.metric.__name__];
    if (!key) continue;
    for (const [t, text] of s.values || []) {
      const v = Number(text);
      if (t < from || !Number.isFinite(v)) continue;
      const at = (sums[key] = sums[key] || {});
      at[t] = (at[t] || 0) + v;
    }
  }
  const signals = {};
  let evaluations = 0;
  for (const [key, at] of Object.entries(sums)) {
    const vs = Object.values(at);
    if (!vs.length) continue;
    signals[key] = vs.reduce((a, b) => a + b, 0) / vs.length;
    evaluations = Math.max(evaluations, vs.length);
  }
  return { signals, evaluations };
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
  const w = c.window || {};
  if (Number.isFinite(w.from) && Object.keys(s).length) {
    const at = (t) => (t - w.load_start).toFixed(0); // seconds into the load
    // Another interval than the project's: an existing ingress's, its Prometheus's scrapes.
    const own = !w.interval_s || (w.interval_s === RULE_INTERVAL_S && w.rule_window_s === RULE_WINDOW_S);
    lines.push(`${'window'.padEnd(col)}signals averaged over ${at(w.from)}-${at(w.to)} s of the load (${w.evaluations} evaluations of the rules` +
      (own ? '' : `, every ${w.interval_s} s over ${w.rule_window_s} s: the scrape interval of the ingress's series`) + ')' +
      (w.steady ? '' : `: a load under ${w.steady_min_s || STEADY_MIN_S} s has no steady window, so its ramp is in them`));
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
