package xdsconfig

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"

	"github.com/sluicehq/sluice/config"
)

// The server's version_info is its choice, as long as a response: the
// log lines of an ACK and a NACK carry it cut, as the NACK's error text
// is, while the ACK itself echoes it whole (the protocol needs it).
func TestLoggedVersionIsBounded(t *testing.T) {
	var buf bytes.Buffer
	fail := false
	c, err := New(Config{Target: "127.0.0.1:1", Logger: slog.New(slog.NewTextHandler(&buf, nil)),
		Apply: func(context.Context, *config.Config) error {
			if fail {
				return errors.New("refused")
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.conn.Close()
	version := strings.Repeat("v", 1<<20)
	resp := &discovery.DiscoveryResponse{VersionInfo: version, TypeUrl: TypeURL, Nonce: "1",
		Resources: pack(t, &rlconf.RateLimitConfig{Name: "d", Domain: "d"})}
	if ack := c.handle(context.Background(), resp); ack.GetVersionInfo() != version || ack.GetErrorDetail() != nil {
		t.Fatalf("the ACK does not echo the version whole")
	}
	fail = true
	resp.Nonce = "2"
	resp.Resources = pack(t, &rlconf.RateLimitConfig{Name: "e", Domain: "e"}) // the running resources would be ACKed unapplied
	if nack := c.handle(context.Background(), resp); nack.GetErrorDetail() == nil {
		t.Fatal("no NACK")
	}
	for l := range strings.Lines(buf.String()) {
		if len(l) > 2*MaxErrorDetail+512 {
			t.Errorf("a log line of %d bytes: %.80q…", len(l), l)
		}
	}
	if n := strings.Count(buf.String(), "\n"); n != 2 {
		t.Errorf("%d log lines, want an ACK and a NACK", n)
	}
}
