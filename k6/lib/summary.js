// End-of-run summary: the per-run directory's files and the short text a person reads.
// Pure: takes k6's summary data and the parsed config; unit-tested under node.
import { SIGNALS, steadyMinS, steadyWindow, verdict, missingReasons, correlationText } from './correlation.js';
import { LIMITS } from './signals.js';

const metric = (data, name) => (data.metrics[name] && data.metrics[name].values) || {};

export function fmtInt(n) {
  return Math.round(n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

// Gbit/s from a bytes-per-second rate (decimal giga, as NIC speeds are quoted).
export const gbits = (bytesPerSecond) => (bytesPerSecond * 8) / 1e9;

// The numbers a result is judged by, in one flat object (written into summary.json as `result`).
// outcomes: the native engine's counts of the load's requests (xk6/outcomes.go), which k6 gets
// no per-request samples of (its Trend and Rates then hold only setup's and the teardown's
// requests); null on the JS path.
export function headline(data, cfg, outcomes = null) {
  const reqs = metric(data, 'http_reqs');
  const dur = metric(data, 'http_req_duration');
  const failed = metric(data, 'http_req_failed');
  const recv = metric(data, 'data_received');
  const tls = metric(data, 'http_req_tls_handshaking');
  const seconds = data.state.testRunDurationMs / 1000;
  const thresholds = [];
  for (const [name, m] of Object.entries(data.metrics)) {
    for (const [expr, t] of Object.entries(m.thresholds || {})) thresholds.push({ metric: name, expr, ok: t.ok });
  }
  // The teardown's Prometheus queries are HTTP requests too; they are not load.
  const requests = Math.max(0, (reqs.count || 0) - (metric(data, 'bench_correlation_queries').count || 0));
  return {
    scenario: cfg.scenario,
    requests,
    rps: seconds > 0 ? requests / seconds : 0,
    seconds,
    connections: cfg.connections,
    model: cfg.rate ? `open ${cfg.rate}/s` : 'closed',
    p50_ms: dur.med, p95_ms: dur['p(95)'], p99_ms: dur['p(99)'],
    ...(outcomes ? {
      max_ms: outcomes.max_ms, error_rate: outcomes.failed_rate, errors: outcomes.failed,
      checks: Object.values(outcomes.checks).reduce((s, c) => ({ passes: s.passes + c.passes, fails: s.fails + c.fails }), { passes: 0, fails: 0 }),
      tls_handshakes: outcomes.tls_handshakes,
      tls_negotiated: outcomes.tls_negotiated,
      // k6's average: over requests, a reused connection's 0 included.
      tls_handshake_avg_ms: outcomes.requests ? outcomes.tls_handshake_ms_sum / outcomes.requests : undefined,
    } : {
      max_ms: dur.max,
      error_rate: failed.rate || 0,
      errors: failed.passes || 0, // http_req_failed is a Rate: passes are failed requests
      checks: { passes: metric(data, 'checks').passes || 0, fails: metric(data, 'checks').fails || 0 },
      tls_handshake_avg_ms: tls.avg,
    }),
    dropped_iterations: metric(data, 'dropped_iterations').count || 0,
    // The native engine's open model (xk6/pacing.go): latency above is from when each request
    // was due; the service time, from when it was sent; sends late past 2 ms and never made.
    ...(cfg.rate && cfg.engine === 'native' ? {
      sends_late: metric(data, 'bench_sends_late').count || 0,
      sends_client_late: metric(data, 'bench_sends_client_late').count || 0,
      sends_dropped: metric(data, 'bench_sends_dropped').count || 0,
      service_p95_ms: metric(data, 'bench_http_req_service_p95').value,
      service_p99_ms: metric(data, 'bench_http_req_service_p99').value,
    } : {}),
    gbit_per_s: gbits(recv.rate || 0),
    thresholds,
    passed: thresholds.every((t) => t.ok),
  };
}

const COL = 14; // label column, wide enough for 'k6 throughput'
const ms = (v) => (v === undefined ? '-' : `${v.toFixed(v < 10 ? 2 : 1)} ms`);

// The server side of the run, from the Gauges the teardown set (k6/lib/scenario.js).
export function correlation(data, cfg, now) {
  // A Gauge with a threshold but no sample reads 0 in k6's data: only what the teardown set
  // from Prometheus' answer counts, and it sets -1 for a signal without data (k6/lib/scenario.js).
  const answered = metric(data, 'bench_prometheus_answered').value === 1;
  const signals = {};
  for (const key of Object.keys(SIGNALS)) {
    const m = data.metrics[`bench_${key}`];
    if (answered && m && m.values && m.values.value >= 0) signals[key] = m.values.value;
  }
  const end = now.getTime() / 1000;
  const window = { start: end - data.state.testRunDurationMs / 1000, end };
  // What the teardown averaged (k6/lib/scenario.js): the load's steady part, from setup's end.
  const start = data.setup_data && data.setup_data.start;
  if (answered && Number.isFinite(start)) {
    const w = steadyWindow(start, Math.min(end, start + cfg.durationMs / 1000), cfg.timing);
    Object.assign(window, { load_start: start, from: w.from, to: w.to, steady: w.steady, evaluations: metric(data, 'bench_signal_evaluations').value || 0,
      interval_s: cfg.timing.interval, rule_window_s: cfg.timing.window, steady_min_s: steadyMinS(cfg.timing) });
  }
  return {
    source: 'prometheus', url: cfg.prometheusUrl || null,
    // Recorded by rules (the platform's, or those installed for an existing ingress's run) or
    // evaluated as one query (an existing ingress's, without them).
    evaluated: cfg.existing && !cfg.existing.rules ? 'query' : 'rules',
    window, signals, missing: missingReasons(signals, cfg, answered),
  };
}

// What the native engine's handshakes negotiated against what was asked (TLS_VERSION,
// TLS_GROUP, TLS_RESUMPTION), by count: "tls  asked TLS 1.3, X25519, tickets; negotiated
// TLS 1.3 TLS_AES_128_GCM_SHA256 X25519 http/1.1: 4 full, 1,196 resumed".
export function tlsLine(negotiated, cfg) {
  const by = {};
  for (const [key, n] of Object.entries(negotiated)) {
    const how = key.slice(key.lastIndexOf(' ') + 1);
    const what = key.slice(0, key.lastIndexOf(' '));
    (by[what] = by[what] || []).push([how, n]);
  }
  return `${'tls'.padEnd(COL)}asked TLS ${cfg.tls.version}, ${cfg.tls.group}, resumption ${cfg.tls.resumption}; negotiated ` +
    Object.entries(by).sort().map(([what, counts]) => `${what}: ${counts.sort().map(([how, n]) => `${fmtInt(n)} ${how}`).join(', ')}`).join('; ');
}

export function textSummary(h, cfg, c, v) {
  const lines = [];
  const label = `k6 ${cfg.scenario}`.padEnd(COL);
  const streams = cfg.http2 ? ` of HTTP/2, ${cfg.streams} stream${cfg.streams === 1 ? '' : 's'} each,` : '';
  lines.push(`${label}${cfg.connections} connections${streams} × ${cfg.duration} (${h.model}) → ${fmtInt(h.rps)} req/s` +
    `  p50 ${ms(h.p50_ms)}  p95 ${ms(h.p95_ms)}  p99 ${ms(h.p99_ms)}`);
  lines.push(`${''.padEnd(COL)}${fmtInt(h.requests)} requests, errors ${(h.error_rate * 100).toFixed(3)}% (${fmtInt(h.errors)})` +
    (h.dropped_iterations ? `, dropped ${fmtInt(h.dropped_iterations)}` : '') +
    `, received ${h.gbit_per_s.toFixed(3)} Gbit/s` +
    (h.tls_handshake_avg_ms ? `, TLS handshake avg ${ms(h.tls_handshake_avg_ms)}` : ''));
  if (h.tls_negotiated && Object.keys(h.tls_negotiated).length) lines.push(tlsLine(h.tls_negotiated, cfg));
  if (h.sends_late !== undefined) {
    lines.push(`${'open model'.padEnd(COL)}${fmtInt(h.rps)} of ${fmtInt(cfg.rate)} req/s asked (${(h.rps / cfg.rate * 100).toFixed(2)}%), ` +
      `late ${fmtInt(h.sends_late)} (the client's own ${fmtInt(h.sends_client_late)}), dropped ${fmtInt(h.sends_dropped)}; ` +
      `latency from the due time, service time p95 ${ms(h.service_p95_ms)}  p99 ${ms(h.service_p99_ms)}`);
  }
  const failedT = h.thresholds.filter((t) => !t.ok);
  // A run that measured the client fails on its validity threshold: the line says why.
  const invalid = v && !v.valid && failedT.some((t) => t.metric === `bench_${LIMITS.find((l) => l.limit === v.limit).key}`);
  lines.push(`${'result'.padEnd(COL)}${h.passed ? 'PASS' : 'FAIL'} (${h.thresholds.length - failedT.length}/${h.thresholds.length} thresholds)` +
    failedT.map((t) => `  ✗ ${t.metric} ${t.expr}`).join('') +
    (invalid ? `  NOT VALID: ${v.text} (REQUIRE_VALID=0 reports it without failing)` : ''));
  if (c) lines.push(...correlationText(c, v, COL));
  lines.push(`${'target'.padEnd(COL)}${cfg.url} (variant ${cfg.tags.variant}, platform ${cfg.tags.platform})`);
  return lines.join('\n') + '\n';
}

export function metaJson(cfg, data, now) {
  return {
    testid: cfg.tags.testid, scenario: cfg.scenario, variant: cfg.tags.variant, platform: cfg.tags.platform,
    target: cfg.url, host_header: cfg.host, connections: cfg.connections, rate: cfg.rate || null,
    duration: cfg.duration, connection_reuse: cfg.reuse,
    finished_at: now.toISOString(), run_seconds: data.state.testRunDurationMs / 1000,
    engine: cfg.engine, settings: cfg.settings, // as this k6 received them (bench/settings/settings.yaml)
    ...cfg.meta, // from the runner: git revision, tool versions, CPU count, placement
  };
}

// The native engine's percentiles are its histogram's: the load's requests only, the figures
// its latency thresholds judge (bench_http_req_duration_p95/p99). k6's Trend also holds setup's
// readiness GET and the teardown's Prometheus query: in a run of a few thousand requests they
// are among the slowest few dozen and move its p99 by several percent.
export function nativeLatency(histogram) {
  const { p50_ms, p95_ms, p99_ms, ...buckets } = histogram;
  return { p50_ms, p95_ms, p99_ms, latency_histogram: buckets };
}

// The map k6's handleSummary returns: file path -> content, plus stdout.
// native: the native engine's exports, null on the JS path: histogram, the run's latency
// histogram (xk6/latency.go), kept in the result for merging segments; outcomes, its counts
// (xk6/outcomes.go); timeline, its 100 ms slots (xk6/timeline.go).
export function summaryFiles(data, cfg, now = new Date(), native = null) {
  const { histogram = null, outcomes = null, timeline = null } = native || {};
  const h = { ...headline(data, cfg, outcomes), ...(histogram ? nativeLatency(histogram) : {}) };
  const c = correlation(data, cfg, now);
  const v = verdict(c.signals);
  const text = textSummary(h, cfg, c, v);
  const dir = cfg.resultsDir;
  return {
    // settings: what this k6 received (bench/settings/settings.yaml), also where only the summary
    // comes back (the in-cluster pods print it).
    [`${dir}/summary.json`]: JSON.stringify({ result: h, settings: cfg.settings, correlation: c, verdict: v, k6: data }, null, 1),
    [`${dir}/summary.txt`]: text,
    [`${dir}/meta.json`]: JSON.stringify(metaJson(cfg, data, now), null, 1),
    // The native engine's 100 ms slots (xk6/timeline.go): what a change did, and when.
    ...(timeline ? { [`${dir}/timeline.json`]: JSON.stringify(timeline) } : {}),
    stdout: text,
  };
}
