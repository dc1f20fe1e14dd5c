package ingressbench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.k6.io/k6/lib"
	"go.k6.io/k6/lib/netext"
	"go.k6.io/k6/metrics"
)

// target is one scenario's request, parsed once per VU.
type target struct {
	addr, host, url string
	tls             bool
	reuse           bool
	bodyBytes       int64
	timeout         time.Duration // a request's, dial to last byte (0: none)
	request         []byte        // the whole request, written as is
	// TLS, beside k6's settings (its versions, ciphers, verification): the groups offered
	// (nil: Go's default), and the VU's session cache when sessions are resumed (nil: never).
	groups   []tls.CurveID
	sessions tls.ClientSessionCache
	tlsTag   string // k6/http's tls_version tag: the version k6's settings allow at most
	// HTTP/2 (h2 over TLS by ALPN, h2c by prior knowledge on http://): streams in flight per
	// connection, and the request's header blocks.
	h2      bool
	streams int
	blocks  h2Blocks
}

// tlsGroups are the TLS_GROUP settings' offers: X25519 (with P-256 listed after it: on TLS 1.2
// an ECDSA P-256 certificate is only served to a client that lists its curve; the server
// takes X25519, the client's first, and on TLS 1.3 the client's one key share is X25519's),
// P-256 alone, or Go's default list with the hybrid post-quantum key share first (stated, not
// left to GODEBUG and the Go release).
var tlsGroups = map[string][]tls.CurveID{
	"x25519":         {tls.X25519, tls.CurveP256},
	"p256":           {tls.CurveP256},
	"x25519mlkem768": {tls.X25519MLKEM768, tls.X25519, tls.CurveP256, tls.CurveP384, tls.CurveP521},
}

// withTLS sets t's TLS offers: GROUP (a TLS_GROUP value; "" leaves Go's default) and whether
// a new connection resumes a session the server gave an earlier one (tickets).
func (t *target) withTLS(st *lib.State, group string, resume bool, connections int) error {
	if group != "" {
		g, ok := tlsGroups[group]
		if !ok {
			return fmt.Errorf("tlsGroup must be one of x25519, p256, x25519mlkem768, got %q", group)
		}
		t.groups = g
	}
	if resume {
		t.sessions = tls.NewLRUClientSessionCache(connections)
	}
	t.tlsTag = "tls1.2"
	if st.TLSConfig != nil && st.TLSConfig.MaxVersion == tls.VersionTLS13 {
		t.tlsTag = "tls1.3"
	}
	return nil
}

func newTarget(rawURL, host string, reuse bool, bodyBytes int64, timeout time.Duration) (*target, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the native engine needs an http:// or https:// URL, got %q", rawURL)
	}
	t := &target{addr: u.Host, host: host, url: rawURL, tls: u.Scheme == "https", reuse: reuse, bodyBytes: bodyBytes, timeout: timeout}
	if u.Port() == "" {
		t.addr = net.JoinHostPort(u.Hostname(), map[bool]string{true: "443", false: "80"}[t.tls])
	}
	if t.host == "" {
		t.host = u.Host
	}
	// The Host value is written into the request as is: a CR, LF or any other control
	// character or space would split the header and inject others, so refuse it here, for
	// every caller of the engine, not only the scenarios whose settings are checked.
	if i := strings.IndexFunc(t.host, func(r rune) bool { return r <= ' ' || r == 0x7f }); i >= 0 {
		return nil, fmt.Errorf("the Host header value %q has a control character or space at byte %d", t.host, i)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: ingress-bench-native/%s\r\n", u.RequestURI(), t.host, Version)
	if !reuse {
		b.WriteString("Connection: close\r\n")
	}
	b.WriteString("\r\n")
	t.request = b.Bytes()
	return t, nil
}

// conn is a VU's connection: a raw HTTP/1.1 client, one request at a time, on k6's own
// dialer (its network options and the data_sent/data_received accounting stay k6's).
type conn struct {
	net.Conn
	r            *bufio.Reader
	serverCloses bool // the last response said Connection: close
}

// result of one request.
type result struct {
	status    int
	bodyBytes int64
	tlsTime   time.Duration // 0 when the connection was reused
	err       error
}

