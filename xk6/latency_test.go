package ingressbench

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

// The histogram's percentiles against the exact ones k6's Trend would give, on a skewed
// spread from microseconds to seconds: within the bucket's half-width (1/256) plus one rank.
func TestPercentilesMatchExactOnes(t *testing.T) {
	var h histogram
	r := rand.New(rand.NewPCG(1, 2))
	values := make([]float64, 200000)
	for i := range values {
		d := time.Duration(math.Exp(r.NormFloat64()*1.5) * float64(300*time.Microsecond))
		h.add(d)
		values[i] = float64(d) / float64(time.Millisecond)
	}
	sort.Float64s(values)
	for _, p := range []float64{0.5, 0.95, 0.99, 0.999} {
		got := h.percentiles(p)[0]
		lo, hi := values[int(p*float64(len(values)))-2], values[int(p*float64(len(values)))+1]
		if got < lo*(1-1.0/256) || got > hi*(1+1.0/256) {
			t.Errorf("p%v: %v ms, exact between %v and %v", p*100, got, lo, hi)
		}
	}
}

func TestBucketsAreContiguousAndOrdered(t *testing.T) {
	prev := -1
	for _, ns := range []int64{-5, 0, 1, 255, 256, 257, 511, 512, 1e3, 1e6, 1e9, 1 << 40, 1 << 50} {
		b := bucketOf(ns)
		if b < prev || b >= nBuckets {
			t.Fatalf("bucketOf(%d) = %d after %d", ns, b, prev)
		}
		if v := bucketValue(b); ns > 0 && ns < 1<<40 && math.Abs(v-float64(ns)) > float64(ns)/256+0.5 {
			t.Errorf("bucketValue(bucketOf(%d)) = %v", ns, v)
		}
		prev = b
	}
	if h := (&histogram{}).percentiles(0.95); h[0] != 0 {
		t.Errorf("empty histogram: %v", h)
	}
}
