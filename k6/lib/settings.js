// The settings registry: every setting a user can give, as data, in one place.
// `k6/lib/config.js` validates the k6 ones from it; `node bench/settings/generate.mjs` writes
// from it the shell's view (bench/settings/settings.tsv: the ./task wrapper's forwarding and its
// unknown-name check, the in-cluster manifests' environment, the scripts' path checks) and
// the README's settings table; `./task test` fails when either differs from this file.
// Pure data and pure functions (no k6 imports): node loads this file too.
//
// Fields:
//   name      the environment variable (and `./task ... NAME=value`)
//   type      int (min, max), number (>= 0), flag (1/true, 0/false), enum (values), list (some
//             of values, separated by spaces),
//             duration (k6's 30s / 3m / 1m30s), text (pattern, rule: what it must look like)
//   default   the value when unset (null: unset means "none" or is decided at run time,
//             which defaultText says)
//   defaults  an entry point's own default, where it differs ({ calibrate: '50' }): bash's
//             `setting NAME ENTRY` and Python's registry() read it from here
//   reaches   the paths the user's value is carried to:
//               k6       the host's k6 (bench on the lab and the local cluster): config.js
//               pods     the in-cluster k6 pods: the Indexed Job and the k6-operator TestRun
//                        (bench/run/render_distributed.sh writes their environment from this list)
//               lab, deploy, monitoring, distributed, calibrate, matrix, report:
//                        the scripts of those tasks read it on the host
//   example   a valid non-default value: the settings test gives it on every path the
//             setting reaches and asserts it arrived
//   meaning   the README's text
export const PAYLOADS = { '0kb': 0, '1kb': 1024, '4kb': 4096, '100kb': 102400, '1mb': 1048576 };

// The scenarios: each k6/<name>.js, which holds its own profile (defaults, headline figure).
// The SCENARIO setting's values, and so every script's list; a test holds it to the files.
export const SCENARIO_NAMES = ['rps', 'tps', 'throughput'];

