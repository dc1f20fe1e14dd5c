package ingressbench

import (
	"bytes"
	"maps"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// A response as a server writes it: its header block (HPACK, the server's own encoder and
// table), in HEADERS and CONTINUATION frames, then DATA, padded or not.
type h2Server struct {
	enc *hpack.Encoder
	buf bytes.Buffer
}

func newH2Server() *h2Server {
	s := &h2Server{}
	s.enc = hpack.NewEncoder(&s.buf)
	return s
}

func (s *h2Server) block(status string) []byte {
	s.buf.Reset()
	for _, f := range []hpack.HeaderField{{Name: ":status", Value: status}, {Name: "server", Value: "nginx/1.22.1"},
		{Name: "content-type", Value: "application/octet-stream"}, {Name: "content-length", Value: "5"}} {
		s.enc.WriteField(f) //nolint:errcheck
	}
	return bytes.Clone(s.buf.Bytes())
}

// The frames of responses read as a stream cut anywhere: each stream ends once, with its
// status and body; a partial frame waits for the next read; the client's answers are queued.
func TestFramesAreReadWhereverTheReadsEnd(t *testing.T) {
	srv := newH2Server()
	var b []byte
	b = appendFrame(b, h2Settings, 0, 0, appendSetting(nil, h2SettingMaxStreams, 2)...)
	b = appendFrame(b, h2Ping, 0, 0, []byte("12345678")...)
	// stream 1: HEADERS split by a CONTINUATION, then padded DATA in two frames
	blk := srv.block("200")
	b = appendFrame(b, h2Headers, 0, 1, blk[:3]...)
	b = appendFrame(b, h2Continuation, h2EndHeaders, 1, blk[3:]...)
	b = appendFrame(b, h2Data, h2Padded, 1, append([]byte{2, 'a', 'b'}, 0, 0)...)
	// stream 3: a 404 without a body (HEADERS ends the stream), between stream 1's frames
	b = appendFrame(b, h2Headers, h2EndHeaders|h2EndStream, 3, srv.block("404")...)
	b = appendFrame(b, h2Data, h2EndStream, 1, []byte("cde")...)
	// stream 5: reset by the server; stream 7: a 100 Continue, then its response
	b = appendFrame(b, h2RstStream, 0, 5, 0, 0, 0, 2)
	b = appendFrame(b, h2Headers, h2EndHeaders, 7, srv.block("100")...)
	b = appendFrame(b, h2Headers, h2EndHeaders|h2EndStream, 7, srv.block("204")...)

	for cut := 1; cut < len(b); cut += 7 {
		h := newH2Conn(8)
		for _, id := range []uint32{1, 3, 5, 7} {
			h.streams = append(h.streams, h2Stream{id: id})
		}
		got := map[uint32]string{}
		end := func(s h2Stream, err error) {
			if _, twice := got[s.id]; twice {
				t.Fatalf("cut %d: stream %d ended twice", cut, s.id)
			}
			got[s.id] = strings.TrimSpace(strings.Join([]string{strconv.Itoa(s.status), strconv.Itoa(int(s.body)), errText(err)}, " "))
		}
		pending := []byte{}
		for _, chunk := range [][]byte{b[:cut], b[cut:]} {
			pending = append(pending, chunk...)
			used, err := h.frames(pending, end)
			if err != nil {
				t.Fatalf("cut %d: %v", cut, err)
			}
			pending = pending[used:]
		}
		want := map[uint32]string{1: "200 5", 3: "404 0", 5: "0 0 the server reset stream 5 (INTERNAL_ERROR)", 7: "204 0"}
		if len(pending) != 0 || len(h.streams) != 0 || !maps.Equal(got, want) {
			t.Fatalf("cut %d: ended %v, want %v; %d bytes left, %d streams", cut, got, want, len(pending), len(h.streams))
		}
		wantOut := append(appendFrame(nil, h2Settings, h2Ack, 0), appendFrame(nil, h2Ping, h2Ack, 0, []byte("12345678")...)...)
		if !bytes.Equal(h.out, wantOut) || h.max != 2 {
			t.Fatalf("cut %d: queued %x (want %x), streams at most %d", cut, h.out, wantOut, h.max)
		}
	}
}

// GOAWAY: the streams the server did not take are dropped, not failed; the others end as
// usual; no new stream is opened.
func TestGoawayDropsOnlyTheStreamsPastItsLast(t *testing.T) {
	srv := newH2Server()
	h := newH2Conn(4)
	for _, id := range []uint32{1, 3, 5, 7} {
		h.streams = append(h.streams, h2Stream{id: id})
	}
	var b []byte
	b = appendFrame(b, h2Goaway, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0)
	b = appendFrame(b, h2Headers, h2EndHeaders|h2EndStream, 3, srv.block("200")...)
	ended := 0
	if _, err := h.frames(b, func(h2Stream, error) { ended++ }); err != nil {
		t.Fatal(err)
	}
	if !h.goaway || ended != 1 || len(h.streams) != 1 || h.streams[0].id != 1 {
		t.Fatalf("goaway %v, %d ended, streams left %+v", h.goaway, ended, h.streams)
	}
}

// The connection's window is topped up once a gigabyte has been received, by what was.
func TestTheConnectionsWindowIsToppedUp(t *testing.T) {
	h := newH2Conn(1)
	h.received = h2WindowAfter - 3
	if _, err := h.frames(appendFrame(nil, h2Data, 0, 9, []byte("abc")...), func(h2Stream, error) {}); err != nil {
		t.Fatal(err)
	}
	if want := appendWindowUpdate(nil, 0, h2WindowAfter); !bytes.Equal(h.out, want) || h.received != 0 {
		t.Fatalf("queued %x, want %x; %d counted", h.out, want, h.received)
	}
}

// What ends the connection, each with its reason.
func TestMalformedFramesEndTheConnection(t *testing.T) {
	for name, c := range map[string]struct {
		b    []byte
		want string
	}{
		"oversized":          {[]byte{0, 0x40, 1, h2Data, 0, 0, 0, 0, 1}, "a frame of 16385 bytes"},
		"push":               {appendFrame(nil, h2PushPromise, h2EndHeaders, 1, 0, 0, 0, 2), "PUSH_PROMISE"},
		"interrupted block":  {append(appendFrame(nil, h2Headers, 0, 1, 0x88), appendFrame(nil, h2Ping, 0, 0, make([]byte, 8)...)...), "interrupted"},
		"padding":            {appendFrame(nil, h2Data, h2Padded, 1, 5, 'a'), "padding longer"},
		"settings":           {appendFrame(nil, h2Settings, 0, 0, 1, 2, 3), "SETTINGS frame of 3 bytes"},
		"table shrunk":       {appendFrame(nil, h2Settings, 0, 0, appendSetting(nil, h2SettingHeaderTable, 0)...), "shrank its HPACK table"},
		"bad block":          {appendFrame(nil, h2Headers, h2EndHeaders, 1, 0xff, 0xff, 0xff, 0xff, 0x0f), "header block"},
		"no status":          {appendFrame(nil, h2Headers, h2EndHeaders, 1, 0x82), "has no :status"},
		"short rst":          {appendFrame(nil, h2RstStream, 0, 1, 0), "RST_STREAM frame not of 4 bytes"},
		"stray continuation": {appendFrame(nil, h2Continuation, h2EndHeaders, 1, 0x88), "outside a header block"},
	} {
		h := newH2Conn(1)
		h.streams = append(h.streams, h2Stream{id: 1})
		if _, err := h.frames(c.b, func(h2Stream, error) {}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", name, err, c.want)
		}
	}
}

// The request's blocks: the first indexes its fields, the next names them by index (the
// same fields a server decodes either way), the plain one never indexes; each constant.
func TestRequestBlocksDecodeToTheRequest(t *testing.T) {
	u, _ := url.Parse("https://198.18.0.2/1kb.bin?x=1")
	b := newH2Blocks(u, "bench.ingress.test")
	want := ":method=GET :scheme=https :authority=bench.ingress.test :path=/1kb.bin?x=1 user-agent=ingress-bench-native/" + Version
	var got []string
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) { got = append(got, f.Name+"="+f.Value) })
	for _, blk := range [][]byte{b.first, b.next, b.next} {
		got = got[:0]
		if _, err := dec.Write(blk); err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, " ") != want {
			t.Fatalf("decoded %q, want %q", got, want)
		}
	}
	if len(b.next) >= len(b.first) || len(b.next) != 5 {
		t.Errorf("the next block is %d bytes (the first %d): not indexed", len(b.next), len(b.first))
	}
	got = got[:0]
	if _, err := hpack.NewDecoder(0, func(f hpack.HeaderField) { got = append(got, f.Name+"="+f.Value) }).Write(b.plain); err != nil || strings.Join(got, " ") != want {
		t.Errorf("the plain block decoded %q (%v) by a table of 0 bytes", got, err)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
