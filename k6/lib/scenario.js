// The one request loop every scenario shares; a scenario file only names its profile.
import http from 'k6/http';
import { check } from 'k6';
import { parseConfig } from './config.js';
import { buildOptions } from './options.js';
import { summaryFiles } from './summary.js';

export function scenario(name) {
  const cfg = parseConfig(__ENV, name);
  const params = {
    headers: { Host: cfg.host, ...(cfg.reuse ? {} : { Connection: 'close' }) },
    // Body-less scenarios would otherwise keep 1 MB per response in memory.
    responseType: cfg.discardBodies ? 'none' : 'binary',
  };
  const bodyOk = (res) => (cfg.discardBodies
    ? Number(res.headers['Content-Length']) === cfg.bodyBytes
    : (res.body ? res.body.byteLength : 0) === cfg.bodyBytes);
  const checks = {
    'status is 200': (res) => res.status === 200,
    [`body is ${cfg.bodyBytes} B`]: bodyOk,
  };

  return {
    options: buildOptions(cfg),
    // Fail fast, before load starts, when the target does not answer as the scenario expects.
    setup() {
      const res = http.get(cfg.url, { ...params, timeout: '5s' });
      if (res.status !== 200 || !bodyOk(res)) {
        throw new Error(`target ${cfg.url} not ready: status ${res.status}${res.error ? ` (${res.error})` : ''}`);
      }
    },
    iteration() {
      check(http.get(cfg.url, params), checks);
    },
    handleSummary: (data) => summaryFiles(data, cfg),
  };
}
