//go:build linux

package ingressbench

import (
	"container/heap"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"go.k6.io/k6/lib"
	"go.k6.io/k6/lib/netext"
	"golang.org/x/sys/unix"
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
	tlsAt time.Duration // the handshake's time, reported with the connection's first request
	buf   []byte
	n     int   // bytes buffered, not yet parsed
	h     head  // the response's head once read (h.status > 0)
	left  int64 // body bytes still to come
	body  int64 // body bytes read
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
	l := &eloop{epfd: epfd, t: t, events: make([]syscall.EpollEvent, connections), e: e, done: make(chan struct{})}
	l.set = os.NewFile(uintptr(epfd), "eloop")
	if l.poll, err = l.set.SyscallConn(); err != nil {
		l.set.Close()
		return nil, fmt.Errorf("epoll set: %w", err)
	}
	l.ctx, l.stop = context.WithCancel(context.Background())
	for i := range connections {
		c := &econn{i: int32(i), fd: -1, buf: make([]byte, eloopBuffer)}
		if sched != nil {
			c.s = sched(i)
		}
		l.conns = append(l.conns, c)
	}
	return l, nil
}

// dial connects c through k6's dialer and takes its socket over; on an https target the
// TLS handshake runs first, on Go's socket, and the session then continues on the loop's.
func (l *eloop) dial(ctx context.Context, st *lib.State, c *econn) error {
	nc, err := st.Dialer.DialContext(ctx, "tcp", l.t.addr)
	if err != nil {
		return err
	}
	defer nc.Close() // Go's descriptor; the loop keeps its duplicate
	kc, ok := nc.(*netext.Conn)
	if !ok {
		return fmt.Errorf("k6's dialer returned a %T, not its own connection", nc)
	}
	sc, ok := kc.Conn.(syscall.Conn)
	if !ok {
		return fmt.Errorf("k6's dialer returned a %T, not a socket", kc.Conn)
	}
	l.counters.Do(func() { l.bytesRead, l.bytesSent = kc.BytesRead, kc.BytesWritten }) // the VU's dialer's
	if l.t.tls {
		s, start := &sock{Conn: nc, fd: -1, l: l}, time.Now()
		tc, err := tlsHandshake(ctx, st, l.t, s)
		if err != nil {
			return err
		}
		c.tc, c.sock, c.tlsAt = tc, s, time.Since(start)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	fd, derr := -1, error(nil)
	if err = raw.Control(func(f uintptr) { fd, derr = syscall.Dup(int(f)) }); err != nil || derr != nil {
		return errors.Join(err, derr)
	}
	syscall.CloseOnExec(fd)
	// Non-blocking already: the flag belongs to the socket's open file, which both share.
	// The event's data is c's index, not the descriptor: a slice index, not a map lookup, per
	// event (the map cost 4% of the client's CPU). A stale event of a closed descriptor finds
	// the connection idle or its new socket not yet readable (EAGAIN): both are ignored.
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: c.i}
	if err = syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		syscall.Close(fd)
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	c.fd = fd
	if c.sock != nil {
		c.sock.fd = fd
	}
	return nil
}

func (l *eloop) closeConn(c *econn) {
	if c.tc != nil {
		c.tc.Close() // its close_notify, as the other path's TLS connections send it
		c.tc, c.sock = nil, nil
	}
	if c.fd >= 0 {
		syscall.Close(c.fd) // also leaves the epoll set
		c.fd = -1
	}
	c.n, c.busy = 0, false
}

// send starts a request on c at now, dialling first when it has no socket; false when it
// could not (the failure is recorded as the request's result).
func (l *eloop) send(ctx context.Context, st *lib.State, c *econn, now time.Time) bool {
	c.start = now
	if c.fd < 0 {
		dctx := ctx
		if l.t.timeout > 0 {
			var cancel context.CancelFunc
			dctx, cancel = context.WithTimeout(ctx, l.t.timeout)
			defer cancel()
		}
		if err := l.dial(dctx, st, c); err != nil {
			l.finish(c, result{err: timedOut(dctx, err)})
			return false
		}
	}
	if c.tc != nil {
		if _, err := c.tc.Write(l.t.request); err != nil {
			l.finish(c, result{err: err})
			return false
		}
	} else {
		w, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(c.fd), uintptr(unsafe.Pointer(&l.t.request[0])), uintptr(len(l.t.request)))
		if errno != 0 || int(w) != len(l.t.request) {
			// The previous response was read whole, so the socket's send buffer is empty: a
			// short write of a ~100-byte request means the connection is broken.
			err := error(errno)
			if errno == 0 {
				err = fmt.Errorf("short write: %d of %d bytes", w, len(l.t.request))
			}
			l.finish(c, result{err: err})
			return false
		}
		atomic.AddInt64(l.bytesSent, int64(w))
	}
	c.h, c.body, c.busy = head{}, 0, true
	return true
}

// finish records c's request, and closes c when it is not to be reused.
func (l *eloop) finish(c *econn, res result) {
	now := time.Now()
	l.ended = now
	res.tlsTime, c.tlsAt = c.tlsAt, 0
	from := c.start
	if c.s != nil {
		from, c.free = c.from, now
		serviceLatency.add(now.Sub(c.start))
	}
	l.e.add(now, now.Sub(from), res)
	l.reqs.Add(1)
	if res.failed() {
		l.fails.Add(1)
	}
	c.busy = false
	if res.err != nil || c.h.closeAfter {
		l.closeConn(c)
	}
}

