package ingressbench

import (
	"sort"
	"testing"
	"time"
)

// The connections' schedules interleave into the test's: request m due at origin + m/rate,
// every m exactly once, whatever the number of connections.
func TestSchedulesInterleaveIntoOneRate(t *testing.T) {
	origin := time.UnixMilli(1_700_000_000_000)
	for _, total := range []int64{1, 3, 50} {
		const rate = 7000.0
		var all []time.Time
		for j := range total {
			s := schedule{origin: origin, rate: rate, j: j, total: total}
			for k := int64(0); k < 100; k++ {
				all = append(all, s.due(k))
			}
		}
		sort.Slice(all, func(a, b int) bool { return all[a].Before(all[b]) })
		for m, d := range all {
			want := origin.Add(time.Duration(float64(m) * 1e9 / rate))
			if diff := d.Sub(want); diff < -time.Nanosecond || diff > time.Nanosecond {
				t.Fatalf("%d connections: request %d due %v, want %v", total, m, d.Sub(origin), want.Sub(origin))
			}
		}
	}
}

// Dropped: the slots due before the end that were not sent, counted once.
func TestDroppedCountsUnsentSlotsOnce(t *testing.T) {
	origin := time.UnixMilli(1_700_000_000_000)
	s := schedule{origin: origin, rate: 1000, j: 1, total: 4} // due at 1, 5, 9, ... ms
	s.k = 3                                                   // sent the slots at 1, 5 and 9 ms
	end := origin.Add(30 * time.Millisecond)                  // due before 30 ms: 13, 17, 21, 25, 29 ms
	if n := s.dropAt(end); n != 5 {
		t.Fatalf("dropped %d, want 5", n)
	}
	if n := s.dropAt(end); n != 0 || s.dropped != 5 {
		t.Fatalf("counted again: %d (total %d)", n, s.dropped)
	}
	s2 := schedule{origin: origin, rate: 1000, j: 1, total: 4, k: 8} // slot 8 due at 33 ms: after the end
	if n := s2.dropAt(end); n != 0 {
		t.Fatalf("a slot due after the end was dropped (%d)", n)
	}
}
