// Package ingressbench is the k6 extension k6/x/ingressbench: the request hot loop of the
// rps, tps and throughput scenarios run natively, a raw HTTP/1.1 client per connection (keep-
// alive ones in one epoll loop per VU, eloop.go; a new connection per request on Go's
// netpoller). k6 gets http_reqs with k6/http's tags; latency, failures and checks as bounded
// histograms and counts (latency.go, outcomes.go), whose Gauges the thresholds judge, so that
// its memory does not grow with the run. The JS k6/http path stays the reference.
package ingressbench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.k6.io/k6/js/modules"
	"go.k6.io/k6/lib"
	"go.k6.io/k6/metrics"
)

// Version is exported to scripts and sent as the User-Agent's version.
const Version = "0.1.0"

func init() {
	modules.Register("k6/x/ingressbench", new(rootModule))
}

type rootModule struct{}

// Registering the engine's own metrics, once per run (one k6 process runs one test); the
// error names a name another metric type took. openModel: some connection runs paced.
var (
	registerOnce                             sync.Once
	errRegister                              error
	sendsLate, sendsClientLate, sendsDropped *metrics.Metric
	openModel                                atomic.Bool
)

// The open model's counters: sends that started more than lateTolerance after they were
// due (any cause: mostly a connection the target still held), the part of them the client
// itself delayed (connection free and slot due, the send still later than the tolerance:
// the client's CPU or timers fell behind), and sends due before the run's end never made.
const (
	lateMetric       = "bench_sends_late"
	clientLateMetric = "bench_sends_client_late"
	droppedMetric    = "bench_sends_dropped"
)

func register(r *metrics.Registry) (err error) {
	for _, h := range []*histogram{&runLatency, &serviceLatency, &tlsLatency} {
		if err = h.register(r); err != nil {
			return err
		}
	}
	if err = run.register(r); err != nil {
		return err
	}
	if sendsLate, err = r.NewMetric(lateMetric, metrics.Counter); err != nil {
		return err
	}
	if sendsClientLate, err = r.NewMetric(clientLateMetric, metrics.Counter); err != nil {
		return err
	}
	sendsDropped, err = r.NewMetric(droppedMetric, metrics.Counter)
	return err
}

// moduleInstance is one VU's: its connections live across iterations (keep-alive).
type moduleInstance struct {
	vu      modules.VU
	t       *target
	workers []*worker
	loop    *eloop // keep-alive HTTP(S): one epoll loop instead of workers
}

// worker is one connection of the VU and its samples; s is its schedule in the open model
// (nil: closed model, each request sent when the previous one is answered).
type worker struct {
	c                         conn
	e                         *emitter
	s                         *schedule
	late, clientLate, dropped int64     // this call's, open model
	free                      time.Time // open model: when the previous response ended
}

func (*rootModule) NewModuleInstance(vu modules.VU) modules.Instance {
	if env := vu.InitEnv(); env != nil {
		registerOnce.Do(func() { errRegister = register(env.Registry) })
	}
	return &moduleInstance{vu: vu}
}

func (m *moduleInstance) Exports() modules.Exports {
	return modules.Exports{Named: map[string]any{"version": Version, "run": m.run, "publishLatency": m.publishLatency, "probe": m.probe,
		// For handleSummary: the run's latency histogram (http_req_duration's), mergeable.
		"latencyHistogram": func() map[string]any { return runLatency.export() },
		// For handleSummary: what k6/http's Rates and Trends would say of the load's requests.
		"outcomes": func() map[string]any { return run.export() },
		// For handleSummary: the run's 100 ms slots (timeline.go).
		"timeline": func() map[string]any { return timeline.export() }}}
}

// publishLatency sends the whole run's percentiles (bench_http_req_duration_p95/p99), rates
// and buckets, for the teardown: after every request, so the thresholds judge all of them.
func (m *moduleInstance) publishLatency() error {
	st := m.vu.State()
	if st == nil {
		return errors.New("ingressbench.publishLatency() belongs in teardown, not the init context")
	}
	publish(m.vu.Context(), st, true)
	return nil
}

