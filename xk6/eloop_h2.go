//go:build linux

package ingressbench

// HTTP/2 connections of the event loop (h2.go has the protocol's parts): the connection's
// start on Go's socket, then its streams in the loop, each a request: a constant header
// block written per stream, the frames parsed off the loop's buffer (a partial frame carried
// over), the client's answers (SETTINGS and PING ACKs, the connection's window) written
// after each read. The closed model keeps every connection's streams full.

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"go.k6.io/k6/lib"
)

// sendH2 fills c's free streams with requests at now, dialling first when c has no
// connection (or its last one ended after a GOAWAY); true when c has streams in flight.
func (l *eloop) sendH2(ctx context.Context, st *lib.State, c *econn, now time.Time) bool {
	if c.h2 != nil && c.h2.goaway && len(c.h2.streams) == 0 {
		l.closeConn(c)
	}
	if c.fd < 0 {
		c.start = now
		if err := l.redial(ctx, st, c); err != nil {
			l.finish(c, result{err: err})
			return false
		}
	}
	h := c.h2
	for len(h.streams) < h.max && !h.goaway {
		h.out = appendFrame(h.out, h2Headers, h2EndStream|h2EndHeaders, h.next, h.block(l.t.blocks)...)
		h.streams = append(h.streams, h2Stream{id: h.next, start: now})
		if h.next += 2; h.next > h2MaxStreamID {
			h.goaway = true // out of stream identifiers: the connection ends with its last stream
		}
	}
	if err := l.flushH2(c); err != nil {
		l.failStreams(c, err, err)
		return false
	}
	c.busy = len(h.streams) > 0
	return c.busy
}

// flushH2 writes the frames c queued.
func (l *eloop) flushH2(c *econn) error {
	h := c.h2
	if len(h.out) == 0 {
		return nil
	}
	var err error
	if c.tc != nil {
		_, err = c.tc.Write(h.out)
	} else {
		_, err = writeAll(c.fd, h.out, l.bytesSent)
	}
	h.out = h.out[:0]
	return err
}

// readableH2 reads c's socket (all the TLS session holds, on https) and parses the frames;
// true when streams ended (recorded) or the connection did.
func (l *eloop) readableH2(c *econn) bool {
	before := len(c.h2.streams)
	for {
		k := copy(l.buf, c.carry)
		var r int
		var err error
		if c.tc != nil {
			r, err = c.tc.Read(l.buf[k:])
		} else {
			n, _, errno := syscall.RawSyscall(syscall.SYS_READ, uintptr(c.fd), uintptr(unsafe.Pointer(&l.buf[k])), uintptr(len(l.buf)-k))
			switch {
			case errno == syscall.EAGAIN:
				err = errAgain
			case errno != 0:
				err = errno
			case n == 0:
				err = io.EOF
			default:
				r = int(n)
				atomic.AddInt64(l.bytesRead, int64(n))
			}
		}
		if r > 0 {
			b := l.buf[:k+r]
			used, perr := c.h2.frames(b, func(s h2Stream, err error) {
				l.record(c, s.start, result{status: s.status, bodyBytes: s.body, err: err})
			})
			if perr == nil {
				perr = l.flushH2(c)
			}
			if perr != nil {
				l.failStreams(c, perr, perr)
				return true
			}
			c.carry = append(c.carry[:0], b[used:]...)
		}
		switch {
		case err == nil && c.tc != nil:
			continue // the session may hold more records than the socket shows
		case err == nil || errors.Is(err, errAgain):
		case c.h2.goaway && len(c.h2.streams) == 0:
			l.closeConn(c) // the server closed after its GOAWAY, every stream answered
			return true
		default:
			l.failStreams(c, err, err)
			return true
		}
		if c.h2.goaway && len(c.h2.streams) == 0 {
			l.closeConn(c)
		}
		c.busy = c.h2 != nil && len(c.h2.streams) > 0
		return c.h2 == nil || len(c.h2.streams) < before
	}
}

// failStreams records every stream in flight on c as failed (the oldest's error first, the
// others') and closes c.
func (l *eloop) failStreams(c *econn, first, others error) {
	if c.h2 != nil {
		for i, s := range c.h2.streams {
			err := others
			if i == 0 {
				err = first
			}
			l.record(c, s.start, result{err: err})
		}
	}
	l.closeConn(c)
}

// expiredH2 ends c when a stream of it is past the target's timeout: that one as a timeout;
// the connection is closed (a server gone without a reset), its other streams failed so.
func (l *eloop) expiredH2(c *econn, now time.Time) bool {
	oldest := 0
	for i, s := range c.h2.streams {
		if s.start.Before(c.h2.streams[oldest].start) {
			oldest = i
		}
	}
	if len(c.h2.streams) == 0 || now.Sub(c.h2.streams[oldest].start) <= l.t.timeout {
		return false
	}
	c.h2.streams[0], c.h2.streams[oldest] = c.h2.streams[oldest], c.h2.streams[0]
	l.failStreams(c, errTimeout, errors.New("its connection closed when another stream timed out"))
	return true
}