export const SETTINGS = [
  { name: 'PLATFORM', type: 'enum', values: ['local', 'external', 'lab'], default: null,
    defaultText: '`local` (`lab` when `TARGET` is set)', reaches: ['k6', 'pods', 'deploy', 'monitoring', 'distributed', 'matrix'],
    example: 'lab', meaning: '`local`, `external`, `lab` (below)' },
  { name: 'VARIANT', defaults: { calibrate: 'seed002-nginx-lb-tuned' }, type: 'text', pattern: /^[a-z0-9-]+(\+[a-z0-9-]+)*$/, rule: 'an overlay name or knob names joined by +',
    default: 'seed002-nginx-lb-default', reaches: ['k6', 'pods', 'lab', 'deploy', 'distributed', 'calibrate', 'matrix'],
    example: 'seed002-nginx-lb-tuned', meaning: 'an overlay (`overlays/`); on the lab also knob names joined by `+` (below)' },
  { name: 'ENGINE', type: 'enum', values: ['js', 'native'], default: 'native',
    defaultText: '`native` (`js` in Grafana\'s stock k6 image, `IMAGE_SET=upstream`)', reaches: ['k6', 'pods', 'distributed'], example: 'js',
    meaning: 'the request loop: `native` (the project\'s Go extension `k6/x/ingressbench`, `xk6/`: ~13 µs of client CPU per keep-alive request, 1.14× wrk\'s (one epoll loop per VU), the open model paced in Go; latency thresholds on its bounded-histogram Gauges `bench_http_req_duration_p95/p99`; see `xk6/README.md`) or `js` (k6/http, the reference: 55–90 µs per request)' },
  { name: 'DURATION', defaults: { change: '30s' }, type: 'duration', default: '15s', reaches: ['k6', 'pods', 'calibrate', 'matrix'], example: '2s',
    meaning: 'k6 duration (`30s`, `3m`, `1m30s`); the signals and the verdict average its steady part, from 8 s in to its end (a load under 10 s has none: README, "Monitoring and the verdict"); the seeds used `180s`' },
  { name: 'CONNECTIONS', defaults: { calibrate: '50' }, type: 'int', min: 1, max: 20000, default: null, defaultText: '50 per client CPU, at most 1000',
    reaches: ['k6', 'pods', 'calibrate', 'matrix'], example: '7', meaning: 'VUs = connections (the seeds: 1000)' },
  { name: 'REQUEST_TIMEOUT', type: 'duration', default: '10s', reaches: ['k6', 'pods'], example: '2s',
    meaning: 'a request without a whole response by then is a timeout error (k6/http: its `timeout`; the native engine: dial to last byte)' },
  { name: 'RATE', type: 'int', min: 1, default: null, defaultText: 'unset (closed model)', reaches: ['k6', 'pods'], example: '50',
    meaning: 'requests/s for the open model' },
  { name: 'SCHEME', type: 'enum', values: ['http', 'https'], default: null, defaultText: '`http` (`https` for tps)',
    reaches: ['k6', 'pods'], example: 'https', meaning: 'protocol to the LB' },
  { name: 'PAYLOAD', type: 'enum', values: Object.keys(PAYLOADS), default: null, defaultText: 'per scenario',
    reaches: ['k6', 'pods'], example: '4kb', meaning: 'the response body: `0kb`, `1kb`, `4kb`, `100kb`, `1mb`' },
  { name: 'NO_REUSE', type: 'flag', default: '0', reaches: ['k6', 'pods'], example: '1', meaning: '`1`: a new connection per request' },
  { name: 'HOST', type: 'text', pattern: /^[A-Za-z0-9.-]+(:\d+)?$/, rule: 'a host name', default: 'bench.ingress.test',
    reaches: ['k6', 'pods'], example: 'other.ingress.test', meaning: 'Host header' },
  { name: 'ERROR_RATE_MAX', type: 'number', default: '0.0001', reaches: ['k6', 'pods'], example: '0.5',
    meaning: 'threshold: the share of failed requests (seed 003: under 1 in 10,000)' },
  { name: 'P95_MS', type: 'number', default: null, defaultText: '250 (throughput 2000)', reaches: ['k6', 'pods'], example: '900',
    meaning: 'threshold: p95 latency in ms' },
  { name: 'P99_MS', type: 'number', default: null, defaultText: '500 (throughput 4000)', reaches: ['k6', 'pods'], example: '1900',
    meaning: 'threshold: p99 latency in ms' },
  { name: 'RPS_MIN', type: 'number', default: null, defaultText: 'unset', reaches: ['k6', 'pods'], example: '1',
    meaning: 'threshold: a floor on requests/s' },
  { name: 'DROPPED_MAX', type: 'int', min: 0, default: '0', reaches: ['k6', 'pods'], example: '3',
    meaning: 'threshold: requests of the open model never sent (`ENGINE=native`: sends due before the end and not made 1 s after it, `bench_sends_dropped`; `js`: k6\'s `dropped_iterations`)' },
  { name: 'LATE_MAX', type: 'number', default: '0.05', reaches: ['k6', 'pods'], example: '0.5',
    meaning: 'threshold, open model with `ENGINE=native`: the share of requests the client itself sent more than 2 ms after they were due, their connection free (`bench_sends_client_late`; all late sends, mostly held by a slow target, are `bench_sends_late`, and their latency counts from when they were due)' },
  { name: 'REQUIRE_VALID', type: 'flag', default: '1', reaches: ['k6', 'pods'], example: '0',
    meaning: 'a run the verdict calls NOT VALID (the load generator saturated: it measured the client) fails a threshold, `bench_loadgen_cpu_utilization` below its saturation level, and exits 99; `0` only reports it' },
  { name: 'LOADGEN_CPU_MAX', type: 'number', default: null, defaultText: 'the saturation level (0.9) while `REQUIRE_VALID=1`', reaches: ['k6'], example: '5',
    meaning: 'server-side threshold: the load generator\'s CPU utilization below this' },
  { name: 'RPS_PER_CORE_MIN', type: 'number', default: null, defaultText: 'unset', reaches: ['k6'], example: '1',
    meaning: 'server-side threshold: req/s per ingress core at least this' },
  { name: 'TARGET', type: 'text', pattern: /^https?:\/\/\S+$/, rule: 'a base URL', default: null, defaultText: 'the lab LB',
    reaches: ['k6', 'pods'], example: 'https://198.18.0.2',
    meaning: 'base URL; outside 198.18.0.0/15 and loopback only with `ALLOW_EXTERNAL_TARGET=1` (the in-cluster pods get the deployed ingress\'s)' },
  { name: 'ALLOW_EXTERNAL_TARGET', type: 'flag', default: '0', reaches: ['k6', 'pods'], example: '1',
    meaning: '`1`: you own a target outside the lab\'s range and may load it' },
  { name: 'STUB_STATUS_URL', type: 'text', pattern: /^https?:\/\/\S+$/, rule: 'a URL', default: null, defaultText: '—',
    reaches: ['k6'], example: 'http://198.18.0.2:8080/stub_status', meaning: 'server-side counts for a target of your own' },
  { name: 'TESTID', type: 'text', pattern: /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/, rule: "letters, digits, '.', '_' and '-' only, not starting with '.'", default: null,
    defaultText: 'timestamp-scenario-variant', reaches: ['k6', 'pods', 'distributed'], example: 'settings-test-run',
    meaning: 'the run\'s id: its tag and its directory' },
  { name: 'RESULTS_ROOT', type: 'text', pattern: /^\S+$/, rule: 'a directory', default: 'results/', reaches: ['k6', 'distributed', 'calibrate', 'matrix'],
    example: '/tmp/ib-results', meaning: 'where runs are written (never overwritten)' },
  { name: 'PROMETHEUS_URL', type: 'text', pattern: /^https?:\/\/\S+$/, rule: 'a base URL', default: null, defaultText: 'the platform\'s',
    reaches: ['k6', 'pods', 'report'], example: 'http://127.0.0.1:9',
    meaning: 'another Prometheus holding the bench:* rules; for in-cluster k6 an address the pods reach (a Service DNS name such as `http://prometheus.monitoring.svc:9090`), which they also stream to' },
  { name: 'MONITORING', type: 'flag', default: '1', reaches: ['k6', 'deploy', 'distributed', 'matrix'], example: '0',
    meaning: '`0`: no Prometheus, no correlation, no sidecars' },
  { name: 'LINK_CAPACITY', type: 'text', pattern: /^[0-9]+(\.[0-9]+)?[KMG]?$/, rule: 'like 10G, 1G or 100M', default: null,
    defaultText: 'the overlay\'s bandwidth emulation, else `10G`', reaches: ['k6', 'monitoring'], example: '25G',
    meaning: 'the NIC capacity utilization is judged against (`1G`, `25G`, ...)' },
  { name: 'ALLOW_EXTERNAL_CLUSTER', type: 'flag', default: '0', reaches: ['deploy'], example: '1',
    meaning: '`1` and `KUBECONFIG`: both required for `PLATFORM=external`' },
  { name: 'KUBECONFIG', type: 'text', pattern: /^\S+$/, rule: 'a file', default: null, defaultText: '—', reaches: ['deploy'],
    example: '/nonexistent/kubeconfig', meaning: 'the cluster of `PLATFORM=external`' },
  { name: 'PROMETHEUS_RELEASE', type: 'text', pattern: /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, rule: 'a Helm release name', default: null, defaultText: '—',
    reaches: ['deploy', 'distributed'], example: 'kube-prometheus-stack',
    meaning: 'the Helm release of the cluster\'s kube-prometheus-stack when its Prometheus keeps the chart\'s default selectors (monitors and rules by their `release` label): deploy labels the monitoring component\'s PodMonitors and PrometheusRules with it' },
  { name: 'KPS_CHART', type: 'text', pattern: /^(https?:\/\/|\/|\.)\S*$/, rule: 'a chart repository URL or a directory',
    default: 'https://prometheus-community.github.io/helm-charts', reaches: ['monitoring'], example: '/srv/charts/kube-prometheus-stack',
    meaning: 'where `task monitoring:chart-template` and `monitoring:chart-up` take kube-prometheus-stack from: its chart repository (a connected machine), or a directory holding the release with its subcharts (air-gapped); the version is pinned (`KPS_CHART_VERSION`, ci/tools/versions.env)' },
  { name: 'IMAGE_SET', type: 'enum', values: ['local', 'upstream'], default: null, defaultText: '`local` on the local platform, `upstream` elsewhere',
    reaches: ['deploy', 'distributed'], example: 'upstream', meaning: 'the images a cluster runs: this machine\'s builds or the pinned registry images' },
  { name: 'SEGMENTS', defaults: { distributed: '2', external: '1' }, type: 'int', min: 1, max: 16, default: null,
    reaches: ['distributed', 'pods'], example: '3', meaning: 'in-cluster k6 pods, each an execution segment' },
  { name: 'INGRESS_CPU', type: 'text', pattern: /^(auto|overlay|(?![0.]*m?$)([0-9]+m|[0-9]+|[0-9]*\.[0-9]+))$/, rule: 'auto, overlay, or a CPU quantity above 0 like 2, 500m or 0.5', default: null,
    defaultText: '`auto`: on the local platform the share a 3 s probe finds the client side can saturate (`bench/run/budget.py`); on the lab the LB\'s own cores, and a 3 s probe says before the load whether k6\'s CPUs can drive them; the overlay\'s elsewhere',
    reaches: ['deploy', 'distributed'], example: '250m',
    meaning: 'the ingress container\'s CPU, request and limit alike: `auto`, `overlay` (the overlay\'s own), or a quantity (whole cores are pinned by the static CPU manager; a fraction is a CFS quota)' },
  { name: 'INGRESS_CPUS', type: 'text', pattern: /^(?:(?![0.]*m?(?:[ ,]|$))(?:[0-9]+m|[0-9]+|[0-9]*\.[0-9]+)(?:[ ,]+|$))+$/,
    rule: 'CPU quantities above 0 separated by spaces, like 500m 1 or 1 2 4 8 16 24', default: null, defaultText: '—', reaches: ['sweep'],
    example: '250m 500m', meaning: '`bench:sweep`: the ingress CPU amounts swept (each run deploys the variant with `INGRESS_CPU` set to one); seed 002: 1 2 4 8 16 24' },
  { name: 'SCENARIOS', type: 'list', values: SCENARIO_NAMES,
    default: 'rps tps throughput', reaches: ['sweep'], example: 'rps', meaning: '`bench:sweep`: the scenarios run at each CPU amount (seed 002\'s three tables)' },
  { name: 'RUNNER_CPU', type: 'text', pattern: /^(?![0.]*m?$)([0-9]+m|[0-9]+|[0-9]*\.[0-9]+)$/, rule: 'a CPU quantity above 0 like 2, 500m or 0.5', default: null, defaultText: 'none',
    reaches: ['distributed'], example: '500m',
    meaning: 'each in-cluster k6 pod\'s CPU request and limit: a share of a busy cluster that holds, or (a small one) to prove the load-generator verdict' },
  { name: 'SCENARIO', type: 'enum', values: SCENARIO_NAMES, default: 'rps', reaches: ['distributed', 'capacity', 'compare'], example: 'tps',
    meaning: '`bench:distributed`: the scenario the pods run; `bench:capacity`: the scenario searched; `bench:compare`: the scenario both sides run' },
  { name: 'SLO_P99_MS', type: 'number', default: '50', reaches: ['capacity'], example: '20',
    meaning: '`bench:capacity`: the SLO a rate must hold, p99 latency from each request\'s due time in ms (each step\'s `P99_MS`)' },
  { name: 'CAPACITY_PRECISION', type: 'number', default: '0.02', reaches: ['capacity'], example: '0.05',
    meaning: '`bench:capacity`: the search stops when the highest rate that held and the lowest that did not are this share apart' },
  { name: 'DEPLOY_TIMEOUT', type: 'int', min: 1, default: '120', reaches: ['deploy', 'distributed'], example: '60',
    meaning: 'seconds a deploy may take to become ready: its pods, the ingress answering, and on a cluster its monitors and rules loaded by Prometheus (after that the run goes on, and its summary names the signals missing)' },
  { name: 'LAB_BACKENDS', type: 'int', min: 1, max: 99, default: '2', reaches: ['lab'], example: '3', meaning: 'backend servers in the lab' },
  { name: 'LAB_CLIENT_CPUS', type: 'text', pattern: /^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$/, rule: 'a CPU list like 0 or 1-3', default: null,
    defaultText: 'the first half of the CPUs', reaches: ['lab', 'calibrate'], example: '0', meaning: '`taskset` list for k6 on the lab' },
  { name: 'LAB_SERVER_CPUS', type: 'text', pattern: /^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$/, rule: 'a CPU list like 0 or 1-3', default: null,
    defaultText: 'the second half of the CPUs', reaches: ['lab', 'calibrate'], example: '1', meaning: '`taskset` list for all the lab\'s nginx processes' },
  { name: 'ROUNDS', defaults: { calibrate: '3' }, type: 'int', min: 1, max: 99, default: null, defaultText: '3 (`bench:overhead` and `bench:compare` 5)', reaches: ['calibrate', 'matrix', 'compare', 'sweep'],
    example: '2', meaning: 'rounds of a comparison, alternated; medians reported' },
  { name: 'RUN_HOOK', type: 'text', pattern: /^[^\n]+$/, rule: 'one line of shell', default: null, defaultText: 'none',
    reaches: ['matrix', 'compare', 'sweep', 'capacity', 'change'], example: 'true',
    meaning: 'a command (`bash -c`) run before each run of a matrix and of the runners built on it (`bench:compare`, `bench:sweep`, `bench:seeds`, `bench:capacity`, `bench:change`), with the run\'s case, round and TESTID in `IB_CASE`, `IB_ROUND` and `IB_TESTID`: a reset (caches dropped, a device settled) or a perturbation applied at a defined point; its output goes to the run\'s log, a non-zero exit fails that run' },
  { name: 'BASE', type: 'text', pattern: /^[a-z0-9-]+(\+[a-z0-9-]+)*$/, rule: 'a variant (as VARIANT)', default: null, defaultText: '—',
    reaches: ['compare'], example: 'seed002-nginx-lb-default',
    meaning: '`bench:compare`: the variant compared against (or `BASELINE`, a saved one)' },
  { name: 'HEAD', type: 'text', pattern: /^[a-z0-9-]+(\+[a-z0-9-]+)*$/, rule: 'a variant (as VARIANT)', default: null, defaultText: '—',
    reaches: ['compare'], example: 'seed002-nginx-lb-tuned', meaning: '`bench:compare`: the variant under test' },
  { name: 'BASELINE', type: 'text', pattern: /^[a-z0-9][a-z0-9._-]*$/, rule: 'a saved baseline\'s name', default: null, defaultText: '—',
    reaches: ['compare'], example: 'main',
    meaning: '`bench:compare`: compare `HEAD` with this saved baseline (`RESULTS_ROOT/baselines/<name>/`) instead of measuring `BASE`' },
  { name: 'BASELINE_SAVE', type: 'text', pattern: /^[a-z0-9][a-z0-9._-]*$/, rule: 'a name of letters, digits, \'.\', \'_\' and \'-\'', default: null, defaultText: '—',
    reaches: ['compare'], example: 'v1',
    meaning: '`bench:compare`: keep `HEAD`\'s runs (their directories and the machine\'s description) as a baseline of this name; without `BASE` or `BASELINE` only `HEAD` is measured' },
  { name: 'GATE_RATE_DROP', type: 'number', default: '10', reaches: ['compare'], example: '5',
    meaning: '`bench:compare`: a regression when the whole 95 % interval of HEAD/BASE req/s (or Gbit/s) is more than this % below 1 (Kong\'s release gate)' },
  { name: 'GATE_P95_RISE', type: 'number', default: '15', reaches: ['compare'], example: '25',
    meaning: '`bench:compare`: a regression when the whole interval of the p95 latency ratio is more than this % above 1' },
  { name: 'GATE_P99_RISE', type: 'number', default: '20', reaches: ['compare'], example: '30',
    meaning: '`bench:compare`: a regression when the whole interval of the p99 latency ratio is more than this % above 1' },
  { name: 'GATE_CV_MAX', type: 'number', default: '15', reaches: ['compare'], example: '25',
    meaning: '`bench:compare`: UNSTABLE (no verdict) when either side\'s req/s (or Gbit/s) varies more than this % over its rounds (coefficient of variation)' },
  { name: 'CHANGE', type: 'enum', values: ['none', 'reload', 'scale', 'kill-backend', 'rollout', 'kill-ingress'], default: null, defaultText: '—',
    reaches: ['change'], example: 'reload',
    meaning: '`bench:change`: what changes under load: `reload` (the ingress reloads into `RELOAD_TO`), `scale` (backends N → 1 → N), `kill-backend` (one backend pod deleted), `rollout` (the ingress Deployment restarted), `kill-ingress` (its pod deleted), `none` (the control run); on the lab (`PLATFORM=lab`) `reload`, `kill-backend` (backend 1\'s nginx stopped, started 1 s later) and `none`; `DURATION` defaults to 30s there' },
  { name: 'CHANGE_AT', type: 'duration', default: '10s', reaches: ['change'], example: '5s',
    meaning: '`bench:change`: when the change starts, from the load\'s start' },
  { name: 'LOAD_SHARE', type: 'int', min: 1, max: 100, default: '50', reaches: ['change'], example: '30',
    meaning: '`bench:change`: the open model\'s rate as a % of the capacity a closed-model run of the variant measures first (`CHANGE=scale`: with one backend pod, the smallest state the scale passes through; `RATE` given: that rate, no capacity run)' },
  { name: 'RELOAD_TO', type: 'text', pattern: /^[a-z0-9-]+(\+[a-z0-9-]+)*$/, rule: 'a variant (as VARIANT)', default: null, defaultText: '`VARIANT` (the same configuration, reloaded)',
    reaches: ['change'], example: 'seed002-nginx-lb-tuned', meaning: '`bench:change CHANGE=reload`: the variant whose configuration the ingress reloads into' },
  { name: 'CHANGE_ERRORS_MAX', type: 'int', min: 0, default: null, defaultText: 'none (reported only)', reaches: ['change'], example: '0',
    meaning: '`bench:change`: a threshold: more failed requests than this during the change exits 99 (sends the open model never made are `DROPPED_MAX`\'s)' },
  { name: 'BUDGET', type: 'duration', default: null, defaultText: 'none: `ROUNDS` rounds (`bench:seeds`: 30m unless `ROUNDS` is given)', reaches: ['matrix', 'compare'], example: '10m',
    meaning: 'a matrix with seed relations, or `bench:compare`: rounds alternate until every relation decides (its interval says the direction holds or not), or every gate of a comparison does (a regression, or its interval clear of the tolerance), or the next round would end past this (a comparison then says UNDECIDED, exit 98); a noise probe first says how many rounds they need' },
  { name: 'RELATIONS', type: 'text', pattern: /^[^\s|]+( [^\s|]+)*$/, rule: 'title prefixes separated by spaces', default: null, defaultText: 'all',
    reaches: ['matrix'], example: '004',
    meaning: 'a matrix (`bench:seeds`): only the ratios whose title starts with one of these (`004`: seed 004\'s relations), and only the cases they compare (and those cases\' baselines)' },
  { name: 'MATRIX', type: 'text', pattern: /^\S+\.ya?ml$/, rule: 'a case list (.yaml)', default: null, defaultText: '—', reaches: ['matrix'],
    example: 'bench/run/matrices/keepalive.yaml', meaning: '`bench:matrix`: the case list to run (format: `bench/run/cases.py`; the seeds\' lists: `bench/run/matrices/`)' },
  { name: 'CASES', type: 'list', values: ['http-1kb', 'https-1kb', 'tls-handshakes', 'throughput-1mb'], default: 'http-1kb https-1kb tls-handshakes throughput-1mb',
    reaches: ['calibrate'], example: 'http-1kb', meaning: '`calibrate`: the cases measured' },
  { name: 'CLIENTS', type: 'list', values: ['wrk', 'js', 'native', 'native-open'], default: 'wrk js native native-open', reaches: ['calibrate'],
    example: 'wrk native', meaning: '`calibrate`: the clients compared (`native-open`: the native engine\'s open model at 90 % of its closed-model rate)' },
  { name: 'LONG', type: 'text', pattern: /^(0|[1-9][0-9]*s)$/, rule: 'whole seconds like 180s, or 0', default: '180s', reaches: ['calibrate'], example: '0',
    meaning: '`calibrate`: the native engine\'s long run (`0` skips the long runs)' },
  { name: 'LONG_CONNECTIONS', type: 'int', min: 1, default: '1000', reaches: ['calibrate'], example: '200',
    meaning: '`calibrate`: connections of the peak-RSS run' },
  { name: 'RUN', type: 'text', pattern: /^\S+$/, rule: 'a directory', default: null, defaultText: '—', reaches: ['report'], example: 'results/x',
    meaning: '`task report`: one run\'s directory' },
  { name: 'RUNS', type: 'text', pattern: /\S/, rule: 'directories', default: null, defaultText: '—', reaches: ['report'], example: 'results/x results/y',
    meaning: '`task report`: several runs\' directories (tables)' },
];

