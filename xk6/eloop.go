//go:build linux

package ingressbench

import (
	"container/heap"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"go.k6.io/k6/lib"
)

// eloop is the loop for keep-alive HTTP and HTTPS, the rps and throughput scenarios' hot
// path, as wrk (and, paced, wrk2) runs it: one loop per VU owns its connections' sockets and
// waits for them in one level-triggered epoll set; a readable socket is read, and a complete
// response is recorded and the next request written at once (closed model) or when the
// connection's next slot is due (open model). It runs from the VU's first call to the
// scenario's end in a goroutine of its own, while each call only collects what it recorded:
// the connections never idle at a call's end (draining them every 100 ms cost ~5% of the
// rate against a saturated target). Go's netpoller, which the goroutine-per-connection path
// (worker) rides, costs an extra failed read and a goroutine park and wake-up per request
// (xk6/README.md, "Closer to wrk"). A new connection per request keeps that path.
//
// Connections are dialled by k6's own dialer (its blocklists, hosts and resolver), then the
// socket is taken over: its descriptor duplicated, Go's copy closed. The bytes read and
// written are added to that dialer's counters, from which k6 emits data_received and
// data_sent after each iteration, as for every other connection.
type eloop struct {
	epfd int
	// The epoll set as a file in Go's own netpoller: the loop parks there, as any goroutine
	// waiting for a socket does, when none of its connections is ready. (Blocking in
	// epoll_wait instead held the thread outside the scheduler: on the client's one CPU the
	// loop then waited up to Go's 10 ms time slice for it, a p99 of 12 ms wrk does not see.)
	set                  *os.File
	poll                 syscall.RawConn
	t                    *target
	conns                []*econn // an epoll event carries its connection's index here
	events               []syscall.EpollEvent
	bytesRead, bytesSent *int64 // k6's dialer's counters
	counters             sync.Once
	// The loop's own context: k6 cancels a call's at the call's end, so the loop outlives
	// them; collect cancels it when the scenario is stopped.
	ctx  context.Context
	stop context.CancelFunc
	done chan struct{}

	e                         *emitter
	buf                       []byte       // every read's, parsed before the next: one per loop, not per connection
	reqs, fails               atomic.Int64 // since the last collect
	late, clientLate, dropped atomic.Int64 // the open model's, since the last collect
	ended                     time.Time    // when the last request ended
	deadline                  time.Time    // the parked wait's, kept while it is ahead (one timer change less per park)
	scanned                   time.Time    // the last look for requests past the target's timeout
}

// pushEvery: the loop owns its emitter and hands its samples to k6 itself this often (a
// channel send), so that no lock stands between it and the calls, which only count.
const pushEvery = 10 * time.Millisecond

// econn is one connection of the loop: its socket (-1 before a dial), the bytes of the
// response read so far, and the request in flight.
type econn struct {
	i     int32 // its index in conns
	fd    int
	tc    *tls.Conn     // on an https target, the TLS session over sock
	sock  *sock         // the socket tc reads and writes
	h2    *h2Conn       // on HTTP/2, the connection's streams (nil: HTTP/1.1)
	tlsAt time.Duration // the handshake's time, reported with the connection's first request
	carry []byte        // the start of a response head a read ended in, for the next
	h     head          // the response's head once read (h.status > 0)
	left  int64         // body bytes still to come
	body  int64         // body bytes read
	start time.Time
	busy  bool // a request in flight
	// The open model's: this connection's slots (nil: closed model), when its next one is
	// due, what the request's latency counts from (its due time, or its send when the
	// connection waited for the slot), and when its previous response ended.
	s          *schedule
	next, from time.Time
	free       time.Time
}

const eloopBuffer = 64 << 10

// newEloop makes a loop for connections, paced by the schedule sched gives each (connection
// index within the loop) in the open model, or sched nil in the closed model.
func newEloop(t *target, connections int, e *emitter, sched func(i int) *schedule) (*eloop, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	if err = syscall.SetNonblock(epfd, true); err != nil {
		syscall.Close(epfd)
		return nil, fmt.Errorf("epoll set non-blocking: %w", err)
	}
	l := &eloop{epfd: epfd, t: t, events: make([]syscall.EpollEvent, connections), e: e, buf: make([]byte, eloopBuffer), done: make(chan struct{})}
	l.set = os.NewFile(uintptr(epfd), "eloop")
	if l.poll, err = l.set.SyscallConn(); err != nil {
		l.set.Close()
		return nil, fmt.Errorf("epoll set: %w", err)
	}
	l.ctx, l.stop = context.WithCancel(context.Background())
	for i := range connections {
		c := &econn{i: int32(i), fd: -1}
		if sched != nil {
			c.s = sched(i)
		}
		l.conns = append(l.conns, c)
	}
	return l, nil
}

