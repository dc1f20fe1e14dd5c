package ingressbench

import (
	"context"
	"math/bits"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.k6.io/k6/lib"
	"go.k6.io/k6/metrics"
)

// The run's latency percentiles as Gauges, for thresholds that cost the same in minute 30
// as in minute 1. A threshold on the http_req_duration Trend sorts every value stored so
// far at each evaluation (every 2 s): at 40k requests/s that grows past a core within
// minutes. These come from a fixed-size histogram of the whole run instead.
// runLatency is http_req_duration's (from the due time in the open model); serviceLatency,
// the open model's service time (from the real send: what the target took once asked);
// tlsLatency, the TLS handshakes' (one per new connection, none for a reused one).
//
// The run's requests are never k6 samples one by one (unless REQUEST_SAMPLES asks): k6 keeps
// every value of a Trend (http_req_duration, http_req_tls_handshaking, twice with the
// expected_response submetric), memory that grows with the run (584 MiB in 180 s at 50
// connections). Its outputs get these histograms instead, as Prometheus' classic histograms:
// each second, per bucket bound (the tag le, in seconds), a Counter of the requests at or
// below it, whose rates histogram_quantile reads (the live page, bench/report/prometheus.py).
var (
	runLatency = histogram{gauges: [2]string{"bench_http_req_duration_p95", "bench_http_req_duration_p99"},
		buckets: "bench_http_req_duration_buckets"}
	serviceLatency = histogram{gauges: [2]string{"bench_http_req_service_p95", "bench_http_req_service_p99"}}
	tlsLatency     = histogram{buckets: "bench_http_req_tls_handshaking_buckets"}
)

// Log-linear buckets of nanoseconds: 128 per power of two, so a percentile is reported
// within 1/256 (0.4 %) of the true value; 4,480 buckets reach 2^40 ns (18 minutes).
const (
	subBits    = 7
	subBuckets = 1 << subBits
	maxShift   = 33
	nBuckets   = subBuckets * (maxShift + 2)
)

func bucketOf(ns int64) int {
	v := uint64(max(ns, 0))
	if v < 2*subBuckets {
		return int(v)
	}
	shift := bits.Len64(v) - subBits - 1
	if shift > maxShift {
		return nBuckets - 1
	}
	return subBuckets*shift + int(v>>shift)
}

// bucketValue is the middle of bucket i, in nanoseconds.
func bucketValue(i int) float64 {
	if i < 2*subBuckets {
		return float64(i)
	}
	shift := i/subBuckets - 1
	lower := uint64(i-subBuckets*shift) << shift
	return float64(lower) + float64(uint64(1)<<shift)/2
}

// The classic buckets' bounds: eight per power of two (1, 1.125, ... 1.875 times it) from
// 2^14 ns (16 µs) to 2^36 ns (69 s), each on a bound of the fine buckets, so the count below
// it is exact; histogram_quantile interpolates within a bucket 12.5 % wide at most, about
// the resolution of k6's native histograms (2^(1/8), 9 %).
const (
	coarseFirst   = 14
	coarseLast    = 36
	coarsePerOct  = 8
	nCoarseBounds = (coarseLast-coarseFirst)*coarsePerOct + 1
)

// coarseBound is the i-th bound in nanoseconds and the fine bucket that starts there.
func coarseBound(i int) (ns uint64, fine int) {
	shift := coarseFirst + i/coarsePerOct
	ns = uint64(coarsePerOct+i%coarsePerOct) << shift / coarsePerOct
	return ns, bucketOf(int64(ns))
}

// histogram is shared by every VU of the run (one k6 process runs one test); its p95 and p99
// are published as the Gauges gauges[0] and gauges[1] when named, its classic buckets as the
// Counter buckets when named.
type histogram struct {
	gauges  [2]string
	buckets string
	counts  [nBuckets]atomic.Uint64
	everySecond
	mu       sync.Mutex // publications in order: the Gauge keeps the last value it gets
	p95, p99 atomic.Pointer[metrics.Metric]
	le       atomic.Pointer[metrics.Metric]
	sent     [nCoarseBounds + 1]uint64 // the classic buckets' counts published so far (the last: +Inf)
}

func (h *histogram) add(d time.Duration) { h.counts[bucketOf(int64(d))].Add(1) }

