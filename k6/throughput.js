// How many Gbit/s of large responses does the ingress deliver? Seed 002's throughput: 1 MB
// responses over keep-alive connections; bodies are counted and discarded, so 1000 VUs do
// not hold 1000 MB. Settings: docs/reference/settings.md.
//
// The profile is this scenario's defaults and its headline figure, as JSON: k6 reads it here,
// and the runner, report, compare, sweep and calibrate read it from this file too
// (bench/run/cases.py profiles()). The request loop is k6/lib/scenario.js, shared.
export const profile = {
  "payload": "1mb", "scheme": "http", "reuse": true, "discardBodies": true, "p95": 2000, "p99": 4000,
  "headline": {"key": "gbit", "title": "Gbit/s", "path": "result.gbit_per_s", "unit": "Gbit/s", "format": ".3f"}
};

import { scenario } from './lib/scenario.js';

const s = scenario('throughput', profile);
export const options = s.options;
export const setup = s.setup;
export const teardown = s.teardown;
export default s.iteration;
export const handleSummary = s.handleSummary;
