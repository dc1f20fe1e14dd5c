package ingressbench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"time"
)

// Each error the engine meets is the kind bench:change reports it as.
func TestOutcomesByKind(t *testing.T) {
	for _, c := range []struct {
		res  result
		want string
	}{
		{result{status: 200}, "ok"},
		{result{status: 301}, "ok"},
		{result{status: 502}, "status"},
		{result{status: 404}, "status"},
		{result{err: syscall.ECONNRESET}, "reset"},
		{result{err: fmt.Errorf("write: %w", syscall.EPIPE)}, "reset"},
		{result{err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}, "refused"},
		{result{err: errTimeout}, "timeout"},
		{result{err: os.ErrDeadlineExceeded}, "timeout"},
		{result{err: errClosedEarly}, "closed"},
		{result{err: io.EOF}, "closed"},
		{result{status: 200, err: io.ErrUnexpectedEOF}, "closed"},
		{result{err: errors.New("a response head longer than 65536 bytes")}, "other"},
	} {
		if got := outcomeNames[outcome(c.res)]; got != c.want {
			t.Errorf("%+v: %s, want %s", c.res, got, c.want)
		}
	}
}

// A request lands in the 100 ms slot of its send; statuses are kept by code; nothing is
// recorded before the scenario's start is known, and requests past the hour are counted.
func TestTimelineSlotsBySend(t *testing.T) {
	var tl timelineT
	origin := time.UnixMilli(1_700_000_000_000)
	tl.add(origin, time.Millisecond, result{status: 200}) // no origin yet: not recorded
	tl.start(origin.UnixMilli())
	tl.start(origin.UnixMilli() + 5000) // the first start stays
	tl.add(origin.Add(50*time.Millisecond), 2*time.Millisecond, result{status: 200})
	tl.add(origin.Add(-3*time.Millisecond), time.Millisecond, result{status: 200}) // a dial a hair early: slot 0
	tl.add(origin.Add(150*time.Millisecond), 300*time.Millisecond, result{status: 502})
	tl.add(origin.Add(199*time.Millisecond), 40*time.Millisecond, result{status: 502})
	tl.add(origin.Add(120*time.Millisecond), 10*time.Millisecond, result{err: syscall.ECONNRESET})
	tl.add(origin.Add(maxSlots*slotMs*time.Millisecond), time.Millisecond, result{status: 200})
	tl.drop(origin.Add(130 * time.Millisecond)) // never sent: in the slot it was due

	x := tl.export()
	slots := x["slots"].([]map[string]any)
	if x["origin_ms"].(int64) != origin.UnixMilli() || x["beyond"].(uint64) != 1 || len(slots) != 2 {
		t.Fatalf("export %v", x)
	}
	if s := slots[0]; s["i"] != 0 || fmt.Sprint(s["outcomes"]) != "map[ok:2]" {
		t.Errorf("slot 0: %v", s)
	}
	s := slots[1]
	if s["i"] != 1 || fmt.Sprint(s["outcomes"]) != "map[dropped:1 reset:1 status:2]" || fmt.Sprint(s["statuses"]) != "map[502:2]" {
		t.Errorf("slot 1: %v", s)
	}
	// The latency buckets: three values, each within 1/16 of its bucket's middle.
	lat := s["latency"].([][2]float64)
	want := []float64{10, 40, 300}
	if len(lat) != 3 {
		t.Fatalf("latency %v", lat)
	}
	for i, b := range lat {
		if d := b[0]/want[i] - 1; d > 1.0/16 || d < -1.0/16 || b[1] != 1 {
			t.Errorf("latency bucket %v for %v ms", b, want[i])
		}
	}
}
