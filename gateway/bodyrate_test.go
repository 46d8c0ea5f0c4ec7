package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/gateway"
)

// trickledPost sends a POST of total bytes: its header and the first fast
// bytes at once, then chunk bytes every gap (none, if chunk is 0: it
// stalls). It returns the response's
// status (0 if none came within limit) and when it came.
func (p *bubbleProxy) trickledPost(t *testing.T, total, fast, chunk int, gap, limit time.Duration) (int, time.Time) {
	c, err := p.front.Dial(context.Background(), "", "")
	if err != nil {
		t.Error(err)
		return 0, time.Time{}
	}
	stop := make(chan struct{})
	writing := make(chan struct{})
	defer func() { close(stop); c.Close(); <-writing }()
	go func() {
		defer close(writing)
		if _, err := fmt.Fprintf(c, "POST /upload HTTP/1.1\r\nHost: app.test\r\nContent-Length: %d\r\n\r\n%s", total, strings.Repeat("x", fast)); err != nil {
			return
		}
		if chunk == 0 {
			return // stalled, the connection open until the response
		}
		for sent := fast; sent < total; sent += chunk {
			select {
			case <-stop:
				return
			case <-time.After(gap):
			}
			if _, err := io.WriteString(c, strings.Repeat("x", min(chunk, total-sent))); err != nil {
				return // the proxy answered and closed
			}
		}
	}()
	c.SetReadDeadline(time.Now().Add(limit))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, time.Time{}
	}
	resp.Body.Close()
	return resp.StatusCode, time.Now()
}

// A streamed body that sends 16 KiB at once, then one byte just within
// each body timeout, never stalls for a whole body timeout, yet would hold
// its place in flight for days: past the body timeout its average rate
// must stay above the minimum (1 KiB/s by default), or it ends with 408
// and its place is freed for the next request.
func TestTrickledBodyBelowMinRateIs408(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, reached := bodyTimeoutProxy(t, 1)
		defer func() {
			p.close()
			time.Sleep(time.Second) // the server's lingering close after the 408
		}()
		start := time.Now()
		code, at := p.trickledPost(t, 1<<20, 16<<10, 1, bodyTimeout-10*time.Millisecond, 10*time.Minute)
		// 16 KiB ahead, then 1 byte: the deadline is the body timeout
		// plus 1 ms after the stream began.
		p.streamedBodyCut(t, "upload trickled at 1 byte per "+(bodyTimeout-10*time.Millisecond).String(), code, start, at, 2*bodyTimeout, reached)
	})
}

// A slow but steady upload above the minimum rate (1.5 KiB/s for 32 s) is
// not cut, however long it takes; nor is any upload when the minimum rate
// is off.
func TestSteadyBodyAboveMinRateIsNotCut(t *testing.T) {
	for _, tc := range []struct {
		name    string
		minRate int64
		chunk   int
	}{{"default", 0, 1536}, {"off", -1, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var got atomic.Int64
				p := newBubbleProxy(t, gateway.Config{MaxInFlight: 1, Timeouts: gateway.Timeouts{ClientBody: bodyTimeout, ClientBodyMinRate: tc.minRate}},
					func(w http.ResponseWriter, r *http.Request) {
						n, err := io.Copy(io.Discard, r.Body)
						if err != nil {
							t.Errorf("the upstream reading the body: %v", err)
						}
						got.Store(n)
					})
				defer p.close()
				total := 16<<10 + 32*tc.chunk
				code, _ := p.trickledPost(t, total, 16<<10, tc.chunk, time.Second, time.Hour)
				if code != http.StatusOK || got.Load() != int64(total) {
					t.Errorf("%d bytes at %d bytes/s: status %d, upstream got %d bytes; want 200 and all of it", total, tc.chunk, code, got.Load())
				}
			})
		})
	}
}

// client_body_min_rate is a size per second; 0 turns the minimum off, and
// a bad value is an error at its line.
func TestFileClientBodyMinRate(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want int64
	}{{"", 0}, {"client_body_min_rate: 2k\n", 2048}, {"client_body_min_rate: 100\n", 100}, {"client_body_min_rate: 0\n", -1}} {
		f, err := gateway.ParseFile("proxy.yaml", []byte("upstream: http://127.0.0.1:1\n"+tc.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if got := f.Config.Timeouts.ClientBodyMinRate; got != tc.want {
			t.Errorf("%q: ClientBodyMinRate %d, want %d", tc.yaml, got, tc.want)
		}
	}
	for _, bad := range []string{"fast", "-1k"} {
		_, err := gateway.ParseFile("proxy.yaml", []byte("upstream: http://127.0.0.1:1\nclient_body_min_rate: "+bad+"\n"))
		if err == nil || !strings.Contains(err.Error(), "proxy.yaml:2:") {
			t.Errorf("client_body_min_rate: %s: error %v, want one at proxy.yaml:2", bad, err)
		}
	}
}
