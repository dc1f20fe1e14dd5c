package ingressbench

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"go.k6.io/k6/lib"
)

// tlsServer is a real TLS server on loopback (Go's), with an ECDSA P-256 certificate made for
// the test: each connection's handshake, then one byte written, so that a TLS 1.3 client
// reads the session tickets sent after the handshake.
func tlsServer(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench.ingress.test"},
		DNSNames: []string{"bench.ingress.test"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.Write([]byte("x"))    //nolint:errcheck // the client reads it or the test fails
				c.Read(make([]byte, 1)) //nolint:errcheck // until the client closes
			}()
		}
	}()
	return ln.Addr().String()
}

// Each handshake counted by what it negotiated: the version k6's settings allow, the group
// offered alone, the suite, ALPN, and with tickets every connection after the first resumed.
func TestHandshakesNegotiateWhatTheTargetOffers(t *testing.T) {
	addr := tlsServer(t)
	cases := []struct {
		version          uint16
		group            string
		resume           bool
		first, afterward string
	}{
		{tls.VersionTLS13, "x25519", true, "TLS 1.3 TLS_AES_128_GCM_SHA256 X25519 http/1.1 full", "TLS 1.3 TLS_AES_128_GCM_SHA256 X25519 http/1.1 resumed"},
		{tls.VersionTLS13, "p256", false, "TLS 1.3 TLS_AES_128_GCM_SHA256 CurveP256 http/1.1 full", "TLS 1.3 TLS_AES_128_GCM_SHA256 CurveP256 http/1.1 full"},
		{tls.VersionTLS12, "p256", true, "TLS 1.2 TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 CurveP256 http/1.1 full", "TLS 1.2 TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 CurveP256 http/1.1 resumed"},
		{tls.VersionTLS13, "x25519mlkem768", false, "TLS 1.3 TLS_AES_128_GCM_SHA256 X25519MLKEM768 http/1.1 full", "TLS 1.3 TLS_AES_128_GCM_SHA256 X25519MLKEM768 http/1.1 full"},
	}
	for _, c := range cases {
		run = outcomes{}
		st := &lib.State{TLSConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: c.version, MaxVersion: c.version, //nolint:gosec // a test certificate
			CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}}}
		tg, err := newTarget("https://"+addr+"/", "bench.ingress.test", true, 0, 0)
		if err == nil {
			err = tg.withTLS(st, c.group, c.resume, 3)
		}
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			raw, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			tc, err := tlsHandshake(context.Background(), st, tg, raw)
			if err == nil {
				_, err = tc.Read(make([]byte, 1))
			}
			raw.Close()
			if err != nil {
				t.Fatalf("%+v: %v", c, err)
			}
		}
		got := run.tlsExport()
		want := map[string]int64{c.first: 1}
		want[c.afterward] += 2
		for k, n := range want {
			if got[k] != n {
				t.Errorf("%+v: negotiated %v, want %v", c, got, want)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%+v: negotiated %v, want %v", c, got, want)
		}
	}
	if err := (&target{}).withTLS(&lib.State{}, "p384", false, 1); err == nil {
		t.Error("a group the settings do not have was taken")
	}
}
