// How many requests per second does the ingress serve? Seed 002's RPS: 1 KB responses over
// keep-alive connections, as `wrk -c N -d 180s` measured them. The closed model by default
// (RATE=N: the open model); settings: docs/reference/settings.md.
//
// The profile is this scenario's defaults and its headline figure, as JSON: k6 reads it here,
// and the runner, report, compare, sweep and calibrate read it from this file too
// (bench/run/cases.py profiles()). The request loop is k6/lib/scenario.js, shared.
export const profile = {
  "payload": "1kb", "scheme": "http", "reuse": true, "discardBodies": false, "p95": 250, "p99": 500,
  "headline": {"key": "rps", "title": "RPS", "path": "result.rps", "unit": "req/s", "format": ",.0f"}
};

import { scenario } from './lib/scenario.js';

const s = scenario('rps', profile);
export const options = s.options;
export const setup = s.setup;
export const teardown = s.teardown;
export default s.iteration;
export const handleSummary = s.handleSummary;
