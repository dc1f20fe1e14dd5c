// bench:change CHANGE=route on an ingress you run (bench/run/change_yours.py): GETs IB_ROUTE_URL
// with Host IB_ROUTE_HOST, each request on a connection of its own, every IB_ROUTE_EVERY_S,
// until the added route answers (a 200, with the header IB_ROUTE_HEADER=VALUE when given) or
// IB_ROUTE_S pass. Read from standard input by a k6 pod on the ingress's cluster, so it
// imports nothing of ours. A line "@@route {t, status, added, sent}" (t: unix ms of the answer,
// sent: the requests so far) at the first answer and at each new one, as it comes.
import http from "k6/http";
import { sleep } from "k6";

export const options = { vus: 1, iterations: 1, insecureSkipTLSVerify: true, noConnectionReuse: true, maxRedirects: 0 };

export default function () {
  const end = Date.now() + Number(__ENV.IB_ROUTE_S) * 1000;
  const [name, value] = (__ENV.IB_ROUTE_HEADER || "").split("=");
  let last;
  let sent = 0;
  while (Date.now() < end) {
    const r = http.get(__ENV.IB_ROUTE_URL, { headers: { Host: __ENV.IB_ROUTE_HOST }, timeout: "2s", responseType: "none" });
    sent += 1;
    const added = r.status === 200 && (!name || r.headers[name] === value);
    const now = `${r.status} ${added}`;
    if (now !== last) {
      console.log(`@@route ${JSON.stringify({ t: Date.now(), status: r.status, added, sent })}`);
      last = now;
    }
    if (added) return;
    sleep(Number(__ENV.IB_ROUTE_EVERY_S));
  }
}