// percentiles in milliseconds, for each of ps (in [0, 1]), by the rule of k6's Trend: the
// value at 0-based rank p*(n-1) of the sorted values, interpolated linearly between the two
// ranks around it. The Gauges then state the same statistic as the summary's p(95) and p(99)
// (and as a Trend threshold on the JS path): at the tail of a short run, one rank apart can
// be several percent. Each of the two ranks is read as the middle of its bucket, within
// 1/256 of the value there.
func (h *histogram) percentiles(ps ...float64) []float64 {
	// cum[i]: the values in buckets 0..i, so the value of 0-based rank r is in the first
	// bucket whose cum exceeds r.
	var cum [nBuckets]uint64
	var total uint64
	for i := range cum {
		total += h.counts[i].Load()
		cum[i] = total
	}
	out := make([]float64, len(ps))
	if total == 0 {
		return out
	}
	at := func(rank uint64) float64 {
		return bucketValue(sort.Search(nBuckets, func(i int) bool { return cum[i] > rank }))
	}
	for j, p := range ps {
		r := p * (float64(total) - 1) // k6's expression, so the same float rounding
		lo := uint64(r)
		v := at(lo)
		if f := r - float64(lo); f > 0 { // then lo+1 < total
			v += (at(lo+1) - v) * f
		}
		out[j] = v / float64(time.Millisecond)
	}
	return out
}

// export is the run's histogram as summary.json carries it: the middle of every non-empty
// bucket in milliseconds with its count, ascending, and the bound on a value's error; and its
// percentiles, the run's headline (k6/lib/summary.js). Runs
// of the same binary share the buckets, so a distributed run's segments merge by adding the
// counts of equal values (bench/report/summary.py) into the percentiles of all their requests.
func (h *histogram) export() map[string]any {
	buckets := [][2]float64{}
	for i := range h.counts {
		if n := h.counts[i].Load(); n > 0 {
			buckets = append(buckets, [2]float64{bucketValue(i) / float64(time.Millisecond), float64(n)})
		}
	}
	ps := h.percentiles(0.5, 0.95, 0.99)
	return map[string]any{"relative_error": 1.0 / (2 * subBuckets), "buckets": buckets,
		"p50_ms": ps[0], "p95_ms": ps[1], "p99_ms": ps[2]}
}

// everySecond paces a publication: due once a second has passed since the last (one caller
// of many wins it) or when final.
type everySecond struct{ last atomic.Int64 } // unix ns of the last publication

func (e *everySecond) due(final bool) bool {
	now := time.Now().UnixNano()
	last := e.last.Load()
	return final || (now-last >= int64(time.Second) && e.last.CompareAndSwap(last, now))
}

// publish pushes the percentiles as Gauge samples and the classic buckets' new counts, when a
// second has passed since the last publication or when final; one VU at a time, so the last
// value k6 gets is the newest.
func (h *histogram) publish(ctx context.Context, st *lib.State, final bool) {
	if h == &serviceLatency && !openModel.Load() {
		return // a closed-model run: its latency is the service time
	}
	if !h.due(final) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now, tags := time.Now(), st.Tags.GetCurrentValues().Tags
	var samples metrics.Samples
	if m := h.p95.Load(); m != nil {
		p := h.percentiles(0.95, 0.99)
		samples = append(samples,
			metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: m, Tags: tags}, Time: now, Value: p[0]},
			metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: h.p99.Load(), Tags: tags}, Time: now, Value: p[1]})
	}
	// The classic buckets from the first value on: a histogram that has none (the TLS one of
	// a plain-HTTP run) adds no series.
	if m := h.le.Load(); m != nil {
		if cum := h.cumulative(); cum[nCoarseBounds] > 0 {
			for i, n := range cum {
				// Every bound each time, zeros too: histogram_quantile needs them all in a window.
				samples = append(samples, metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: m, Tags: tags.With("le", leTag(i))},
					Time: now, Value: float64(n - h.sent[i])})
				h.sent[i] = n
			}
		}
	}
	metrics.PushIfNotDone(ctx, st.Samples, samples)
}

// cumulative is the classic buckets' counts: of the values below each bound, then of all (+Inf).
func (h *histogram) cumulative() [nCoarseBounds + 1]uint64 {
	var out [nCoarseBounds + 1]uint64
	var n uint64
	b := 0
	for i := range nCoarseBounds {
		_, fine := coarseBound(i)
		for ; b < fine; b++ {
			n += h.counts[b].Load()
		}
		out[i] = n
	}
	for ; b < nBuckets; b++ {
		n += h.counts[b].Load()
	}
	out[nCoarseBounds] = n
	return out
}

// leTag is the i-th bound in seconds as Prometheus writes it, +Inf after the last.
func leTag(i int) string {
	if i == nCoarseBounds {
		return "+Inf"
	}
	ns, _ := coarseBound(i)
	return strconv.FormatFloat(float64(ns)/1e9, 'g', -1, 64)
}

// register makes the Gauges and the Counter known before k6 parses the thresholds on them.
func (h *histogram) register(r *metrics.Registry) error {
	for name, m := range map[string]*atomic.Pointer[metrics.Metric]{h.gauges[0]: &h.p95, h.gauges[1]: &h.p99} {
		if name == "" {
			continue
		}
		metric, err := r.NewMetric(name, metrics.Gauge, metrics.Time)
		if err != nil {
			return err
		}
		m.Store(metric)
	}
	if h.buckets != "" {
		metric, err := r.NewMetric(h.buckets, metrics.Counter)
		if err != nil {
			return err
		}
		h.le.Store(metric)
	}
	return nil
}
