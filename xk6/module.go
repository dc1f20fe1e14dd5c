// Package ingressbench is the k6 extension k6/x/ingressbench: the request hot loop of the
// rps, tps and throughput scenarios run natively, one raw HTTP/1.1 client per VU over Go's
// netpoller, emitting k6's standard HTTP metrics with k6/http's tags, so thresholds,
// outputs and the summary work unchanged. The JS k6/http path stays the reference.
package ingressbench

import (
	"errors"
	"time"

	"go.k6.io/k6/js/modules"
	"go.k6.io/k6/metrics"
)

// Version is exported to scripts and sent as the User-Agent's version.
const Version = "0.1.0"

func init() {
	modules.Register("k6/x/ingressbench", new(rootModule))
}

type rootModule struct{}

// moduleInstance is one VU's: its connection lives across iterations (keep-alive).
type moduleInstance struct {
	vu modules.VU
	t  *target
	c  conn
	e  *emitter
}

func (*rootModule) NewModuleInstance(vu modules.VU) modules.Instance {
	return &moduleInstance{vu: vu}
}

func (m *moduleInstance) Exports() modules.Exports {
	return modules.Exports{Named: map[string]any{"version": Version, "run": m.run}}
}

func str(o map[string]any, k string) string { s, _ := o[k].(string); return s }

func num(o map[string]any, k string) float64 {
	switch v := o[k].(type) {
	case int64:
		return float64(v)
	case float64:
		return v
	}
	return 0
}

// run sends requests on this VU's connection: for sliceMs (closed model: VUs × duration;
// never past endMs, the scenario's end in unix ms), or exactly one when sliceMs is 0 (open
// model: the executor paces the iterations). Returns what it did.
func (m *moduleInstance) run(o map[string]any) (map[string]any, error) {
	st := m.vu.State()
	if st == nil {
		return nil, errors.New("ingressbench.run() belongs in the default function, not the init context")
	}
	if m.t == nil {
		t, err := newTarget(str(o, "url"), str(o, "host"), o["reuse"] != false, int64(num(o, "bodyBytes")))
		if err != nil {
			return nil, err
		}
		m.t = t
		m.e = &emitter{st: st, t: t, checkStatus: str(o, "checkStatus"), checkBody: str(o, "checkBody"), byStatus: map[int]*metrics.TagSet{}, checkTags: map[string]*metrics.TagSet{}}
	}
	ctx := m.vu.Context()
	slice := time.Duration(num(o, "sliceMs") * float64(time.Millisecond))
	until := time.Now().Add(slice)
	if end := num(o, "endMs"); end > 0 {
		if e := time.UnixMilli(int64(end)); e.Before(until) {
			until = e
		}
	}
	var n, failed int64
	for {
		start := time.Now()
		res, keep := m.c.do(ctx, st, m.t)
		now := time.Now()
		if ctx.Err() != nil && res.err != nil {
			break // the scenario stopped mid-request: not a result
		}
		m.e.add(now, now.Sub(start), res)
		n++
		if res.failed() {
			failed++
		}
		if !keep {
			m.c.close()
		}
		if slice == 0 || !now.Before(until) || ctx.Err() != nil {
			break
		}
	}
	m.e.flush(ctx)
	return map[string]any{"requests": n, "failed": failed}, nil
}
