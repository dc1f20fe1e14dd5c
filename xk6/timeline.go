package ingressbench

import (
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The run's requests in 100 ms slots from the scenario's start, each by outcome and with a
// coarse latency histogram: what a change under load (bench:change: a reload, a pod deleted)
// did, and when. A request belongs to the slot of its send (its due time in the open model,
// or its real send when the client itself was late for a free connection: pacing's rule for
// the latency, so the client's delay is not the target's), so a request sent before a change
// and answered long after it shows where it was asked.
const (
	slotMs      = 100
	maxSlots    = 36000 // an hour; later requests are counted in beyond
	coarseShift = 4     // the latency histogram's buckets, 16 merged: 8 per power of two, within 1/16
	nCoarse     = nBuckets >> coarseShift
)

// Outcomes: a response with a status in 200-399 (ok) or another (status, by code), or no
// response, by why: the connection reset (RST, or a write on one the peer had closed),
// refused, timed out (REQUEST_TIMEOUT), closed by the server before a whole response (an
// idle keep-alive connection closed as the request went out: what a reloading nginx's old
// workers do), or another error; or never sent: an open-model send due while its connection
// still waited for an earlier answer, past the run's end and its drain (pacing.go dropAt).
const (
	outOK = iota
	outStatus
	outReset
	outRefused
	outTimeout
	outClosed
	outOther
	outDropped
	nOutcomes
)

var outcomeNames = [nOutcomes]string{"ok", "status", "reset", "refused", "timeout", "closed", "other", "dropped"}

// errTimeout is a request that had no whole response within REQUEST_TIMEOUT.
var errTimeout = errors.New("no whole response within the request timeout")

func outcome(res result) int {
	switch err := res.err; {
	case err == nil && !res.failed():
		return outOK
	case err == nil:
		return outStatus
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return outReset
	case errors.Is(err, syscall.ECONNREFUSED):
		return outRefused
	case errors.Is(err, errTimeout) || errors.Is(err, os.ErrDeadlineExceeded) || isTimeout(err):
		return outTimeout
	case errors.Is(err, errClosedEarly) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return outClosed
	}
	return outOther
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

type slot struct {
	outcomes [nOutcomes]atomic.Uint32
	latency  [nCoarse]atomic.Uint32 // every request's, whatever its outcome
	mu       sync.Mutex
	statuses map[int]uint32    // the outStatus ones by code
	others   map[string]uint32 // the outOther ones by error text, the first few texts
}

const maxOthers = 4

type timelineT struct {
	origin atomic.Int64 // unix ms of slot 0: the scenario's start, set once by the first call
	slots  [maxSlots]atomic.Pointer[slot]
	beyond atomic.Uint64
}

var timeline timelineT

func (tl *timelineT) start(ms int64) { tl.origin.CompareAndSwap(0, ms) }

// at is the slot of t, or nil (no start given: a call outside the scenarios; or beyond).
func (tl *timelineT) at(t time.Time) *slot {
	o := tl.origin.Load()
	if o == 0 {
		return nil
	}
	i := (t.UnixMilli() - o) / slotMs
	if i < 0 {
		i = 0 // the first slot's dials, a hair before the scenario's recorded start
	}
	if i >= maxSlots {
		tl.beyond.Add(1)
		return nil
	}
	s := tl.slots[i].Load()
	if s == nil {
		s = &slot{}
		if !tl.slots[i].CompareAndSwap(nil, s) {
			s = tl.slots[i].Load()
		}
	}
	return s
}

// drop records a send due at due that was never sent.
func (tl *timelineT) drop(due time.Time) {
	if s := tl.at(due); s != nil {
		s.outcomes[outDropped].Add(1)
	}
}

// add records a request sent at sent, answered (or failed) after dur.
func (tl *timelineT) add(sent time.Time, dur time.Duration, res result) {
	s := tl.at(sent)
	if s == nil {
		return
	}
	k := outcome(res)
	s.outcomes[k].Add(1)
	s.latency[bucketOf(int64(dur))>>coarseShift].Add(1)
	switch k {
	case outStatus:
		s.mu.Lock()
		if s.statuses == nil {
			s.statuses = map[int]uint32{}
		}
		s.statuses[res.status]++
		s.mu.Unlock()
	case outOther: // named in the report: an error this file does not know yet
		s.mu.Lock()
		if s.others == nil {
			s.others = map[string]uint32{}
		}
		if text := res.err.Error(); len(s.others) < maxOthers || s.others[text] > 0 {
			s.others[text]++
		}
		s.mu.Unlock()
	}
}

// export is the timeline as timeline.json carries it: per slot with a request its index
// (t = origin + index × 100 ms), counts by outcome, statuses and the non-empty latency
// buckets as [middle ms, count] (bench/report/timeline.py reads the percentiles from them).
func (tl *timelineT) export() map[string]any {
	slots := []map[string]any{}
	for i := range tl.slots {
		s := tl.slots[i].Load()
		if s == nil {
			continue
		}
		counts := map[string]any{}
		for k, name := range outcomeNames {
			if n := s.outcomes[k].Load(); n > 0 {
				counts[name] = n
			}
		}
		lat := [][2]float64{}
		for b := range s.latency {
			if n := s.latency[b].Load(); n > 0 {
				mid := bucketValue(b<<coarseShift + (1<<coarseShift)/2)
				lat = append(lat, [2]float64{mid / float64(time.Millisecond), float64(n)})
			}
		}
		s.mu.Lock()
		statuses := map[string]uint32{}
		for code, n := range s.statuses {
			statuses[strconv.Itoa(code)] = n
		}
		others := map[string]uint32{}
		for text, n := range s.others {
			others[text] = n
		}
		s.mu.Unlock()
		slots = append(slots, map[string]any{"i": i, "outcomes": counts, "statuses": statuses, "others": others, "latency": lat})
	}
	return map[string]any{"origin_ms": tl.origin.Load(), "slot_ms": slotMs, "relative_error": 1.0 / (2 * (subBuckets >> coarseShift)),
		"beyond": tl.beyond.Load(), "slots": slots}
}