// probe is setup's readiness request by the load's own client, with the load's TLS offers:
// one GET on a new connection of the engine's own, HTTP/2 (a stream: k6/http is held to
// HTTP/1.1 and has no h2c) or HTTP/1.1, on k6's dialer, counted in http_reqs as k6/http
// counts its own. Its connection negotiates as the load's do (the groups k6/http cannot
// choose), so a server's record of it reads as theirs. OPTS: http2 (bool) and tlsGroup (a
// TLS_GROUP value), checked as run()'s. What it answered: status, body bytes, protocol, error.
func (m *moduleInstance) probe(url, host string, timeoutMs float64, opts map[string]any) (map[string]any, error) {
	st := m.vu.State()
	if st == nil {
		return nil, errors.New("ingressbench.probe() belongs in setup, not the init context")
	}
	http2, group := false, ""
	for k, v := range opts {
		var ok bool
		switch k {
		case "http2":
			http2, ok = v.(bool)
		case "tlsGroup":
			group, ok = v.(string)
		default:
			return nil, fmt.Errorf("ingressbench.probe: unknown option %q (known: http2, tlsGroup)", k)
		}
		if !ok {
			return nil, fmt.Errorf("ingressbench.probe: option %s has the wrong kind (%T)", k, v)
		}
	}
	t, err := newTarget(url, host, http2, 0, time.Duration(timeoutMs*float64(time.Millisecond)))
	if err == nil {
		err = t.withTLS(st, group, false, 1)
	}
	if err != nil {
		return nil, fmt.Errorf("ingressbench.probe: %w", err)
	}
	out := map[string]any{"status": 0, "bodyBytes": 0, "proto": "HTTP/1.1", "error": ""}
	var res result
	if http2 {
		t.withHTTP2(1)
		out["proto"], res = "HTTP/2.0", probeH2(m.vu.Context(), st, t)
	} else {
		c := &conn{}
		res, _ = c.do(m.vu.Context(), st, t)
		c.close()
	}
	if res.err != nil {
		out["error"] = res.err.Error()
	}
	out["status"], out["bodyBytes"] = res.status, res.bodyBytes
	e := &emitter{st: st, t: t, byStatus: map[int]*metrics.TagSet{}}
	push(m.vu.Context(), st.Samples, metrics.Samples{{TimeSeries: metrics.TimeSeries{Metric: st.BuiltinMetrics.HTTPReqs,
		Tags: e.tags(res.status)}, Time: time.Now(), Value: 1}})
	return out, nil
}

// runOptions are run()'s argument, checked: a key it does not know or a value of the wrong
// kind stops the script with one error naming it, rather than a default silently applied.
type runOptions struct {
	url, host, checkStatus, checkBody, tlsGroup string
	reuse, requestSamples, tlsResumption, http2 bool
	bodyBytes, sliceMs, endMs, connections      float64
	streams                                     float64 // HTTP/2's per connection
	// A request's limit from its dial to its last byte (0: none); the timeline's origin.
	timeoutMs, startMs float64
	// The open model (rate > 0): the test's requests per second, its connections, the first
	// of this VU's (0-based) and the schedule's origin (unix ms, the scenario's start).
	rate, totalConnections, firstConnection float64
}

var optionNames = "url, host, reuse, requestSamples, tlsGroup, tlsResumption, http2, streams, bodyBytes, connections, sliceMs, endMs, timeoutMs, checkStatus, checkBody, rate, totalConnections, firstConnection, startMs"

