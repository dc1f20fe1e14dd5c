package ingressbench

import (
	"errors"
	"testing"
	"time"
)

// Two emitters' tallies added to the run's: the counts k6/http's Rates and Trends would give
// (requests, failed ones by its rule, each check's passes and fails, the latency's sum and
// maximum, the handshakes), and the rates the thresholds' Gauges carry.
func TestOutcomesAreTheRatesK6Would(t *testing.T) {
	var o outcomes
	names := [2]string{"status is 200", "body is 1024 B"}
	a, b := tally{checks: map[string]*[2]int64{}}, tally{checks: map[string]*[2]int64{}}
	ms := time.Millisecond
	a.add(2*ms, result{status: 200, bodyBytes: 1024, tlsTime: 5 * ms}, names, [2]bool{true, true})
	a.add(3*ms, result{status: 200, bodyBytes: 1024}, names, [2]bool{true, true})
	a.add(9*ms, result{status: 503}, names, [2]bool{false, false})
	b.add(1*ms, result{err: errors.New("reset")}, names, [2]bool{false, false})
	b.add(4*ms, result{status: 302}, names, [2]bool{false, true}) // not failed: k6's rule is 200-399
	o.flush(&a)
	o.flush(&b)
	if a.requests != 0 || a.checks[names[0]][0] != 0 {
		t.Fatalf("a flushed tally keeps counts: %+v", a)
	}
	e := o.export()
	want := map[string]any{"requests": int64(5), "failed": int64(2), "failed_rate": 0.4, "tls_handshakes": int64(1),
		"tls_handshake_ms_sum": 5.0, "latency_ms_sum": 19.0, "max_ms": 9.0, "checks_rate": 0.5}
	for k, v := range want {
		if e[k] != v {
			t.Errorf("%s: %v, want %v", k, e[k], v)
		}
	}
	checks := e["checks"].(map[string]any)
	if got := checks[names[0]].(map[string]any); got["passes"] != int64(2) || got["fails"] != int64(3) {
		t.Errorf("%s: %v", names[0], got)
	}
	if got := checks[names[1]].(map[string]any); got["passes"] != int64(3) || got["fails"] != int64(2) {
		t.Errorf("%s: %v", names[1], got)
	}
	// Nothing yet: no request failed, and no check passed (a threshold value==1 fails).
	var none outcomes
	if f, c := none.rates(); f != 0 || c != 0 {
		t.Errorf("an empty run's rates: %v, %v", f, c)
	}
}
