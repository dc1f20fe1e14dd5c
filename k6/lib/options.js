// k6 options from a parsed config. Pure: unit-tested under node.
import { TLS_CIPHERS, closedModelVus } from './config.js';
import { LIMITS, SATURATION } from './signals.js';

export function buildOptions(cfg) {
  const t = cfg.thresholds;
  // Closed model (wrk -c N), and the native engine's open model, which paces its connections
  // itself (xk6/pacing.go): the VUs only carry the connections. k6/http's open model: requests
  // arrive at RATE/s whatever the latency; a VU shortage shows as dropped_iterations.
  const executor = cfg.rate && cfg.engine !== 'native'
    ? {
      executor: 'constant-arrival-rate', rate: cfg.rate, timeUnit: '1s', duration: cfg.duration,
      preAllocatedVUs: cfg.connections, maxVUs: cfg.connections,
    }
    : { executor: 'constant-vus', vus: closedModelVus(cfg), duration: cfg.duration };

  // One array per metric: a second key for the same metric in this object would silently
  // replace the first (the ingress-nginx loadtest.js bug the design notes).
  const thresholds = {};
  if (cfg.engine === 'native') {
    // The native engine's run-wide rates and percentiles, from counts and a fixed-size
    // histogram (xk6/outcomes.go, xk6/latency.go), as Gauges: k6 keeps every value of a Trend
    // (memory that grows with the run) and a threshold on it re-sorts them all each 2 s.
    thresholds.bench_http_req_failed_rate = [`value<${t.errorRate}`];
    thresholds.bench_checks_rate = ['value==1'];
    thresholds.bench_http_req_duration_p95 = [`value<${t.p95}`];
    thresholds.bench_http_req_duration_p99 = [`value<${t.p99}`];
  } else {
    thresholds.http_req_failed = [`rate<${t.errorRate}`];
    thresholds.checks = ['rate==1'];
    thresholds.http_req_duration = [`p(95)<${t.p95}`, `p(99)<${t.p99}`];
  }
  if (t.rpsMin) thresholds.http_reqs = [`rate>=${t.rpsMin}`];
  if (cfg.rate && cfg.engine === 'native') {
    thresholds.bench_sends_dropped = [`count<=${t.droppedMax}`];
    // The client's own lateness; a send late because the target still held its connection
    // is the latency (from the due time) the latency thresholds judge.
    thresholds.bench_sends_client_late = [`count<=${Math.floor(t.lateMax * cfg.rate * cfg.durationMs / 1000)}`];
  } else if (cfg.rate) thresholds.dropped_iterations = [`count<=${t.droppedMax}`];
  // Server-side signals, as the Gauges the teardown sets from Prometheus (bench_<signal>).
  //
  // Validity: a signal whose saturation makes the verdict NOT VALID (the load generator's)
  // is a threshold at that level by default, so such a run exits 99 instead of passing.
  if (t.requireValid && cfg.prometheusUrl) { // without Prometheus it cannot be judged
    for (const { key, valid } of LIMITS) if (!valid) thresholds[`bench_${key}`] = [`value<${SATURATION[key]}`];
  }
  if (t.loadgenCpuMax) thresholds.bench_loadgen_cpu_utilization = [`value<${t.loadgenCpuMax}`];
  if (t.rpsPerCoreMin) thresholds.bench_rps_per_ingress_core = [`value>=${t.rpsPerCoreMin}`];

  const options = {
    // The run's tags on the scenario too: a `--tag` on k6's command line (the k6-operator's
    // and the Job's instance_id) replaces the global `tags` below whole, and the load's series
    // would lose their testid; a scenario's tags stay.
    scenarios: { [cfg.scenario]: { ...executor, gracefulStop: '5s', tags: cfg.tags } },
    thresholds,
    tags: cfg.tags,
    noConnectionReuse: !cfg.reuse,
    discardResponseBodies: cfg.discardBodies,
    summaryTrendStats: ['avg', 'min', 'med', 'max', 'p(90)', 'p(95)', 'p(99)'],
    // Lab certificates are generated at `lab:up` and self-signed; wrk does not verify either.
    insecureSkipTLSVerify: true,
    setupTimeout: '30s',
  };
  if (cfg.scheme === 'https') {
    const v = `tls${cfg.tls.version}`;
    options.tlsVersion = { min: v, max: v };
    // TLS 1.2's: the seed's; TLS 1.3 has its own suites, which Go does not let a client pick.
    if (cfg.tls.version === '1.2') options.tlsCipherSuites = TLS_CIPHERS;
  }
  return options;
}