func parseOptions(o map[string]any) (runOptions, error) {
	r := runOptions{reuse: true, connections: 1, streams: 1}
	strs := map[string]*string{"url": &r.url, "host": &r.host, "checkStatus": &r.checkStatus, "checkBody": &r.checkBody, "tlsGroup": &r.tlsGroup}
	nums := map[string]*float64{"bodyBytes": &r.bodyBytes, "connections": &r.connections, "sliceMs": &r.sliceMs, "endMs": &r.endMs,
		"timeoutMs": &r.timeoutMs, "rate": &r.rate, "totalConnections": &r.totalConnections, "firstConnection": &r.firstConnection, "startMs": &r.startMs, "streams": &r.streams}
	for k, v := range o {
		var err error
		if p, ok := strs[k]; ok {
			*p, err = stringOption(k, v)
		} else if p, ok := nums[k]; ok {
			*p, err = numberOption(k, v)
		} else if p, ok := map[string]*bool{"reuse": &r.reuse, "requestSamples": &r.requestSamples, "tlsResumption": &r.tlsResumption, "http2": &r.http2}[k]; ok {
			if *p, ok = v.(bool); !ok {
				err = fmt.Errorf("%s must be true or false, got %v", k, v)
			}
		} else {
			err = fmt.Errorf("unknown option '%s' (known: %s)", k, optionNames)
		}
		if err == nil && (k == "connections" || k == "streams") && (*nums[k] < 1 || *nums[k] != float64(int(*nums[k]))) {
			err = fmt.Errorf("%s must be a whole number of at least 1, got %v", k, v)
		}
		if err != nil {
			return r, fmt.Errorf("ingressbench.run: %w", err)
		}
	}
	// HTTP/2 runs in the event loop: keep-alive connections, closed model.
	switch {
	case r.streams > 1 && !r.http2:
		return r, errors.New("ingressbench.run: streams are HTTP/2's: set http2")
	case r.http2 && !r.reuse:
		return r, errors.New("ingressbench.run: http2 runs on keep-alive connections (reuse)")
	case r.http2 && r.rate > 0:
		return r, errors.New("ingressbench.run: http2 runs the closed model only, not a rate")
	}
	if r.rate > 0 {
		// The schedule needs all of it: a missing part would send at another rate than asked.
		switch {
		case r.sliceMs <= 0 || r.endMs <= 0 || r.startMs <= 0:
			return r, errors.New("ingressbench.run: rate needs sliceMs, startMs and endMs")
		case r.totalConnections < r.firstConnection+r.connections || r.firstConnection != float64(int64(r.firstConnection)):
			return r, fmt.Errorf("ingressbench.run: firstConnection %v + connections %v must be whole and at most totalConnections %v",
				r.firstConnection, r.connections, r.totalConnections)
		}
	}
	return r, nil
}

func stringOption(k string, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s must be a string, got %v", k, v)
	}
	return s, nil
}

func numberOption(k string, v any) (float64, error) {
	n := -1.0
	switch x := v.(type) {
	case int64:
		n = float64(x)
	case float64:
		n = x
	}
	if !(n >= 0) { // also NaN
		return 0, fmt.Errorf("%s must be a number of at least 0, got %v", k, v)
	}
	return n, nil
}

// setup makes the VU's target and its connections at its first call: the event loop when the
// run is sliced and the target allows it, else one worker per connection (each with its slots
// in the open model).
func (m *moduleInstance) setup(st *lib.State, opts runOptions) error {
	t, err := newTarget(opts.url, opts.host, opts.reuse, int64(opts.bodyBytes), time.Duration(opts.timeoutMs*float64(time.Millisecond)))
	if err == nil {
		err = t.withTLS(st, opts.tlsGroup, opts.tlsResumption, int(opts.connections))
	}
	if err == nil && opts.http2 {
		if !(opts.sliceMs > 0 && opts.endMs > 0 && eloopFor(t)) {
			err = errors.New("http2 runs in the event loop: sliceMs and endMs, on Linux")
		}
		t.withHTTP2(int(opts.streams))
	}
	if err != nil {
		return fmt.Errorf("ingressbench.run: %w", err)
	}
	m.t = t
	newEmitter := func() *emitter {
		return &emitter{st: st, t: t, checkStatus: opts.checkStatus, checkBody: opts.checkBody, perRequest: opts.requestSamples,
			tally:    tally{checks: map[string]*[2]int64{}},
			byStatus: map[int]*metrics.TagSet{}, checkTags: map[string]*metrics.TagSet{}, requests: map[int]float64{}}
	}
	var sched func(i int) *schedule // connection i's slots in the open model
	if opts.rate > 0 {
		openModel.Store(true)
		sched = func(i int) *schedule {
			return &schedule{origin: time.UnixMilli(int64(opts.startMs)), rate: opts.rate,
				j: int64(opts.firstConnection) + int64(i), total: int64(opts.totalConnections)}
		}
	}
	if opts.sliceMs > 0 && opts.endMs > 0 && eloopFor(t) {
		if m.loop, err = newEloop(t, int(opts.connections), newEmitter(), sched); err != nil {
			return fmt.Errorf("ingressbench.run: %w", err)
		}
		go m.loop.serve(st, time.UnixMilli(int64(opts.endMs)))
	} else {
		for i := range int(opts.connections) {
			w := &worker{e: newEmitter()}
			if sched != nil {
				w.s = sched(i)
			}
			m.workers = append(m.workers, w)
		}
	}
	return nil
}

