package ingressbench

import (
	"math"
	"time"
)

// The open model in Go: each connection sends on its own schedule, and the schedules of all
// connections of the test interleave into one of exactly `rate` requests per second.
// Connection j (0-based, unique across VUs and execution segments) of `total` sends its
// k-th request at origin + (j + k*total)/rate, so request m of the whole test is due at
// origin + m/rate. As in wrk2, a request whose connection is still busy when it is due is
// sent as soon as the connection is free, and its latency is measured from when it was due
// (coordinated omission corrected); the service time, from when it was sent, is kept beside.

// lateTolerance: a send that starts later than this after it was due is counted late. At a
// sustainable rate the previous response is back long before (tens to hundreds of µs here),
// so a late send means the connection, the client or the target fell behind. Not less: when
// every goroutine sleeps, Go's runtime waits in epoll with a timeout in whole milliseconds
// (runtime/netpoll_epoll.go), so a timer can wake up to 1 ms after it was due; at 1,000
// requests/s a 1 ms tolerance counted 6% of the sends late for that alone.
const lateTolerance = 2 * time.Millisecond

// spinBelow: a send due sooner than this goes now rather than sleeping (a timer wake-up
// costs more than it would be early); its latency is then measured from the real send.
const spinBelow = 20 * time.Microsecond

// schedule is one connection's place in the test's arrival schedule.
type schedule struct {
	origin  time.Time
	rate    float64 // requests per second, the whole test's
	j       int64   // this connection's index
	total   int64   // connections of the whole test
	k       int64   // this connection's next slot
	dropped int64   // slots counted as dropped at the end (never sent)
}

// due is when this connection's slot k is.
func (s *schedule) due(k int64) time.Time {
	return s.origin.Add(time.Duration(float64(s.j+k*s.total) * 1e9 / s.rate))
}

// slotsBefore is the number of this connection's slots due before t.
func (s *schedule) slotsBefore(t time.Time) int64 {
	m := (float64(t.Sub(s.origin))*s.rate/1e9 - float64(s.j)) / float64(s.total)
	if m <= 0 {
		return 0
	}
	return int64(math.Ceil(m))
}

// drainFor: how long after the run's end the backlog due before it is still sent (late,
// its latency from the due time); a run whose backlog outlasts it was over its capacity,
// and what is left is dropped. Well inside the scenario's gracefulStop (k6/lib/options.js).
const drainFor = time.Second

// dropAt counts, once, the slots due before the run's end that were never sent, and moves
// past them: a later call at the end counts nothing more. Returns the number newly dropped.
// Each is in the timeline at its due time: when a change stalled the connections, there.
func (s *schedule) dropAt(end time.Time) int64 {
	n := s.slotsBefore(end) - s.k
	if n <= 0 {
		return 0
	}
	for k := s.k; k < s.k+n; k++ {
		timeline.drop(s.due(k))
	}
	s.k += n
	s.dropped += n
	return n
}