// serve runs the loop until end (or until stopped), closed or open model; then it waits for
// the requests in flight, as each goroutine of the other path finishes its last one.
func (l *eloop) serve(st *lib.State, end time.Time) {
	defer func() {
		push(l.ctx, st.Samples, l.e.take())
		for _, c := range l.conns {
			l.closeConn(c)
		}
		l.set.Close()
		close(l.done)
	}()
	// Every connection dialled at once first (a failed one dials again at its first send):
	// one after the other, the loop would wait out each handshake, and in the open model the
	// slots of the connections already up would go late meanwhile.
	var dials sync.WaitGroup
	for _, c := range l.conns {
		dials.Go(func() { _ = l.dial(l.ctx, st, c) })
	}
	dials.Wait()
	if len(l.conns) > 0 && l.conns[0].s != nil {
		l.paced(st, end)
	} else {
		l.closed(st, end)
	}
}

// closed keeps every connection busy until end.
func (l *eloop) closed(st *lib.State, end time.Time) {
	ctx := l.ctx
	pushed := time.Now()
	busy := 0
	for _, c := range l.conns {
		if l.send(ctx, st, c, time.Now()) {
			busy++
		}
	}
	for ctx.Err() == nil {
		now := time.Now()
		if busy == 0 {
			if !now.Before(end) {
				return
			}
			// Every send failed (a target refusing connections): retry, not in a tight loop.
			time.Sleep(min(end.Sub(now), 10*time.Millisecond))
			for _, c := range l.conns {
				if l.send(ctx, st, c, time.Now()) {
					busy++
				}
			}
			continue
		}
		k, err := l.wait(10 * time.Millisecond)
		if l.failed(err) {
			return
		}
		l.handle(st, k, &pushed, func(c *econn) {
			if !c.busy {
				busy--
			}
			// The next request starts when the last ended (one clock read less per request);
			// on HTTP/2 the free streams of c are filled.
			if was := c.busy; l.ended.Before(end) && l.send(ctx, st, c, l.ended) && !was {
				busy++
			}
		})
	}
	// Stopped mid-request: not a result (the deferred close ends those connections).
}

// paced sends each connection's slots of the open model's schedule (pacing.go): a free
// connection when its slot is due, a busy one as soon as its response is in (late, its
// latency from the due time). The backlog due before end is still sent for drainFor after
// it; what is left then is counted dropped.
func (l *eloop) paced(st *lib.State, end time.Time) {
	ctx := l.ctx
	pushed, stop := time.Now(), end.Add(drainFor)
	waiting := &byDue{} // the free connections, by when their next slot is due
	queue := func(c *econn) {
		if c.next = c.s.due(c.s.k); c.next.Before(end) {
			heap.Push(waiting, c)
		}
	}
	for _, c := range l.conns {
		queue(c)
	}
	busy := 0
	for ctx.Err() == nil {
		now := time.Now()
		for waiting.Len() > 0 && (*waiting)[0].next.Sub(now) < spinBelow && now.Before(stop) {
			c := heap.Pop(waiting).(*econn)
			if l.sendDue(ctx, st, c, now) {
				busy++
			} else {
				queue(c)
			}
		}
		if busy == 0 && (waiting.Len() == 0 || !now.Before(stop)) {
			break
		}
		timeout := 10 * time.Millisecond
		if waiting.Len() > 0 && now.Before(stop) {
			timeout = min(timeout, (*waiting)[0].next.Sub(now))
		}
		k, err := l.wait(timeout)
		if l.failed(err) {
			return
		}
		l.handle(st, k, &pushed, func(c *econn) {
			busy--
			queue(c)
		})
	}
	if ctx.Err() == nil {
		for _, c := range l.conns {
			l.dropped.Add(c.s.dropAt(end))
		}
	}
}

// handle pushes the samples when pushEvery has passed, then reads the k connections epoll
// found ready and hands each whose request ended to ended.
func (l *eloop) handle(st *lib.State, k int, pushed *time.Time, ended func(c *econn)) {
	if now := time.Now(); now.Sub(*pushed) >= pushEvery {
		push(l.ctx, st.Samples, l.e.take())
		*pushed = now
	}
	for _, ev := range l.events[:max(k, 0)] {
		if c := l.conns[ev.Fd]; c.busy && c.fd >= 0 && l.readable(c) {
			ended(c)
		}
	}
	// A request past the timeout (a server gone without a reset: its pod's network removed)
	// ends as a timeout and its connection is closed; looked for every 10 ms at most.
	if now := time.Now(); l.t.timeout > 0 && now.Sub(l.scanned) >= 10*time.Millisecond {
		l.scanned = now
		for _, c := range l.conns {
			switch {
			case !c.busy:
			case c.h2 != nil:
				if l.expiredH2(c, now) {
					ended(c)
				}
			case now.Sub(c.start) > l.t.timeout:
				l.finish(c, result{err: errTimeout})
				ended(c)
			}
		}
	}
}

