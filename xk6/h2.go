package ingressbench

// HTTP/2 for the event loop (eloop_h2.go), the parts without a socket: the request's header
// blocks, made once per target, the connection's first frames, and the frame and HPACK
// readers' state. RFC 9113; HPACK (RFC 7541) by golang.org/x/net's encoder and decoder.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"time"

	"go.k6.io/k6/lib"
	"golang.org/x/net/http2/hpack"
)

const (
	h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

	h2Data, h2Headers, h2Priority, h2RstStream, h2Settings, h2PushPromise, h2Ping, h2Goaway, h2WindowUpdate, h2Continuation = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9

	h2EndStream, h2Ack, h2EndHeaders, h2Padded, h2PriorityFlag = 0x1, 0x1, 0x4, 0x8, 0x20

	h2SettingHeaderTable, h2SettingEnablePush, h2SettingMaxStreams, h2SettingInitialWindow = 1, 2, 3, 4

	// The client opens every window to the protocol's largest at the start, so that neither a
	// stream's nor the connection's window ever holds a response back (h2load's -w and -W do
	// the same); the connection's is topped up each time this much has been received.
	h2MaxWindow   = 1<<31 - 1
	h2WindowAfter = 1 << 30
	h2FrameMax    = 16384 // SETTINGS_MAX_FRAME_SIZE: the client keeps the default
	h2MaxStreamID = 1<<31 - 1
	h2CodeCancel  = 0x8
)

// h2Blocks are a target's request as HPACK header blocks, fixed for every connection:
// first adds the fields to the server's table (incremental indexing, as browsers and h2load
// do), next names them by their index; plain never indexes (a server whose table is smaller
// than the default), so each stays one constant copy per request.
type h2Blocks struct{ first, next, plain []byte }

func newH2Blocks(u *url.URL, host string) h2Blocks {
	scheme := "http"
	if u.Scheme == "https" {
		scheme = "https"
	}
	fields := []hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: scheme},
		{Name: ":authority", Value: host}, {Name: ":path", Value: u.RequestURI()}, {Name: "user-agent", Value: "ingress-bench-native/" + Version}}
	var b h2Blocks
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	block := func(sensitive bool) []byte {
		buf.Reset()
		for _, f := range fields {
			f.Sensitive = sensitive
			enc.WriteField(f) //nolint:errcheck // a bytes.Buffer does not fail
		}
		return bytes.Clone(buf.Bytes())
	}
	b.first, b.next = block(false), block(false)
	b.plain = block(true)
	return b
}

// withHTTP2 makes t's requests HTTP/2 streams, streams at once per connection.
func (t *target) withHTTP2(streams int) {
	u, _ := url.Parse(t.url) // parsed by newTarget already
	t.h2, t.streams, t.blocks = true, streams, newH2Blocks(u, t.host)
}

const errNoH2 = "it does not offer HTTP/2 over TLS: nginx-lb takes it with the http2 knob (VARIANT=…+http2)"

// appendFrame appends a frame's 9-byte header and payload.
func appendFrame(b []byte, typ, flags byte, stream uint32, payload ...byte) []byte {
	n := len(payload)
	b = append(b, byte(n>>16), byte(n>>8), byte(n), typ, flags)
	b = binary.BigEndian.AppendUint32(b, stream)
	return append(b, payload...)
}

func appendSetting(b []byte, id uint16, v uint32) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(b, id), v)
}

func appendWindowUpdate(b []byte, stream, n uint32) []byte {
	return appendFrame(b, h2WindowUpdate, 0, stream, binary.BigEndian.AppendUint32(nil, n)...)
}

// h2Start is what the client sends first: the preface, its settings (no server push, every
// stream's window the largest) and the connection's window opened as far.
func h2Start() []byte {
	var s []byte
	s = appendSetting(s, h2SettingEnablePush, 0)
	s = appendSetting(s, h2SettingInitialWindow, h2MaxWindow)
	b := appendFrame([]byte(h2Preface), h2Settings, 0, 0, s...)
	return appendWindowUpdate(b, 0, h2MaxWindow-65535)
}