// run sends requests on this VU's connections (one by default; the closed model gives a VU
// several, each in its own goroutine, so 1000 connections need not be 1000 JS runtimes of
// ~0.7 MB each): for sliceMs (never past endMs, the scenario's end in unix ms), or exactly
// one request when sliceMs is 0 (open model: the executor paces the iterations). Returns
// what it did.
func (m *moduleInstance) run(o map[string]any) (map[string]any, error) {
	st := m.vu.State()
	if st == nil {
		return nil, errors.New("ingressbench.run() belongs in the default function, not the init context")
	}
	if errRegister != nil {
		return nil, errRegister
	}
	opts, err := parseOptions(o)
	if err != nil {
		return nil, err
	}
	if opts.startMs > 0 {
		timeline.start(int64(opts.startMs))
	}
	if m.t == nil {
		if err := m.setup(st, opts); err != nil {
			return nil, err
		}
	}
	ctx := m.vu.Context()
	slice := time.Duration(opts.sliceMs * float64(time.Millisecond))
	until := time.Now().Add(slice)
	if end := opts.endMs; end > 0 {
		// Up to the end when less than a slice would be left after this one: k6 starts no
		// iteration past the scenario's duration, so a slice ending just short of it would
		// leave the last slots neither sent nor counted.
		if e := time.UnixMilli(int64(end)); e.Sub(until) < slice {
			until = e
		}
	}
	final := opts.endMs > 0 && !until.Before(time.UnixMilli(int64(opts.endMs)))
	var n, failed atomic.Int64
	loop := func(w *worker) {
		if w.s != nil {
			w.paced(ctx, st, m.t, until, final, &n, &failed)
		} else {
			w.loop(ctx, st, m.t, slice, until, &n, &failed)
		}
	}
	var late, clientLate, dropped int64
	if m.loop != nil {
		c := m.loop.collect(ctx, until, final)
		n.Add(c.reqs)
		failed.Add(c.fails)
		late, clientLate, dropped = c.late, c.clientLate, c.dropped
	} else if len(m.workers) == 1 {
		loop(m.workers[0])
	} else {
		var wg sync.WaitGroup
		for _, w := range m.workers {
			wg.Go(func() { loop(w) })
		}
		wg.Wait()
	}
	// Each connection's samples as they are (no copy on the hot path), after the slice.
	for _, w := range m.workers {
		if samples := w.e.take(); len(samples) > 0 {
			push(ctx, st.Samples, samples)
		}
		late, clientLate, dropped = late+w.late, clientLate+w.clientLate, dropped+w.dropped
	}
	out := map[string]any{"requests": n.Load(), "failed": failed.Load()}
	if opts.rate > 0 {
		// The open model's counters once per call, zeros too: a threshold on a counter
		// without samples would not be judged.
		now, tags := time.Now(), st.Tags.GetCurrentValues().Tags
		counts := metrics.Samples{}
		for metric, v := range map[*metrics.Metric]int64{sendsLate: late, sendsClientLate: clientLate, sendsDropped: dropped} {
			counts = append(counts, metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: metric, Tags: tags}, Time: now, Value: float64(v)})
		}
		push(ctx, st.Samples, counts)
		out["late"], out["clientLate"], out["dropped"] = late, clientLate, dropped
	}
	publish(ctx, st, false)
	return out, nil
}