// do sends one request on c (dialing first when c has no connection) and reads the whole
// response. The caller closes c on error or when the server or the scenario ends reuse.
func (c *conn) do(ctx context.Context, st *lib.State, t *target) (res result, keep bool) {
	var deadline time.Time
	if t.timeout > 0 {
		deadline = time.Now().Add(t.timeout)
	}
	if c.Conn == nil {
		dctx := ctx
		if t.timeout > 0 {
			var cancel context.CancelFunc
			dctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
		raw, err := st.Dialer.DialContext(dctx, "tcp", t.addr)
		if err != nil {
			return result{err: timedOut(dctx, err)}, false
		}
		if t.timeout > 0 {
			raw.SetDeadline(deadline) //nolint:errcheck // a new socket: it takes a deadline
		}
		if t.tls {
			start := time.Now()
			tc, err := tlsHandshake(ctx, st, t, raw)
			if err != nil {
				raw.Close()
				return result{err: err}, false
			}
			res.tlsTime = time.Since(start)
			c.Conn = tc
		} else {
			c.Conn = raw
		}
		if c.r == nil {
			c.r = bufio.NewReaderSize(c.Conn, 64<<10)
		} else {
			c.r.Reset(c.Conn)
		}
	} else if t.timeout > 0 {
		c.Conn.SetDeadline(deadline) //nolint:errcheck // a failed one shows as the request's error
	}
	if _, err := c.Conn.Write(t.request); err != nil {
		res.err = err
		return res, false
	}
	h, err := readHead(c.r)
	if err != nil {
		res.err = err
		return res, false
	}
	res.status = h.status
	n, err := io.CopyN(io.Discard, c.r, h.length)
	res.bodyBytes = n
	if err != nil {
		res.err = err
		return res, false
	}
	c.serverCloses = h.closeAfter
	return res, t.reuse && !h.closeAfter
}

// timedOut is err, or errTimeout when the dial ran out of the request's time (the dialer
// says "context deadline exceeded" or "i/o timeout" by its own version).
func timedOut(ctx context.Context, err error) error {
	if ctx.Err() == context.DeadlineExceeded {
		return errTimeout
	}
	return err
}

// tlsHandshake starts a TLS session on raw with k6's TLS settings (its versions, ciphers,
// verification), as k6/http would for the target, offering the target's groups and
// resuming a session of its cache if it has one; what was negotiated is counted.
func tlsHandshake(ctx context.Context, st *lib.State, t *target, raw net.Conn) (*tls.Conn, error) {
	cfg := st.TLSConfig.Clone()
	cfg.ServerName = hostOnly(t.host)
	cfg.NextProtos = []string{"http/1.1"}
	if t.h2 {
		cfg.NextProtos = []string{"h2"}
	}
	cfg.CurvePreferences = t.groups
	cfg.ClientSessionCache = t.sessions
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		// A server that knows ALPN but not h2 ends the handshake with this alert (nginx does).
		if t.h2 && strings.HasSuffix(err.Error(), "tls: no application protocol") {
			err = fmt.Errorf("%s (%w)", errNoH2, err)
		}
		return tc, err
	}
	cs := tc.ConnectionState()
	run.negotiated(cs)
	if t.h2 && cs.NegotiatedProtocol != "h2" {
		return tc, fmt.Errorf("%s (ALPN: it chose %q)", errNoH2, cs.NegotiatedProtocol)
	}
	return tc, nil
}

// serverCloseWait bounds close's wait for a server that said Connection: close: its end of
// the stream follows the response at once, and this is ten periods of a CFS-throttled one.
const serverCloseWait = time.Second

// close ends c. After a response that said Connection: close it reads to the server's end of
// the stream (the server closes first, as with ab without -k), then resets the connection
// (SO_LINGER 0), so the server's socket ends without a TIME_WAIT: one run's TIME_WAITs must
// not meet the next run's connections (behind a NodePort the server's kernel drops their SYNs
// by PAWS, each a 1 s retransmit: docs/reference/scenarios.md#a-new-connection-per-request).
func (c *conn) close() {
	if c.Conn != nil {
		if c.serverCloses {
			c.Conn.SetReadDeadline(time.Now().Add(serverCloseWait)) //nolint:errcheck // then it closes at once
			if _, err := io.Copy(io.Discard, c.r); err == nil {
				abortive(c.Conn)
			}
		}
		c.Conn.Close()
		c.Conn = nil
		c.serverCloses = false
	}
}

// abortive makes nc's close a reset (SO_LINGER 0).
func abortive(nc net.Conn) {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	if kc, ok := nc.(*netext.Conn); ok {
		nc = kc.Conn
	}
	if tcp, ok := nc.(*net.TCPConn); ok {
		tcp.SetLinger(0) //nolint:errcheck
	}
}

