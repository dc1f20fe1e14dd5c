package ingressbench

import (
	"strings"
	"testing"
)

// The request is built once and written as is: a Host value must never add a header.
func TestHostWithControlCharactersIsRefused(t *testing.T) {
	for _, host := range []string{"a\r\nX-Injected: 1", "a\nb", "a b", "a\x00", "a\x7f"} {
		if tg, err := newTarget("http://198.18.0.10/", host, true, 0); err == nil {
			t.Errorf("host %q accepted, request %q", host, tg.request)
		}
	}
}

func TestHostIsWrittenOnce(t *testing.T) {
	for host, want := range map[string]string{"": "198.18.0.10:8080", "bench.example": "bench.example", "[::1]:80": "[::1]:80"} {
		tg, err := newTarget("http://198.18.0.10:8080/1kb?x=1", host, false, 0)
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