// publish hands k6 the run's percentiles, rates and buckets: once a second from the calls,
// and final from the teardown.
func publish(ctx context.Context, st *lib.State, final bool) {
	for _, h := range []*histogram{&runLatency, &serviceLatency, &tlsLatency} {
		h.publish(ctx, st, final)
	}
	run.publish(ctx, st, final)
}

// record counts one request's result, and closes the connection when it is not to be reused.
func (w *worker) record(now time.Time, latency time.Duration, res result, keep bool, n, failed *atomic.Int64) {
	w.e.add(now, latency, res)
	n.Add(1)
	if res.failed() {
		failed.Add(1)
	}
	if !keep {
		w.c.close()
	}
}

// loop sends requests on the worker's connection until the slice's end (one when slice is 0).
func (w *worker) loop(ctx context.Context, st *lib.State, t *target, slice time.Duration, until time.Time, n, failed *atomic.Int64) {
	for {
		start := time.Now()
		res, keep := w.c.do(ctx, st, t)
		now := time.Now()
		if ctx.Err() != nil && res.err != nil {
			break // the scenario stopped mid-request: not a result
		}
		w.record(now, now.Sub(start), res, keep, n, failed)
		if slice == 0 || !now.Before(until) || ctx.Err() != nil {
			break
		}
	}
}

// paced sends this connection's slots due before the slice's end, each when it is due or, if
// the connection is still busy then, as soon as it is free (late when that is past the
// tolerance); latency from the due time, service time from the send. At the run's end
// (final) the backlog due before it is still sent, late, for up to drainFor; what is left
// is counted dropped.
func (w *worker) paced(ctx context.Context, st *lib.State, t *target, until time.Time, final bool, n, failed *atomic.Int64) {
	w.late, w.clientLate, w.dropped = 0, 0, 0
	stop := until
	if final {
		stop = until.Add(drainFor)
	}
	for ctx.Err() == nil {
		due := w.s.due(w.s.k)
		now := time.Now()
		if !due.Before(until) {
			// No slot left in this slice: wait out its end, or the VU would call run() again
			// at once, over and over (a connection's slots can be further apart than a slice).
			if now.Before(until) {
				time.Sleep(until.Sub(now))
			}
			break
		}
		if !now.Before(stop) {
			// The slice ends on time even with a backlog (slots due long ago): its samples
			// are pushed while the scenario runs; the backlog is sent in the next slice.
			break
		}
		// free: when the connection could send again, its previous response's end (in an
		// earlier slice, if so: the gap between slices is the client's). Later than due, the
		// target held it: the wait counts in the latency, from due. Before due, the
		// connection waits for its slot, and the latency counts from the send, so that a
		// wake-up after due (the runtime's timers are coarse when the process is idle) is
		// not charged to the target; such a send is still counted late past the tolerance.
		free, start := w.free, now
		if wait := due.Sub(now); wait > spinBelow {
			time.Sleep(wait) // at most until the slice's end (100 ms)
			start = time.Now()
		}
		res, keep := w.c.do(ctx, st, t)
		done := time.Now()
		if ctx.Err() != nil && res.err != nil {
			break // the scenario stopped mid-request: not a result
		}
		w.s.k++
		w.free = done
		from := due
		if free.Before(due) {
			from = start
		}
		if start.Sub(due) > lateTolerance {
			w.late++
			ready := due // both free and due: what came after is the client's own delay
			if free.After(due) {
				ready = free
			}
			if start.Sub(ready) > lateTolerance {
				w.clientLate++
			}
		}
		serviceLatency.add(done.Sub(start))
		w.record(done, done.Sub(from), res, keep, n, failed)
	}
	if final {
		w.dropped = w.s.dropAt(until)
	}
}
