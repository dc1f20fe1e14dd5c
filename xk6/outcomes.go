package ingressbench

import (
	"context"
	"crypto/tls"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.k6.io/k6/lib"
	"go.k6.io/k6/metrics"
)

// outcomes are the run's requests as k6/http's Rates and Trend summaries would state them,
// counted instead of kept: requests, failed ones (http_req_failed's rule), the checks' passes
// and fails, the latency's sum and maximum, the TLS handshakes' count and sum. Each emitter
// counts its own and adds them here when it hands its samples to k6 (every 10 ms at most), so
// the hot path touches no shared counter but the histogram's. Published each second with
// the percentiles, as the Gauges the thresholds judge (the run so far; the teardown's last
// value covers every request), and exported whole for the summary.
type outcomes struct {
	requests, failed       atomic.Int64
	checks                 sync.Map // check name -> *[2]atomic.Int64: passes, fails
	latencyNs, maxNs       atomic.Int64
	handshakes, tlsNs      atomic.Int64
	failedRate, checksRate atomic.Pointer[metrics.Metric]
	everySecond
	tls sync.Map // what a handshake negotiated ("TLS 1.3 TLS_AES_128_GCM_SHA256 X25519 http/1.1 full") -> *atomic.Int64
}

// negotiated counts a handshake by what it negotiated: version, cipher suite, key exchange
// group (a TLS 1.2 resumption exchanges none: Go states the group of the session's full
// handshake), ALPN protocol, and whether it resumed a session.
func (o *outcomes) negotiated(cs tls.ConnectionState) {
	group := "-"
	if cs.CurveID != 0 {
		group = cs.CurveID.String()
	}
	alpn, how := cs.NegotiatedProtocol, "full"
	if alpn == "" {
		alpn = "-"
	}
	if cs.DidResume {
		how = "resumed"
	}
	key := strings.Join([]string{tls.VersionName(cs.Version), tls.CipherSuiteName(cs.CipherSuite), group, alpn, how}, " ")
	v, _ := o.tls.LoadOrStore(key, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

var run outcomes

// The Gauges of the rates k6/http's thresholds read from Rates (k6/lib/options.js).
const (
	failedRateMetric = "bench_http_req_failed_rate"
	checksRateMetric = "bench_checks_rate"
)

func (o *outcomes) register(r *metrics.Registry) error {
	for name, p := range map[string]*atomic.Pointer[metrics.Metric]{failedRateMetric: &o.failedRate, checksRateMetric: &o.checksRate} {
		m, err := r.NewMetric(name, metrics.Gauge)
		if err != nil {
			return err
		}
		p.Store(m)
	}
	return nil
}

// tally is one emitter's share since it last added it to the run's.
type tally struct {
	requests, failed, latencyNs, maxNs, handshakes, tlsNs int64
	checks                                                map[string]*[2]int64
}

func (t *tally) add(dur time.Duration, res result, checks [2]string, ok [2]bool) {
	t.requests++
	if res.failed() {
		t.failed++
	}
	t.latencyNs += int64(dur)
	t.maxNs = max(t.maxNs, int64(dur))
	if res.tlsTime > 0 {
		t.handshakes++
		t.tlsNs += int64(res.tlsTime)
	}
	for i, name := range checks {
		if name == "" {
			continue
		}
		c := t.checks[name]
		if c == nil {
			c = &[2]int64{}
			t.checks[name] = c
		}
		if ok[i] {
			c[0]++
		} else {
			c[1]++
		}
	}
}

// flush adds t to the run's and empties it.
func (o *outcomes) flush(t *tally) {
	if t.requests == 0 {
		return
	}
	o.requests.Add(t.requests)
	o.failed.Add(t.failed)
	o.latencyNs.Add(t.latencyNs)
	for m := o.maxNs.Load(); t.maxNs > m && !o.maxNs.CompareAndSwap(m, t.maxNs); m = o.maxNs.Load() {
	}
	o.handshakes.Add(t.handshakes)
	o.tlsNs.Add(t.tlsNs)
	for name, c := range t.checks {
		v, _ := o.checks.LoadOrStore(name, &[2]atomic.Int64{})
		run := v.(*[2]atomic.Int64)
		run[0].Add(c[0])
		run[1].Add(c[1])
		c[0], c[1] = 0, 0
	}
	checks := t.checks
	*t = tally{checks: checks}
}

// rates are http_req_failed's and checks' as k6's Rates state them: the share of requests
// that failed, the share of checks that passed (0 of none: no request checked fails
// `value==1`, as it should).
func (o *outcomes) rates() (failed, checks float64) {
	if n := o.requests.Load(); n > 0 {
		failed = float64(o.failed.Load()) / float64(n)
	}
	var pass, all int64
	o.checks.Range(func(_, v any) bool {
		c := v.(*[2]atomic.Int64)
		pass += c[0].Load()
		all += c[0].Load() + c[1].Load()
		return true
	})
	if all > 0 {
		checks = float64(pass) / float64(all)
	}
	return failed, checks
}

// publish pushes the rates as Gauges, when a second has passed since they last were, or final.
func (o *outcomes) publish(ctx context.Context, st *lib.State, final bool) {
	if !o.due(final) {
		return
	}
	failed, checks := o.rates()
	now, tags := time.Now(), st.Tags.GetCurrentValues().Tags
	metrics.PushIfNotDone(ctx, st.Samples, metrics.Samples{
		{TimeSeries: metrics.TimeSeries{Metric: o.failedRate.Load(), Tags: tags}, Time: now, Value: failed},
		{TimeSeries: metrics.TimeSeries{Metric: o.checksRate.Load(), Tags: tags}, Time: now, Value: checks},
	})
}

// export is the run's outcomes for the summary (k6/lib/summary.js): what k6's http_req_failed,
// checks, http_req_duration's sum and max and http_req_tls_handshaking's sum would say of the
// load's requests.
func (o *outcomes) export() map[string]any {
	checks := map[string]any{}
	o.checks.Range(func(k, v any) bool {
		c := v.(*[2]atomic.Int64)
		checks[k.(string)] = map[string]any{"passes": c[0].Load(), "fails": c[1].Load()}
		return true
	})
	failed, rate := o.rates()
	return map[string]any{"requests": o.requests.Load(), "failed": o.failed.Load(), "failed_rate": failed, "checks": checks, "checks_rate": rate,
		"latency_ms_sum": float64(o.latencyNs.Load()) / 1e6, "max_ms": float64(o.maxNs.Load()) / 1e6,
		"tls_handshakes": o.handshakes.Load(), "tls_handshake_ms_sum": float64(o.tlsNs.Load()) / 1e6, "tls_negotiated": o.tlsExport()}
}

// tlsExport is the handshakes by what they negotiated: {"TLS 1.3 TLS_AES_128_GCM_SHA256
// X25519 http/1.1 full": n, ...}.
func (o *outcomes) tlsExport() map[string]any {
	out := map[string]any{}
	o.tls.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}
