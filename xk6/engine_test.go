package ingressbench

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The request is built once and written as is: a Host value must never add a header.
func TestHostWithControlCharactersIsRefused(t *testing.T) {
	for _, host := range []string{"a\r\nX-Injected: 1", "a\nb", "a b", "a\x00", "a\x7f"} {
		if tg, err := newTarget("http://198.18.0.10/", host, true, 0, 0); err == nil {
			t.Errorf("host %q accepted, request %q", host, tg.request)
		}
	}
}

func TestHostIsWrittenOnce(t *testing.T) {
	for host, want := range map[string]string{"": "198.18.0.10:8080", "bench.example": "bench.example", "[::1]:80": "[::1]:80"} {
		tg, err := newTarget("http://198.18.0.10:8080/1kb?x=1", host, false, 0, 0)
		if err != nil {
			t.Fatalf("host %q: %v", host, err)
		}
		req := string(tg.request)
		if !strings.HasPrefix(req, "GET /1kb?x=1 HTTP/1.1\r\nHost: "+want+"\r\n") || strings.Count(req, "\r\n") != 5 ||
			!strings.HasSuffix(req, "Connection: close\r\n\r\n") {
			t.Errorf("host %q: request %q", host, req)
		}
	}
}

// run()'s options: each refused with the option named; the open model's schedule complete.
func TestOptionsAreChecked(t *testing.T) {
	for _, c := range []struct {
		o    map[string]any
		want string
	}{
		{map[string]any{"conections": 5.0}, "unknown option 'conections'"},
		{map[string]any{"connections": 0.0}, "connections must be a whole number of at least 1"},
		{map[string]any{"connections": 2.5}, "connections must be a whole number of at least 1"},
		{map[string]any{"url": 3.0}, "url must be a string"},
		{map[string]any{"reuse": "yes"}, "reuse must be true or false"},
		{map[string]any{"sliceMs": -1.0}, "sliceMs must be a number of at least 0"},
		{map[string]any{"rate": 100.0, "sliceMs": 100.0, "endMs": 2.0}, "rate needs sliceMs, startMs and endMs"},
		{map[string]any{"rate": 100.0, "sliceMs": 100.0, "endMs": 2.0, "startMs": 1.0, "connections": 3.0, "firstConnection": 8.0, "totalConnections": 10.0},
			"firstConnection 8 + connections 3 must be whole and at most totalConnections 10"},
	} {
		if _, err := parseOptions(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.o, err, c.want)
		}
	}
	r, err := parseOptions(map[string]any{"url": "http://198.18.0.2/", "rate": int64(400), "sliceMs": 100.0, "endMs": 2.0, "startMs": 1.0,
		"connections": 25.0, "firstConnection": 25.0, "totalConnections": 50.0})
	if err != nil || r.rate != 400 || r.connections != 25 || r.url != "http://198.18.0.2/" || !r.reuse {
		t.Errorf("a complete open-model call refused or misread: %+v %v", r, err)
	}
}

// A head read from a buffer as from a stream: incomplete until its blank line, then its size.
func TestParseHeadFromABuffer(t *testing.T) {
	full := "HTTP/1.1 200 OK\r\nServer: nginx\r\ncontent-length: 1024\r\nConnection: close\r\n\r\nbody"
	for cut := 0; cut < len(full)-4; cut++ {
		if _, size, err := parseHead([]byte(full[:cut])); size != 0 || err != nil {
			t.Fatalf("%d bytes: size %d, err %v before the blank line", cut, size, err)
		}
	}
	h, size, err := parseHead([]byte(full))
	if err != nil || size != len(full)-4 || h.status != 200 || h.length != 1024 || !h.closeAfter {
		t.Fatalf("got %+v size %d err %v", h, size, err)
	}
	for text, want := range map[string]string{
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n": "chunked",
		"HTTP/1.1 204 No Content\r\n\r\n":                       "no Content-Length",
		"SSH-2.0-OpenSSH_9.2\r\n\r\n":                           "malformed status line",
		"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n":          "malformed Content-Length",
		"HTTP/1.1 200 OK\r\n\nX: y\n\r\n\r\n":                   "no Content-Length", // bare LFs: read as lines, never a panic
	} {
		if _, _, err := parseHead([]byte(text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", text, err, want)
		}
	}
}

// go test -bench ParseHead: the head parser's cost per response (nginx's 1 KB response head).
func BenchmarkParseHead(b *testing.B) {
	head := []byte("HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Tue, 24 Nov 2026 06:30:00 GMT\r\n" +
		"Content-Type: application/octet-stream\r\nContent-Length: 1024\r\n" +
		"Last-Modified: Tue, 24 Nov 2026 06:00:00 GMT\r\nConnection: keep-alive\r\nETag: \"6543-400\"\r\n" +
		"Accept-Ranges: bytes\r\n\r\n" + strings.Repeat("x", 1024))
	for b.Loop() {
		if _, n, err := parseHead(head); n == 0 || err != nil {
			b.Fatal(n, err)
		}
	}
}

// After "Connection: close" the server closes first, as with ab: the client reads to its end
// of the stream, then resets the connection, so the server keeps no TIME_WAIT.
func TestTheServerClosesFirstAndTheClientResets(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const hold = 100 * time.Millisecond
	seen := make(chan [2]error, 1)
	go func() {
		s, err := ln.Accept()
		if err != nil {
			seen <- [2]error{err, err}
			return
		}
		defer s.Close()
		br := bufio.NewReader(s)
		if _, err := http.ReadRequest(br); err != nil {
			seen <- [2]error{err, err}
			return
		}
		s.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")) //nolint:errcheck
		// Before this side's FIN the client must wait; after it, it resets.
		s.SetReadDeadline(time.Now().Add(hold)) //nolint:errcheck
		_, before := br.ReadByte()
		s.(*net.TCPConn).CloseWrite()                  //nolint:errcheck
		s.SetReadDeadline(time.Now().Add(time.Second)) //nolint:errcheck
		_, after := br.ReadByte()
		seen <- [2]error{before, after}
	}()
	tg, err := newTarget("http://"+ln.Addr().String()+"/", "", false, 0, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := &conn{Conn: raw, r: bufio.NewReader(raw)}
	res, keep := c.do(context.Background(), nil, tg)
	if res.err != nil || res.status != 200 || res.bodyBytes != 2 || keep {
		t.Fatalf("result %+v keep %v", res, keep)
	}
	start := time.Now()
	c.close()
	got := <-seen
	if !errors.Is(got[0], os.ErrDeadlineExceeded) {
		t.Errorf("before the server's FIN its read ended with %v: the client closed first", got[0])
	}
	if !errors.Is(got[1], syscall.ECONNRESET) {
		t.Errorf("after the server's FIN its read ended with %v, not the client's reset", got[1])
	}
	if waited := time.Since(start); waited < hold/2 {
		t.Errorf("close returned after %v, before the server closed (it holds %v)", waited, hold)
	}
}