var errClosedEarly = errors.New("the server closed the connection before its response ended")

var errChunked = errors.New("the native engine reads Content-Length bodies only (the response was chunked)")

// head is what the engine reads of a response's head.
type head struct {
	status     int
	length     int64 // Content-Length; -1 until one is read
	closeAfter bool  // Connection: close
}

// statusLine starts a head from its first line (with or without its CRLF).
func statusLine(line []byte) (head, error) {
	status, ok := int64(0), len(line) >= 12 && bytes.HasPrefix(line, []byte("HTTP/1.")) && line[8] == ' '
	if ok {
		status, ok = decimal(line[9:12])
	}
	if !ok {
		return head{}, fmt.Errorf("malformed status line %q", bytes.TrimSpace(line))
	}
	return head{status: int(status), length: -1}, nil
}

// header reads one header line (without its CRLF) into h.
func (h *head) header(line []byte) (err error) {
	colon := bytes.IndexByte(line, ':')
	// Only three names matter, told apart by their lengths first: most lines are skipped
	// without a comparison.
	if colon != len("Content-Length") && colon != len("Transfer-Encoding") && colon != len("Connection") {
		return nil
	}
	name, value := line[:colon], bytes.TrimSpace(line[colon+1:])
	switch {
	case bytes.EqualFold(name, []byte("Content-Length")):
		var ok bool
		if h.length, ok = decimal(value); !ok {
			return fmt.Errorf("malformed Content-Length %q", value)
		}
	case bytes.EqualFold(name, []byte("Transfer-Encoding")):
		return errChunked
	case bytes.EqualFold(name, []byte("Connection")):
		h.closeAfter = bytes.EqualFold(value, []byte("close"))
	}
	return nil
}

// decimal reads b's digits (at least one, at most 18: no overflow) without allocating, as
// strconv's would to keep its error's text.
func decimal(b []byte) (n int64, ok bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	for _, d := range b {
		if d < '0' || d > '9' {
			return 0, false
		}
		n = n*10 + int64(d-'0')
	}
	return n, true
}

// done checks the head once its blank line is read.
func (h *head) done() error {
	if h.length < 0 {
		return errors.New("the response has no Content-Length")
	}
	return nil
}

// readHead reads the status line and the headers the engine needs from r.
func readHead(r *bufio.Reader) (h head, err error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return h, err
	}
	if h, err = statusLine(line); err != nil {
		return h, err
	}
	for {
		if line, err = r.ReadSlice('\n'); err != nil {
			return h, err
		}
		if line = bytes.TrimRight(line, "\r\n"); len(line) == 0 {
			return h, h.done()
		}
		if err = h.header(line); err != nil {
			return h, err
		}
	}
}