// h2ReadSettings reads a SETTINGS frame's payload: the server's limit on concurrent streams
// (0: none said) and whether its HPACK table stays at least the default 4,096 bytes (the
// indexed blocks fit in it).
func h2ReadSettings(p []byte) (maxStreams uint32, smallTable bool, err error) {
	if len(p)%6 != 0 {
		return 0, false, fmt.Errorf("a SETTINGS frame of %d bytes", len(p))
	}
	for ; len(p) > 0; p = p[6:] {
		id, v := binary.BigEndian.Uint16(p), binary.BigEndian.Uint32(p[2:])
		switch id {
		case h2SettingMaxStreams:
			maxStreams = max(v, 1)
		case h2SettingHeaderTable:
			smallTable = v < 4096
		}
	}
	return maxStreams, smallTable, nil
}

// h2Begin starts HTTP/2 on nc (the TLS session after ALPN said h2, or the socket itself for
// h2c with prior knowledge): the client's preface, then the server's, a SETTINGS frame, read
// whole (nothing past it: the loop reads what follows) and acknowledged.
func h2Begin(nc net.Conn, streams int, timeout time.Duration) (*h2Conn, error) {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	nc.SetDeadline(time.Now().Add(timeout)) //nolint:errcheck // a failed one shows as the read's error
	defer nc.SetDeadline(time.Time{})       //nolint:errcheck
	if _, err := nc.Write(h2Start()); err != nil {
		return nil, err
	}
	var head [9]byte
	if _, err := io.ReadFull(nc, head[:]); err != nil {
		return nil, fmt.Errorf("HTTP/2: no preface from the server: %w", err)
	}
	n := int(head[0])<<16 | int(head[1])<<8 | int(head[2])
	if head[3] != h2Settings || head[4]&h2Ack != 0 || n > h2FrameMax {
		return nil, fmt.Errorf("the server did not answer in HTTP/2 (its first bytes: %q)", head[:])
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(nc, p); err != nil {
		return nil, fmt.Errorf("HTTP/2: the server's SETTINGS: %w", err)
	}
	limit, small, err := h2ReadSettings(p)
	if err != nil {
		return nil, err
	}
	if _, err := nc.Write(appendFrame(nil, h2Settings, h2Ack, 0)); err != nil {
		return nil, err
	}
	h := newH2Conn(streams)
	if limit > 0 {
		h.max = min(h.max, int(limit))
	}
	h.plain = small
	return h, nil
}

// h2Stream is a request in flight on an HTTP/2 connection.
type h2Stream struct {
	id     uint32
	status int
	body   int64
	start  time.Time
}

// h2Conn is an HTTP/2 connection's state in the loop.
type h2Conn struct {
	dec       *hpack.Decoder
	status    int    // the :status of the header block being read
	inBlock   uint32 // the stream whose header block continues (CONTINUATION), 0 none
	blockEnds bool   // that block's HEADERS frame ended its stream
	next      uint32 // the next stream's identifier
	max       int    // streams at once: the setting, at most the server's limit
	plain     bool   // the server's HPACK table is smaller than the default
	sent      bool   // the first block (the indexing one) went out
	streams   []h2Stream
	received  int64  // DATA bytes since the connection's window was last topped up
	goaway    bool   // the server said it takes no new streams: close when the last ends
	out       []byte // frames to write at the end of this read (ACKs, window, resets)
}

func newH2Conn(streams int) *h2Conn {
	h := &h2Conn{next: 1, max: streams}
	h.dec = hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		// :status comes first (pseudo-header fields precede the rest): the other fields are
		// decoded into the table, not handed over.
		if f.Name == ":status" {
			if n, ok := decimal([]byte(f.Value)); ok && len(f.Value) == 3 {
				h.status = int(n)
			}
		}
		h.dec.SetEmitEnabled(false)
	})
	return h
}

func (h *h2Conn) find(id uint32) int {
	for i := range h.streams {
		if h.streams[i].id == id {
			return i
		}
	}
	return -1
}

// remove ends stream i (its order does not matter).
func (h *h2Conn) remove(i int) h2Stream {
	s := h.streams[i]
	last := len(h.streams) - 1
	h.streams[i] = h.streams[last]
	h.streams = h.streams[:last]
	return s
}

