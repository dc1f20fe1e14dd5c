// bench:change CHANGE=route on an ingress you run (bench/run/change_yours.py). IB_ROUTE, as JSON
// {url, host, header, every_s, for_s}: GETs url with Host host, each request on a connection of
// its own, every every_s, until the added route answers (a 200, with header [NAME, VALUE] when
// given) or for_s pass. Read from standard input by a k6 pod on the ingress's cluster, so it
// imports nothing of ours. A line "@@route {t, status, added, sent}" (t: unix ms of the answer,
// sent: the requests so far) at the first answer and at each new one, as it comes.
import http from "k6/http";
import { sleep } from "k6";

export const options = { vus: 1, iterations: 1, insecureSkipTLSVerify: true, noConnectionReuse: true, maxRedirects: 0 };

export default function () {
  const p = JSON.parse(__ENV.IB_ROUTE);
  const end = Date.now() + p.for_s * 1000;
  const [name, value] = p.header || [];
  let last;
  let sent = 0;
  while (Date.now() < end) {
    const r = http.get(p.url, { headers: { Host: p.host }, timeout: "2s", responseType: "none" });
    sent += 1;
    const added = r.status === 200 && (!name || r.headers[name] === value);
    const now = `${r.status} ${added}`;
    if (now !== last) {
      console.log(`@@route ${JSON.stringify({ t: Date.now(), status: r.status, added, sent })}`);
      last = now;
    }
    if (added) return;
    sleep(p.every_s);
  }
}
