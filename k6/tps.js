// How many TLS handshakes per second does the ingress complete? Seed 002's TPS: a new TLS
// 1.2 connection for every request (Connection: close), an empty response, so the handshake is
// the work. Settings: docs/reference/settings.md.
//
// The profile is this scenario's defaults and its headline figure, as JSON: k6 reads it here,
// and the runner, report, compare, sweep and calibrate read it from this file too
// (bench/run/cases.py profiles()). The request loop is k6/lib/scenario.js, shared.
export const profile = {
  "payload": "0kb", "scheme": "https", "tls": true, "reuse": false, "discardBodies": false, "p95": 250, "p99": 500,
  "headline": {"key": "rps", "title": "TPS", "path": "result.rps", "unit": "handshakes/s", "format": ",.0f"}
};

import { scenario } from './lib/scenario.js';

const s = scenario('tps', profile);
export const options = s.options;
export const setup = s.setup;
export const teardown = s.teardown;
export default s.iteration;
export const handleSummary = s.handleSummary;
