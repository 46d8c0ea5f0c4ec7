package redisstore_test

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// A password-protected Redis: the URL's password is sent, and a wrong one
// is a clear error at start-up.
func TestAuth(t *testing.T) {
	srv := redistest.StartServer(t, "--requirepass", "s3cret")
	s := open(t, "redis://:s3cret@"+srv.Addr, nil)
	if r, err := s.Allow(context.Background(), "auth", sluice.PerSecond(1)); err != nil || !r.Allowed {
		t.Fatalf("decision with AUTH: %+v, %v", r, err)
	}
	_, err := redisstore.New(context.Background(), redisstore.Config{URL: "redis://:wrong@" + srv.Addr})
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "pass") {
		t.Fatalf("wrong password: error %v, want one about the password", err)
	}
}

// A Sentinel-managed Redis: the store finds the master through the sentinel.
func TestSentinel(t *testing.T) {
	master := redistest.StartServer(t)
	sentinel := redistest.StartSentinel(t, master, "sluice-master")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := redisstore.New(ctx, redisstore.Config{URL: "redis+sentinel://" + sentinel.Addr + "/sluice-master"})
	if err != nil {
		t.Fatalf("New through the sentinel: %v", err)
	}
	defer s.Close()
	if r, err := s.Allow(ctx, "via-sentinel", sluice.PerSecond(1)); err != nil || !r.Allowed {
		t.Fatalf("decision through the sentinel: %+v, %v", r, err)
	}
	if got := strings.TrimSpace(master.Do(t, "EXISTS", s.Key(sluice.TokenBucket, "via-sentinel"))); got != "1" {
		t.Fatalf("the decision did not reach the master: EXISTS = %q", got)
	}
}

// rediss:// with the store's TLS settings: a private certificate authority.
func TestTLS(t *testing.T) {
	srv := redistest.StartTLSServer(t)
	ctx := context.Background()
	s, err := redisstore.New(ctx, redisstore.Config{URL: "rediss://" + srv.TLSAddr, TLS: &tls.Config{RootCAs: srv.RootCAs}})
	if err != nil {
		t.Fatalf("New over TLS: %v", err)
	}
	defer s.Close()
	if r, err := s.Allow(ctx, "over-tls", sluice.PerSecond(1)); err != nil || !r.Allowed {
		t.Fatalf("decision over TLS: %+v, %v", r, err)
	}
	// Without the authority the server's certificate is refused.
	if s, err := redisstore.New(ctx, redisstore.Config{URL: "rediss://" + srv.TLSAddr}); err == nil {
		s.Close()
		t.Fatal("New over TLS with an unknown certificate authority: no error")
	}
}