// parseHead reads a head from the start of b in one pass, in place (nothing allocated per
// request): its length in bytes, 0 while b does not hold the whole head yet.
func parseHead(b []byte) (h head, size int, err error) {
	line := func() []byte { // the next line without its CRLF; nil when b has no whole one left
		i := bytes.IndexByte(b[size:], '\n')
		if i < 0 {
			return nil
		}
		l := bytes.TrimSuffix(b[size:size+i], []byte("\r"))
		size += i + 1
		return l
	}
	first := line()
	if first == nil {
		return h, 0, nil
	}
	if h, err = statusLine(first); err != nil {
		return h, 0, err
	}
	for {
		l := line()
		switch {
		case l == nil:
			return h, 0, nil
		case len(l) == 0:
			return h, size, h.done()
		}
		if err = h.header(l); err != nil {
			return h, 0, err
		}
	}
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// emitter turns results into what k6 gets of them, batched per call: http_reqs, a Counter,
// one sample per status and call carrying the count, with the tags k6/http would give it; the
// rest is counted in the run's outcomes and histograms (outcomes.go, latency.go), which k6
// gets once a second. With perRequest (REQUEST_SAMPLES=1) also k6/http's samples of every
// request, for k6's own outputs (CSV, JSON): http_req_duration, http_req_failed, the checks
// and, on TLS, http_req_tls_handshaking, whose Trends k6 keeps whole.
type emitter struct {
	st          *lib.State
	t           *target
	checkStatus string
	checkBody   string
	perRequest  bool
	byStatus    map[int]*metrics.TagSet
	checkTags   map[string]*metrics.TagSet
	requests    map[int]float64 // this call's requests by status
	tally       tally           // this call's outcomes
	samples     metrics.Samples
	logged      int // failed requests logged, as k6/http logs them ("Request Failed"), the first few
}

// logFailures: the failed requests each emitter (a connection's, or an epoll loop's for all
// of its connections) logs with their error, enough to say why a run failed, never a flood
// at a dead target's rate.
const logFailures = 3

func (e *emitter) tags(status int) *metrics.TagSet {
	if ts, ok := e.byStatus[status]; ok {
		return ts
	}
	ts := e.st.Tags.GetCurrentValues().Tags.
		With("method", "GET").With("url", e.t.url).With("name", e.t.url).
		With("proto", map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[e.t.h2]).With("status", strconv.Itoa(status)).
		With("expected_response", strconv.FormatBool(!(result{status: status}).failed()))
	if e.t.tls {
		ts = ts.With("tls_version", e.t.tlsTag)
	}
	e.byStatus[status] = ts
	return ts
}

// failed is k6/http's http_req_failed: an error, or a status outside 200-399.
func (r result) failed() bool { return r.err != nil || r.status < 200 || r.status >= 400 }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (e *emitter) add(now time.Time, dur time.Duration, res result) {
	if res.failed() && res.err != nil && e.logged < logFailures {
		e.logged++
		e.st.Logger.WithError(res.err).WithField("url", e.t.url).Warn("Request Failed (ingressbench)")
	}
	e.requests[res.status]++
	runLatency.add(dur)
	if res.tlsTime > 0 {
		tlsLatency.add(res.tlsTime)
	}
	timeline.add(now.Add(-dur), dur, res)
	ok := [2]bool{res.err == nil && res.status == 200, res.err == nil && res.bodyBytes == e.t.bodyBytes}
	e.tally.add(dur, res, [2]string{e.checkStatus, e.checkBody}, ok)
	if !e.perRequest {
		return
	}
	bm, ts := e.st.BuiltinMetrics, e.tags(res.status)
	failed := 0.0
	if res.failed() {
		failed = 1
	}
	e.samples = append(e.samples,
		metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: bm.HTTPReqDuration, Tags: ts}, Time: now, Value: ms(dur)},
		metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: bm.HTTPReqFailed, Tags: ts}, Time: now, Value: failed},
	)
	if e.t.tls {
		e.samples = append(e.samples, metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: bm.HTTPReqTLSHandshaking, Tags: ts}, Time: now, Value: ms(res.tlsTime)})
	}
	e.check(now, e.checkStatus, ok[0])
	e.check(now, e.checkBody, ok[1])
}

func (e *emitter) check(now time.Time, name string, ok bool) {
	if name == "" {
		return
	}
	v := 0.0
	if ok {
		v = 1
	}
	ts, found := e.checkTags[name]
	if !found {
		ts = e.st.Tags.GetCurrentValues().Tags.With("check", name)
		e.checkTags[name] = ts
	}
	e.samples = append(e.samples, metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: e.st.BuiltinMetrics.Checks, Tags: ts}, Time: now, Value: v})
}

// take returns this call's samples, with its http_reqs counts, and starts a new buffer (the
// one returned is k6's from then on); this call's outcomes go to the run's.
func (e *emitter) take() metrics.Samples {
	run.flush(&e.tally)
	now := time.Now()
	for status, n := range e.requests {
		e.samples = append(e.samples, metrics.Sample{TimeSeries: metrics.TimeSeries{Metric: e.st.BuiltinMetrics.HTTPReqs, Tags: e.tags(status)}, Time: now, Value: n})
		delete(e.requests, status)
	}
	out := e.samples
	e.samples = make(metrics.Samples, 0, cap(out))
	return out
}

// push hands samples to k6. A call stopped mid-slice (Ctrl-C, the end of a graceful stop)
// still pushes the requests it completed, which the server counted too: k6 reads samples
// until its outputs stop, after the VUs return; a second at most, never blocked for good.
// (PushIfNotDone alone dropped them: up to a slice, 100 ms of requests, on an interrupt.)
func push(ctx context.Context, ch chan<- metrics.SampleContainer, s metrics.Samples) {
	if len(s) == 0 {
		return
	}
	if ctx.Err() == nil {
		metrics.PushIfNotDone(ctx, ch, s)
		return
	}
	late, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	metrics.PushIfNotDone(late, ch, s)
}
