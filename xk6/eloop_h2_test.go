//go:build linux

package ingressbench

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"go.k6.io/k6/lib"
	"go.k6.io/k6/lib/netext"
	"go.k6.io/k6/lib/types"
	"go.k6.io/k6/metrics"
)

// loopState is a VU's state as k6 gives it, enough for the event loop: its dialer, TLS
// settings, sample channel (drained) and tags.
func loopState(t *testing.T) *lib.State {
	t.Helper()
	reg := metrics.NewRegistry()
	samples := make(chan metrics.SampleContainer, 64)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-samples:
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() { close(done) })
	return &lib.State{
		Dialer:         netext.NewDialer(net.Dialer{Timeout: 5 * time.Second}, netext.NewResolver(net.LookupIP, 0, types.DNSfirst, types.DNSpreferIPv4)),
		TLSConfig:      &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}, //nolint:gosec // httptest's certificate
		Samples:        samples,
		BuiltinMetrics: metrics.RegisterBuiltinMetrics(reg),
		Tags:           lib.NewVUStateTags(reg.RootTagSet()),
		Logger:         &logrus.Logger{Out: io.Discard, Formatter: new(logrus.TextFormatter), Level: logrus.WarnLevel},
	}
}

// Against Go's own HTTP/2 server, over TLS (ALPN h2) and cleartext (h2c, prior knowledge):
// 3 connections of 4 streams each are all in flight at once (the server's first 12 requests
// wait for each other), every request is counted once by client and server alike, and a
// request the server resets on its stream fails alone: the other streams of its connection
// go on, and the connection too (one connection per loop connection, never redialled).
func TestHTTP2StreamsAreCountedAndAResetFailsOneStream(t *testing.T) {
	for _, secure := range []bool{true, false} {
		const conns, streams, together = 3, 4, 3 * 4
		var served, reset, accepted atomic.Int64
		var all sync.WaitGroup
		all.Add(together)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor != 2 {
				t.Errorf("a request in %s", r.Proto)
			}
			if n := served.Add(1); n <= together {
				all.Done()
				wait := make(chan struct{})
				go func() { all.Wait(); close(wait) }()
				select {
				case <-wait:
				case <-time.After(3 * time.Second):
					t.Errorf("request %d waited 3 s: the %d streams were not all in flight at once", n, together)
				}
			} else if n%7 == 0 {
				reset.Add(1)
				panic(http.ErrAbortHandler) // RST_STREAM on this stream only
			}
			w.Write([]byte("hello")) //nolint:errcheck
		})
		srv := httptest.NewUnstartedServer(h)
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				accepted.Add(1)
			}
		}
		srv.Config.ErrorLog = nil
		url := "http://"
		if secure {
			srv.EnableHTTP2 = true
			srv.StartTLS()
			url = "https://"
		} else {
			srv.Config.Protocols = new(http.Protocols)
			srv.Config.Protocols.SetUnencryptedHTTP2(true)
			srv.Start()
		}
		url += srv.Listener.Addr().String() + "/x"

		run = outcomes{}
		st := loopState(t)
		tg, err := newTarget(url, "bench.ingress.test", true, 5, 5*time.Second)
		if err == nil {
			err = tg.withTLS(st, "", false, conns)
		}
		if err != nil {
			t.Fatal(err)
		}
		tg.withHTTP2(streams)
		e := &emitter{st: st, t: tg, tally: tally{checks: map[string]*[2]int64{}}, byStatus: map[int]*metrics.TagSet{},
			checkTags: map[string]*metrics.TagSet{}, requests: map[int]float64{}}
		l, err := newEloop(tg, conns, e, nil)
		if err != nil {
			t.Fatal(err)
		}
		end := time.Now().Add(400 * time.Millisecond)
		go l.serve(st, end)
		got := l.collect(t.Context(), end, true)
		srv.Close()

		if got.reqs != served.Load() || got.fails != reset.Load() || reset.Load() == 0 || accepted.Load() != conns {
			t.Errorf("secure %v: the client counted %d requests, %d failed; the server %d, %d reset, on %d connections (want %d)",
				secure, got.reqs, got.fails, served.Load(), reset.Load(), accepted.Load(), conns)
		}
		if e.tags(200).Map()["proto"] != "HTTP/2.0" {
			t.Errorf("proto tag %q", e.tags(200).Map()["proto"])
		}
	}
}