// block is the next request's header block.
func (h *h2Conn) block(b h2Blocks) []byte {
	switch {
	case h.plain:
		return b.plain
	case h.sent:
		return b.next
	}
	h.sent = true
	return b.first
}

var h2Errors = map[uint32]string{0: "NO_ERROR", 1: "PROTOCOL_ERROR", 2: "INTERNAL_ERROR", 3: "FLOW_CONTROL_ERROR", 5: "STREAM_CLOSED",
	6: "FRAME_SIZE_ERROR", 7: "REFUSED_STREAM", 8: "CANCEL", 9: "COMPRESSION_ERROR", 11: "ENHANCE_YOUR_CALM", 13: "HTTP_1_1_REQUIRED"}

func h2Code(c uint32) string {
	if s, ok := h2Errors[c]; ok {
		return s
	}
	return fmt.Sprintf("error 0x%x", c)
}

// frames reads the whole frames at the start of b: a response whose stream ended is handed
// to ended (err nil: complete, its status and body counted; else the server reset it),
// and so are the frames the client must answer (SETTINGS, PING) or the connection's
// window queued in h.out. Returns the bytes read (a partial frame is left for the next read)
// and an error that ends the connection. After a GOAWAY the streams the server did not take
// are dropped (never processed: a new connection sends their requests again), no new one
// starts, and the connection is closed when the last ends (h.goaway).
func (h *h2Conn) frames(b []byte, ended func(s h2Stream, err error)) (int, error) {
	read := 0
	for len(b)-read >= 9 {
		f := b[read:]
		n := int(f[0])<<16 | int(f[1])<<8 | int(f[2])
		if n > h2FrameMax {
			return read, fmt.Errorf("HTTP/2: a frame of %d bytes, above the %d the client allows", n, h2FrameMax)
		}
		if len(f) < 9+n {
			break
		}
		typ, flags, id, p := f[3], f[4], binary.BigEndian.Uint32(f[5:9])&h2MaxStreamID, f[9:9+n]
		read += 9 + n
		if h.inBlock != 0 && (typ != h2Continuation || id != h.inBlock) {
			return read, errors.New("HTTP/2: a header block interrupted by another frame")
		}
		var err error
		switch typ {
		case h2Data:
			h.received += int64(n)
			if p, err = unpad(flags, p); err == nil {
				if i := h.find(id); i >= 0 {
					h.streams[i].body += int64(len(p))
					if flags&h2EndStream != 0 {
						ended(h.remove(i), nil)
					}
				}
			}
		case h2Headers:
			if p, err = unpad(flags, p); err == nil && flags&h2PriorityFlag != 0 {
				if len(p) < 5 {
					err = errors.New("HTTP/2: a HEADERS frame too short for its priority")
				} else {
					p = p[5:]
				}
			}
			if err == nil {
				h.inBlock, h.blockEnds, h.status = id, flags&h2EndStream != 0, 0
				h.dec.SetEmitEnabled(true)
				err = h.fragment(p, flags, ended)
			}
		case h2Continuation:
			if h.inBlock == 0 {
				err = errors.New("HTTP/2: a CONTINUATION frame outside a header block")
			} else {
				err = h.fragment(p, flags, ended)
			}
		case h2RstStream:
			if len(p) != 4 {
				err = errors.New("HTTP/2: a RST_STREAM frame not of 4 bytes")
			} else if i := h.find(id); i >= 0 {
				ended(h.remove(i), fmt.Errorf("the server reset stream %d (%s)", id, h2Code(binary.BigEndian.Uint32(p))))
			}
		case h2Settings:
			if flags&h2Ack == 0 {
				var limit uint32
				var small bool
				if limit, small, err = h2ReadSettings(p); err == nil {
					if limit > 0 {
						h.max = min(h.max, int(limit))
					}
					if small && !h.plain {
						err = errors.New("HTTP/2: the server shrank its HPACK table below 4,096 bytes during the connection")
					}
					h.out = appendFrame(h.out, h2Settings, h2Ack, 0)
				}
			}
		case h2Ping:
			if flags&h2Ack == 0 {
				h.out = appendFrame(h.out, h2Ping, h2Ack, 0, p...)
			}
		case h2Goaway:
			if len(p) < 8 {
				err = errors.New("HTTP/2: a GOAWAY frame shorter than 8 bytes")
				break
			}
			last := binary.BigEndian.Uint32(p) & h2MaxStreamID
			h.goaway = true
			for i := len(h.streams) - 1; i >= 0; i-- {
				if h.streams[i].id > last {
					h.remove(i)
				}
			}
		case h2PushPromise:
			err = errors.New("HTTP/2: a PUSH_PROMISE, though the client disabled server push")
		}
		if err != nil {
			return read, err
		}
	}
	if h.received >= h2WindowAfter {
		h.out = appendWindowUpdate(h.out, 0, uint32(h.received))
		h.received = 0
	}
	return read, nil
}