// readable reads c's socket once and parses what it holds; true when the request ended.
func (l *eloop) readable(c *econn) bool {
	if c.tc != nil {
		return l.readableTLS(c)
	}
	n, _, errno := syscall.RawSyscall(syscall.SYS_READ, uintptr(c.fd), uintptr(unsafe.Pointer(&c.buf[c.n])), uintptr(len(c.buf)-c.n))
	switch {
	case errno == syscall.EAGAIN:
		return false
	case errno != 0:
		l.finish(c, result{err: errno})
		return true
	case n == 0:
		l.finish(c, result{err: errClosedEarly})
		return true
	}
	atomic.AddInt64(l.bytesRead, int64(n))
	done, complete := l.parse(c, int(n))
	return done || complete
}

// readableTLS reads c's session until its response is whole or the socket has nothing more
// (errAgain): the bytes the session already took from the socket may hold more records, of
// which epoll knows nothing.
func (l *eloop) readableTLS(c *econn) bool {
	for {
		r, err := c.tc.Read(c.buf[c.n:])
		if r > 0 { // with io.EOF when the server's close_notify follows: the bytes first
			if done, complete := l.parse(c, r); done || complete {
				if err != nil {
					l.closeConn(c) // closed by the server after this response
				}
				return true
			}
		}
		switch {
		case errors.Is(err, errAgain):
			return false
		case err != nil:
			l.finish(c, result{err: err})
			return true
		}
	}
}

var errClosedEarly = errors.New("the server closed the connection before its response ended")

// parse takes r more bytes of c's response: done when the request ended in an error,
// complete when its response is whole (both recorded).
func (l *eloop) parse(c *econn, r int) (done, complete bool) {
	c.n += r
	if c.h.status == 0 {
		h, size, err := parseHead(c.buf[:c.n])
		switch {
		case err != nil:
			l.finish(c, result{status: h.status, err: err})
			return true, false
		case size == 0 && c.n == len(c.buf):
			l.finish(c, result{err: fmt.Errorf("a response head longer than %d bytes", len(c.buf))})
			return true, false
		case size == 0:
			return false, false
		}
		c.h, c.left = h, h.length
		c.n = copy(c.buf, c.buf[size:c.n])
	}
	take := min(c.left, int64(c.n))
	c.left, c.body = c.left-take, c.body+take
	c.n = copy(c.buf, c.buf[take:c.n])
	if c.left > 0 {
		return false, false
	}
	if c.n > 0 { // one request in flight: bytes past its response are the server's error
		l.finish(c, result{status: c.h.status, err: fmt.Errorf("%d bytes past the response's end", c.n)})
		return true, false
	}
	l.finish(c, result{status: c.h.status, bodyBytes: c.body})
	return false, true
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
			busy--
			// The next request starts when the last ended (one clock read less per request).
			if l.ended.Before(end) && l.send(ctx, st, c, l.ended) {
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
			if c.busy && now.Sub(c.start) > l.t.timeout {
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
	for _, c := range l.conns {
		if c.busy {
			l.finish(c, result{err: fmt.Errorf("epoll_wait: %w", err)})
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

// sock is the socket under a TLS session of the loop: Go's connection (k6's, counting its
// bytes) during the handshake, then the loop's non-blocking descriptor, read without
// waiting: errAgain, a temporary net.Error, tells crypto/tls that nothing more is there yet
// and leaves the session intact, with any partial record kept for the next read.
type sock struct {
	net.Conn
	fd int
	l  *eloop
}

type again struct{}

func (again) Error() string   { return "nothing to read yet" }
func (again) Timeout() bool   { return false }
func (again) Temporary() bool { return true }

var errAgain net.Error = again{}

func (s *sock) Read(p []byte) (int, error) {
	if s.fd < 0 {
		return s.Conn.Read(p)
	}
	r, _, errno := syscall.RawSyscall(syscall.SYS_READ, uintptr(s.fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	switch {
	case errno == syscall.EAGAIN:
		return 0, errAgain
	case errno != 0:
		return 0, errno
	case r == 0:
		return 0, io.EOF
	}
	atomic.AddInt64(s.l.bytesRead, int64(r))
	return int(r), nil
}

// Write writes p whole: a full send buffer (a request is one small record, so hardly ever)
// is waited out in poll(2), for the 5 s crypto/tls itself gives a close_notify at most.
func (s *sock) Write(p []byte) (int, error) {
	if s.fd < 0 {
		return s.Conn.Write(p)
	}
	done := 0
	for done < len(p) {
		w, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(s.fd), uintptr(unsafe.Pointer(&p[done])), uintptr(len(p)-done))
		switch {
		case errno == syscall.EAGAIN:
			fds := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLOUT}}
			if k, err := unix.Poll(fds, 5000); err != nil || k == 0 {
				return done, errors.Join(errors.New("the socket accepted no more bytes for 5 s"), err)
			}
			continue
		case errno != 0:
			return done, errno
		}
		atomic.AddInt64(s.l.bytesSent, int64(w))
		done += int(w)
	}
	return done, nil
}

// Close: the loop closes the descriptor itself (closeConn).
func (s *sock) Close() error {
	if s.fd < 0 {
		return s.Conn.Close()
	}
	return nil
}

// Deadlines apply to Go's socket only; the loop's never blocks (but in Write, bounded).
func (s *sock) SetDeadline(t time.Time) error {
	if s.fd < 0 {
		return s.Conn.SetDeadline(t)
	}
	return nil
}

func (s *sock) SetReadDeadline(t time.Time) error {
	if s.fd < 0 {
		return s.Conn.SetReadDeadline(t)
	}
	return nil
}

func (s *sock) SetWriteDeadline(t time.Time) error {
	if s.fd < 0 {
		return s.Conn.SetWriteDeadline(t)
	}
	return nil
}
