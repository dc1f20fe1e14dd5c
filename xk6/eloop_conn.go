//go:build linux

package ingressbench

// The event loop's connections (eloop.go): each dialled by k6's dialer and its socket taken
// over, a request written and its response read and parsed off the socket, and the socket as
// a net.Conn for the TLS session that continues on it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"go.k6.io/k6/lib"
	"go.k6.io/k6/lib/netext"
	"golang.org/x/sys/unix"
)

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
	// What HTTP/2 starts on: the socket, or the TLS session over it.
	var proto net.Conn = nc
	if l.t.tls {
		s, start := &sock{Conn: nc, fd: -1, l: l}, time.Now()
		tc, err := tlsHandshake(ctx, st, l.t, s)
		if err != nil {
			return err
		}
		c.tc, c.sock, c.tlsAt, proto = tc, s, time.Since(start), tc
	}
	if l.t.h2 {
		if c.h2, err = h2Begin(proto, l.t.streams, l.t.timeout); err != nil {
			return err
		}
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
	c.carry, c.busy, c.h2 = c.carry[:0], false, nil
}

// redial connects c, within the target's timeout.
func (l *eloop) redial(ctx context.Context, st *lib.State, c *econn) error {
	if l.t.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.t.timeout)
		defer cancel()
	}
	if err := l.dial(ctx, st, c); err != nil {
		return timedOut(ctx, err)
	}
	return nil
}

// send starts a request on c at now, dialling first when it has no socket; false when it
// could not (the failure is recorded as the request's result).
// On HTTP/2, it fills c's free streams.
func (l *eloop) send(ctx context.Context, st *lib.State, c *econn, now time.Time) bool {
	if l.t.h2 {
		return l.sendH2(ctx, st, c, now)
	}
	c.start = now
	if c.fd < 0 {
		if err := l.redial(ctx, st, c); err != nil {
			l.finish(c, result{err: err})
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
	l.record(c, c.start, res)
	c.busy = false
	if res.err != nil || c.h.closeAfter {
		l.closeConn(c)
	}
}

// record counts a request of c sent at start (an HTTP/2 stream's, or c's one).
func (l *eloop) record(c *econn, start time.Time, res result) {
	now := time.Now()
	l.ended = now
	res.tlsTime, c.tlsAt = c.tlsAt, 0
	from := start
	if c.s != nil {
		from, c.free = c.from, now
		serviceLatency.add(now.Sub(start))
	}
	l.e.add(now, now.Sub(from), res)
	l.reqs.Add(1)
	if res.failed() {
		l.fails.Add(1)
	}
}

// readable reads c's socket once and parses what it holds; true when the request ended.
// The bytes go to the loop's one buffer, after the part of a response head c carried over.
func (l *eloop) readable(c *econn) bool {
	if c.h2 != nil {
		return l.readableH2(c)
	}
	if c.tc != nil {
		return l.readableTLS(c)
	}
	k := copy(l.buf, c.carry)
	n, _, errno := syscall.RawSyscall(syscall.SYS_READ, uintptr(c.fd), uintptr(unsafe.Pointer(&l.buf[k])), uintptr(len(l.buf)-k))
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
	done, complete := l.parse(c, l.buf[:k+int(n)])
	return done || complete
}

// readableTLS reads c's session until its response is whole or the socket has nothing more
// (errAgain): the bytes the session already took from the socket may hold more records, of
// which epoll knows nothing.
func (l *eloop) readableTLS(c *econn) bool {
	for {
		k := copy(l.buf, c.carry)
		r, err := c.tc.Read(l.buf[k:])
		if r > 0 { // with io.EOF when the server's close_notify follows: the bytes first
			if done, complete := l.parse(c, l.buf[:k+r]); done || complete {
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

// parse takes b, c's response from where it was (a head carried over first): done when the
// request ended in an error, complete when its response is whole (both recorded). The body
// is counted, not kept; an incomplete head is carried over to the next read.
func (l *eloop) parse(c *econn, b []byte) (done, complete bool) {
	if c.h.status == 0 {
		h, size, err := parseHead(b)
		switch {
		case err != nil:
			l.finish(c, result{status: h.status, err: err})
			return true, false
		case size == 0 && len(b) == len(l.buf):
			l.finish(c, result{err: fmt.Errorf("a response head longer than %d bytes", len(l.buf))})
			return true, false
		case size == 0:
			c.carry = append(c.carry[:0], b...)
			return false, false
		}
		c.h, c.left, c.carry = h, h.length, c.carry[:0]
		b = b[size:]
	}
	take := min(c.left, int64(len(b)))
	c.left, c.body = c.left-take, c.body+take
	if c.left > 0 {
		return false, false
	}
	if extra := int64(len(b)) - take; extra > 0 { // one request in flight: bytes past its response are the server's error
		l.finish(c, result{status: c.h.status, err: fmt.Errorf("%d bytes past the response's end", extra)})
		return true, false
	}
	l.finish(c, result{status: c.h.status, bodyBytes: c.body})
	return false, true
}

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
	return writeAll(s.fd, p, s.l.bytesSent)
}

// writeAll writes p whole to the loop's descriptor fd, counting the bytes in sent.
func writeAll(fd int, p []byte, sent *int64) (int, error) {
	done := 0
	for done < len(p) {
		w, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&p[done])), uintptr(len(p)-done))
		switch {
		case errno == syscall.EAGAIN:
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
			if k, err := unix.Poll(fds, 5000); err != nil || k == 0 {
				return done, errors.Join(errors.New("the socket accepted no more bytes for 5 s"), err)
			}
			continue
		case errno != 0:
			return done, errno
		}
		atomic.AddInt64(sent, int64(w))
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