// sendDue sends c's next slot at now, counting it late past the tolerance, and the client's
// own lateness apart (connection free and slot due, the send still later): as worker.paced.
func (l *eloop) sendDue(ctx context.Context, st *lib.State, c *econn, now time.Time) bool {
	due := c.s.due(c.s.k)
	c.s.k++
	c.from = due
	if c.free.Before(due) { // the connection waited for its slot: latency from the send
		c.from = now
	}
	if now.Sub(due) > lateTolerance {
		l.late.Add(1)
		ready := due
		if c.free.After(due) {
			ready = c.free
		}
		if now.Sub(ready) > lateTolerance {
			l.clientLate.Add(1)
		}
	}
	return l.send(ctx, st, c, now)
}

// byDue orders free connections by their next slot (container/heap).
type byDue []*econn

func (h byDue) Len() int           { return len(h) }
func (h byDue) Less(i, j int) bool { return h[i].next.Before(h[j].next) }
func (h byDue) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *byDue) Push(x any)        { *h = append(*h, x.(*econn)) }
func (h *byDue) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// failed records an epoll_wait error as every request in flight's and says the loop ends.
func (l *eloop) failed(err error) bool {
	if err == nil || errors.Is(err, syscall.EINTR) {
		return false
	}
	err = fmt.Errorf("epoll_wait: %w", err)
	for _, c := range l.conns {
		switch {
		case c.busy && c.h2 != nil:
			l.failStreams(c, err, err)
		case c.busy:
			l.finish(c, result{err: err})
		}
	}
	return true
}

// wait returns the connections ready: a non-blocking epoll_wait (a raw system call: under
// load some connections always are ready), and when none is, parked in Go's netpoller until
// one is, or for timeout at most (10 ms: a stopped scenario or the end is noticed that soon;
// the open model's next slot when sooner). A timeout of 0 or less does not park.
func (l *eloop) wait(timeout time.Duration) (int, error) {
	var k uintptr
	var errno syscall.Errno
	ready := func(fd uintptr) bool {
		k, _, errno = syscall.RawSyscall6(syscall.SYS_EPOLL_WAIT, fd, uintptr(unsafe.Pointer(&l.events[0])), uintptr(len(l.events)), 0, 0, 0)
		return errno != syscall.EINTR && (errno != 0 || k > 0)
	}
	if ready(uintptr(l.epfd)) {
		return eventsOrError(k, errno)
	}
	if timeout <= 0 {
		return 0, nil
	}
	// The deadline set for an earlier park is kept while it is ahead and no later than this
	// one's (one timer change less per park); waking earlier than asked is harmless.
	if now := time.Now(); !now.Before(l.deadline) || l.deadline.After(now.Add(timeout)) {
		l.deadline = now.Add(timeout)
		if err := l.set.SetReadDeadline(l.deadline); err != nil {
			return 0, err
		}
	}
	// RawConn.Read tries its function before parking: that try was the one just made (an
	// epoll_wait saved per park). An event since then is not missed: Go's netpoller saw the
	// set become readable and does not park.
	tried := false
	if err := l.poll.Read(func(fd uintptr) bool {
		if !tried {
			tried = true
			return false
		}
		return ready(fd)
	}); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return 0, nil
		}
		return 0, err
	}
	return eventsOrError(k, errno)
}

func eventsOrError(k uintptr, errno syscall.Errno) (int, error) {
	if errno != 0 {
		return 0, errno
	}
	return int(k), nil
}

// counts are what the loop did since the previous call.
type counts struct{ reqs, fails, late, clientLate, dropped int64 }

// collect is one call's share: it waits until the slice's end (at the scenario's end, or
// when the scenario is stopped, until the loop has ended and pushed its last samples) and
// returns what the loop did since the previous call.
func (l *eloop) collect(ctx context.Context, until time.Time, final bool) counts {
	// The slice is waited out even when the loop has ended (the open model's last slots
	// sent before the end): returning at once, the VU would call again at once, over and
	// over, and take the CPU from the other VUs' loops (their last slots went 20 ms late).
	wait := time.NewTimer(time.Until(until))
	select {
	case <-wait.C:
	case <-ctx.Done(): // the scenario stopped (Ctrl-C, the end of a graceful stop)
		l.stop()
	}
	wait.Stop()
	if final || ctx.Err() != nil {
		<-l.done
	}
	return counts{l.reqs.Swap(0), l.fails.Swap(0), l.late.Swap(0), l.clientLate.Swap(0), l.dropped.Swap(0)}
}

// eloopFor is whether the loop can run the target: HTTP or HTTPS over keep-alive.
func eloopFor(t *target) bool { return t.reuse }