// fragment decodes a piece of the header block; at its end the stream gets its status, and
// ends when the block's HEADERS frame said so (a response without a body, or trailers).
func (h *h2Conn) fragment(p []byte, flags byte, ended func(s h2Stream, err error)) error {
	if _, err := h.dec.Write(p); err != nil {
		return fmt.Errorf("HTTP/2: the server's header block: %w", err)
	}
	if flags&h2EndHeaders == 0 {
		return nil
	}
	id := h.inBlock
	h.inBlock = 0
	if err := h.dec.Close(); err != nil {
		return fmt.Errorf("HTTP/2: the server's header block: %w", err)
	}
	i := h.find(id)
	if i < 0 { // a stream the client no longer waits for (reset on its timeout)
		return nil
	}
	s := &h.streams[i]
	if s.status == 0 && (h.status < 100 || h.status >= 200) { // an interim 1xx response is skipped
		s.status = h.status
		if s.status == 0 {
			return fmt.Errorf("HTTP/2: stream %d's response has no :status", id)
		}
	}
	if h.blockEnds && s.status != 0 {
		ended(h.remove(i), nil)
	}
	return nil
}

// unpad returns a padded frame's data without its padding.
func unpad(flags byte, p []byte) ([]byte, error) {
	if flags&h2Padded == 0 {
		return p, nil
	}
	if len(p) < 1 || int(p[0]) >= len(p) {
		return nil, errors.New("HTTP/2: a frame's padding longer than the frame")
	}
	return p[1 : len(p)-int(p[0])], nil
}

// probeH2 sends t's request once on a new HTTP/2 connection of its own (over TLS by ALPN, or
// h2c), blocking, within t's timeout: setup's readiness check, by the load's own client.
func probeH2(ctx context.Context, st *lib.State, t *target) result {
	if t.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.timeout)
		defer cancel()
	}
	nc, err := st.Dialer.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return result{err: timedOut(ctx, err)}
	}
	defer nc.Close()
	if d, ok := ctx.Deadline(); ok {
		nc.SetDeadline(d) //nolint:errcheck // a failed one shows as a read's error
	}
	if t.tls {
		tc, err := tlsHandshake(ctx, st, t, nc)
		if err != nil {
			return result{err: err}
		}
		nc = tc
	}
	h, err := h2Begin(nc, 1, t.timeout)
	if err != nil {
		return result{err: err}
	}
	if d, ok := ctx.Deadline(); ok {
		nc.SetDeadline(d) //nolint:errcheck
	}
	h.streams = append(h.streams, h2Stream{id: h.next})
	if _, err = nc.Write(appendFrame(nil, h2Headers, h2EndStream|h2EndHeaders, h.next, h.block(t.blocks)...)); err != nil {
		return result{err: err}
	}
	var res *result
	buf, have := make([]byte, 64<<10), 0
	for res == nil {
		n, err := nc.Read(buf[have:])
		have += n
		used, perr := h.frames(buf[:have], func(s h2Stream, err error) { res = &result{status: s.status, bodyBytes: s.body, err: err} })
		switch {
		case perr != nil:
			return result{err: perr}
		case res == nil && err != nil:
			return result{err: timedOut(ctx, err)}
		case res == nil && h.goaway && len(h.streams) == 0:
			return result{err: errors.New("HTTP/2: the server sent GOAWAY before answering")}
		}
		have = copy(buf, buf[used:have])
		if len(h.out) > 0 {
			nc.Write(h.out) //nolint:errcheck // the ACKs the server waits for; a broken connection shows in the next read
			h.out = h.out[:0]
		}
	}
	return *res
}
