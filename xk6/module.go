// Package ingressbench is the k6 extension k6/x/ingressbench: the request hot loop of the
// rps, tps and throughput scenarios run natively, one raw HTTP/1.1 client per connection
// over Go's netpoller, emitting k6's standard HTTP metrics with k6/http's tags, so thresholds,
// outputs and the summary work unchanged. The JS k6/http path stays the reference.
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

// Registering the latency Gauges, once per run (one k6 process runs one test); the error
// names a name another metric type took.
var (
	registerOnce sync.Once
	errRegister  error
)

// moduleInstance is one VU's: its connections live across iterations (keep-alive).
type moduleInstance struct {
	vu      modules.VU
	t       *target
	workers []*worker
}

// worker is one connection of the VU and its samples.
type worker struct {
	c conn
	e *emitter
}

func (*rootModule) NewModuleInstance(vu modules.VU) modules.Instance {
	if env := vu.InitEnv(); env != nil {
		registerOnce.Do(func() { errRegister = runLatency.register(env.Registry) })
	}
	return &moduleInstance{vu: vu}
}

func (m *moduleInstance) Exports() modules.Exports {
	return modules.Exports{Named: map[string]any{"version": Version, "run": m.run, "publishLatency": m.publishLatency}}
}

// publishLatency sends the whole run's percentiles (bench_http_req_duration_p95/p99), for
// the teardown: after every request, so the thresholds judge all of them.
func (m *moduleInstance) publishLatency() error {
	st := m.vu.State()
	if st == nil {
		return errors.New("ingressbench.publishLatency() belongs in teardown, not the init context")
	}
	runLatency.publish(m.vu.Context(), st, true)
	return nil
}

// runOptions are run()'s argument, checked: a key it does not know or a value of the wrong
// kind stops the script with one error naming it, rather than a default silently applied.
type runOptions struct {
	url, host, checkStatus, checkBody      string
	reuse                                  bool
	bodyBytes, sliceMs, endMs, connections float64
}

var optionNames = "url, host, reuse, bodyBytes, connections, sliceMs, endMs, checkStatus, checkBody"

func parseOptions(o map[string]any) (runOptions, error) {
	r := runOptions{reuse: true, connections: 1}
	for k, v := range o {
		var err error
		switch k {
		case "url":
			r.url, err = stringOption(k, v)
		case "host":
			r.host, err = stringOption(k, v)
		case "checkStatus":
			r.checkStatus, err = stringOption(k, v)
		case "checkBody":
			r.checkBody, err = stringOption(k, v)
		case "reuse":
			var ok bool
			if r.reuse, ok = v.(bool); !ok {
				err = fmt.Errorf("reuse must be true or false, got %v", v)
			}
		case "bodyBytes":
			r.bodyBytes, err = numberOption(k, v)
		case "connections":
			if r.connections, err = numberOption(k, v); err == nil && (r.connections < 1 || r.connections != float64(int(r.connections))) {
				err = fmt.Errorf("connections must be a whole number of at least 1, got %v", v)
			}
		case "sliceMs":
			r.sliceMs, err = numberOption(k, v)
		case "endMs":
			r.endMs, err = numberOption(k, v)
		default:
			err = fmt.Errorf("unknown option '%s' (known: %s)", k, optionNames)
		}
		if err != nil {
			return r, fmt.Errorf("ingressbench.run: %w", err)
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
	if m.t == nil {
		t, err := newTarget(opts.url, opts.host, opts.reuse, int64(opts.bodyBytes))
		if err != nil {
			return nil, fmt.Errorf("ingressbench.run: %w", err)
		}
		m.t = t
		for range int(opts.connections) {
			m.workers = append(m.workers, &worker{e: &emitter{st: st, t: t, checkStatus: opts.checkStatus, checkBody: opts.checkBody,
				byStatus: map[int]*metrics.TagSet{}, checkTags: map[string]*metrics.TagSet{}, requests: map[int]float64{}}})
		}
	}
	ctx := m.vu.Context()
	slice := time.Duration(opts.sliceMs * float64(time.Millisecond))
	until := time.Now().Add(slice)
	if end := opts.endMs; end > 0 {
		if e := time.UnixMilli(int64(end)); e.Before(until) {
			until = e
		}
	}
	var n, failed atomic.Int64
	if len(m.workers) == 1 {
		m.workers[0].loop(ctx, st, m.t, slice, until, &n, &failed)
	} else {
		var wg sync.WaitGroup
		for _, w := range m.workers {
			wg.Go(func() { w.loop(ctx, st, m.t, slice, until, &n, &failed) })
		}
		wg.Wait()
	}
	runLatency.publish(ctx, st, false)
	return map[string]any{"requests": n.Load(), "failed": failed.Load()}, nil
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
		w.e.add(now, now.Sub(start), res)
		n.Add(1)
		if res.failed() {
			failed.Add(1)
		}
		if !keep {
			w.c.close()
		}
		if slice == 0 || !now.Before(until) || ctx.Err() != nil {
			break
		}
	}
	w.e.flush(ctx)
}