// Every other environment variable a script of the runtime reads (bench/, k6/, ci/tools):
// the lint in ci/tests/test_settings.py fails on one that is neither here nor in SETTINGS.
// None is a user setting: the wrapper refuses them on the task line.
//   by  scripts: set by one script for another (k6, a driver's placement, a function's caller)
//       test:    a test's hook into a script (failpoints, other state directories)
//       system:  the machine's, the toolchain's or Kubernetes' own
//       k6:      k6's own variables, passed on to it
export const ENVIRONMENT = [
  { name: 'CLIENT_CPUS', by: 'scripts', meaning: 'the CPUs k6 may use, for its connection default (bench.sh, drivers)' },
  { name: 'RESULTS_DIR', by: 'scripts', meaning: 'the run directory k6 writes its summary into (bench.sh)' },
  { name: 'BENCH_META', by: 'scripts', meaning: 'the run\'s meta.json path, for k6\'s summary (bench.sh)' },
  { name: 'CLIENT_CPU_LIST', by: 'scripts', meaning: 'the CPU list k6 is pinned to (a platform driver\'s placement)' },
  { name: 'SERVER_CPU_LIST', by: 'scripts', meaning: 'the CPU list the servers are pinned to (a platform driver\'s placement)' },
  { name: 'INGRESS_CORES', by: 'scripts', meaning: 'a fractional ingress CPU amount, for the placement warning (local driver)' },
  { name: 'PLACEMENT_SHARED', by: 'scripts', meaning: 'what shares k6\'s CPUs, for the placement warning (local driver)' },
  { name: 'NAME', by: 'scripts', meaning: 'render_distributed.sh: the Job or TestRun\'s name (default from TESTID)' },
  { name: 'IB_CACHE', by: 'test', meaning: 'where builds, the venv and images are cached (default ~/.cache/ingress-bench): a suite of its own' },
  { name: 'IB_LAB_STATE', by: 'test', meaning: 'the lab\'s state directory (default /run/ingress-bench/lab)' },
  { name: 'IB_CLUSTER_STATE', by: 'test', meaning: 'the local cluster\'s state directory (default /run/ingress-bench/cluster)' },
  { name: 'IB_CGROUP_MOUNTS', by: 'test', meaning: 'the mount table cgroup.sh reads (default /proc/mounts): other layouts tried' },
  { name: 'IB_BUILD_GOGC', by: 'test', meaning: 'the Go compiler\'s GOGC for builds (default 400)' },
  { name: 'OVERLAYS_DIR', by: 'test', meaning: 'validate.sh: the overlays checked (default overlays/): broken ones tried' },
  { name: 'BENCH_FAILPOINT', by: 'test', meaning: 'bench.sh: signal-at-fork, a signal between k6\'s fork and its job' },
  { name: 'LAB_FAILPOINT', by: 'test', meaning: 'lab.sh: a step of up at which it fails, to prove its cleanup' },
  { name: 'CLUSTER_KEEP_FAILED', by: 'test', meaning: 'cluster.sh: keep a failed up for inspection instead of taking it down' },
  { name: 'TMPDIR', by: 'system', meaning: 'temporary files' },
  { name: 'XDG_CACHE_HOME', by: 'system', meaning: 'the cache\'s parent (IB_CACHE)' },
  { name: 'GOFLAGS', by: 'system', meaning: 'the go command\'s flags, kept beside ours' },
  { name: 'KUBERNETES_SERVICE_HOST', by: 'system', meaning: 'set in a pod: distributed.sh run inside a cluster' },
  { name: 'K6_OUT', by: 'k6', meaning: 'a user\'s own k6 output, passed on beside ours' },
  { name: 'K6_HTTP_DEBUG', by: 'k6', meaning: 'k6/http\'s request dumps: refused with ENGINE=native, which has none' },
  { name: 'K6_WEB_DASHBOARD_PORT', by: 'k6', meaning: 'the k6 web dashboard\'s port (default 5665)' },
];

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
    case 'text':
      if (!s.pattern.test(text)) fail(`${s.name} must be ${s.rule}, got '${raw}'`);
      return text;
    default:
      return fail(`setting ${s.name} has an unknown type '${s.type}' in k6/lib/settings.js`);
  }
}

// setting(env, name, fallback) -> the validated value of NAME in env, or `fallback` (else the
// registry's default, typed) when it is unset or empty.
export function setting(env, name, fallback) {
  const s = BY_NAME[name] || fail(`${name} is not in the settings registry (k6/lib/settings.js)`);
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
