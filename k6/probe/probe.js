// bench:migrate's behaviour probes (bench/run/migrate.py): each request of IB_PROBES once, on a
// connection of its own, and what came back: the status, the headers, the body's size. Run where
// the load runs: by the k6 here in the client's network namespace, or read from standard input
// by a k6 pod on the ingress's cluster; so it imports nothing. Its one output line on stdout:
// "@@probes" and the answers as JSON, in the requests' order.
import http from "k6/http";

// IB_PROBES: [{method, url, headers}]; a redirect is an answer, not followed.
const PROBES = JSON.parse(__ENV.IB_PROBES || "[]");

export const options = { vus: 1, iterations: 1, insecureSkipTLSVerify: true, noConnectionReuse: true, maxRedirects: 0 };

export function setup() {
  return PROBES.map((p) => {
    const r = http.request(p.method, p.url, p.method === "POST" ? "" : null,
      { headers: p.headers, timeout: "5s", responseType: "binary" });
    if (r.status === 0) return { status: null, error: r.error, body: null, headers: {} };
    const headers = {};
    for (const [k, v] of Object.entries(r.headers)) headers[k.toLowerCase()] = v;
    return { status: r.status, body: r.body ? r.body.byteLength : 0, headers };
  });
}

export default function () {}

export function handleSummary(data) {
  return { stdout: `@@probes ${JSON.stringify(data.setup_data)}\n` };
}
