package main

import (
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
)

// redisDay is the Unix day Redis's clock is in.
func redisDay(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	sec, _, _ := strings.Cut(srv.Do(t, "TIME"), "\n")
	n, err := strconv.ParseInt(strings.TrimSpace(sec), 10, 64)
	if err != nil {
		t.Fatalf("TIME: %q", sec)
	}
	return n / 86400
}

// The rolling swap through sluice serve: with -redis-key-format envoy and
// envoyproxy/ratelimit's CACHE_KEY_PREFIX, serve counts in the keys
// envoyproxy/ratelimit's instances write (INCRBY+EXPIRE, here the mimic:
// prefix + domain + "_" + key_value_ + window start), so that requests
// spread over both admit exactly the rule's limit together.
//
// Serve fails closed here: a decision that Redis does not answer within
// the failure policy's 50 ms (a loaded machine under -race) is refused, so
// the two together never admit more than the limit. Open, the default, it
// was admitted uncounted: 13 of 12 once. A run with such failures admits
// at least the limit less one per failure; it is tried again, up to five
// runs, for one without, which must admit exactly the limit.
func TestServeEnvoyKeyFormatSharesTheLimit(t *testing.T) {
	srv := redistest.Single(t)
	path := filepath.Join(t.TempDir(), "rl.yaml")
	const limit = 12
	writeFile(t, path, "domain: swap\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: day\n      requests_per_unit: "+strconv.Itoa(limit)+"\n")
	for attempt := 0; ; attempt++ {
		prefix := "swap" + strconv.FormatInt(time.Now().UnixNano(), 36) + "_"
		t.Setenv("CACHE_KEY_PREFIX", prefix)
		s := launch(t, "-config", path, "-store", "redis://"+srv.Addr, "-redis-key-format", "envoy", "-failure-mode", "closed")
		day := redisDay(t, srv)
		key := prefix + "swap_user_alice_" + strconv.FormatInt(day*86400, 10)
		var envoyOK, sluiceOK atomic.Int64
		var wg sync.WaitGroup
		hit := func(i int) {
			if i%2 == 0 { // an envoyproxy/ratelimit instance: INCRBY, EXPIRE, over iff above
				n, err := srv.Exec("INCRBY", key, "1")
				if err != nil {
					t.Error(err)
					return
				}
				srv.Exec("EXPIRE", key, "86400")
				if c, _ := strconv.Atoi(strings.TrimSpace(n)); c <= limit {
					envoyOK.Add(1)
				}
				return
			}
			code, err := status(http.DefaultClient, s.url, `{"domain":"swap","descriptors":[{"entries":[{"key":"user","value":"alice"}]}]}`)
			if err != nil {
				t.Error(err)
			} else if code == 200 {
				sluiceOK.Add(1)
			}
		}
		// Half the limit in turns (each side admits some), then the rest
		// and three times as many again at once.
		for i := range limit / 2 {
			hit(i)
		}
		for i := limit / 2; i < 3*limit; i++ {
			wg.Go(func() { hit(i) })
		}
		wg.Wait()
		failed := int64(metricSum(t, s.url, "sluice_rls_store_errors_total"))
		s.stop(t)
		if redisDay(t, srv) != day && attempt == 0 {
			continue // the run straddled midnight UTC
		}
		got := envoyOK.Load() + sluiceOK.Load()
		if got > limit || got < limit-failed || envoyOK.Load() == 0 || sluiceOK.Load() == 0 {
			t.Fatalf("admitted %d (envoyproxy/ratelimit %d, sluice serve %d, %d of its decisions failed), want %d less at most one per failure, some by each",
				got, envoyOK.Load(), sluiceOK.Load(), failed, limit)
		}
		if failed > 0 && attempt < 4 {
			t.Logf("%d of serve's decisions failed (admitted %d of %d); again", failed, got, limit)
			continue
		}
		if failed == 0 && got != limit {
			t.Errorf("admitted %d (envoyproxy/ratelimit %d, sluice serve %d), want exactly %d", got, envoyOK.Load(), sluiceOK.Load(), limit)
		}
		return
	}
}

// REDIS_PERSECOND: per-second limits count on REDIS_PERSECOND_URL's Redis,
// the others on REDIS_URL's, each store with its own keys only.
func TestServePerSecondRedis(t *testing.T) {
	main, perSecond := redistest.StartServer(t), redistest.StartServer(t)
	t.Setenv("REDIS_URL", main.Addr)
	t.Setenv("REDIS_PERSECOND", "true")
	t.Setenv("REDIS_PERSECOND_URL", perSecond.Addr)
	path := filepath.Join(t.TempDir(), "rl.yaml")
	writeFile(t, path, "domain: d\ndescriptors:\n  - key: fast\n    rate_limit:\n      unit: second\n      requests_per_unit: 100\n"+
		"  - key: slow\n    rate_limit:\n      unit: hour\n      requests_per_unit: 100\n")
	s := launch(t, "-config", path)
	for _, k := range []string{"fast", "slow"} {
		if code := post(t, s.url, `{"domain":"d","descriptors":[{"entries":[{"key":"`+k+`","value":"x"}]}]}`); code != 200 {
			t.Fatalf("%s: %d", k, code)
		}
	}
	if !strings.Contains(s.stderr.String(), "per-second store") || !strings.Contains(s.stderr.String(), perSecond.Addr) {
		t.Errorf("the log does not name the per-second store %s: %s", perSecond.Addr, s.stderr.String())
	}
	if got := main.Do(t, "KEYS", "*"); !strings.Contains(got, "slow") || strings.Contains(got, "fast") {
		t.Errorf("REDIS_URL's keys: %q, want the hourly limit's only", got)
	}
	if got := perSecond.Do(t, "KEYS", "*"); !strings.Contains(got, "fast") || strings.Contains(got, "slow") {
		t.Errorf("REDIS_PERSECOND_URL's keys: %q, want the per-second limit's only", got)
	}
}

// The Redis variables serve cannot act on with the store it has are named
// in the start-up line with why; those it acts on are not.
func TestServeNamesRedisVariablesNotActedOn(t *testing.T) {
	srv := redistest.Single(t)
	t.Setenv("REDIS_PIPELINE_LIMIT", "8")
	t.Setenv("REDIS_POOL_SIZE", "4")
	t.Setenv("REDIS_TLS_CACERT", "/nonexistent/ca.pem")
	s := launch(t, "-store", "redis://"+srv.Addr)
	line := ""
	for l := range strings.SplitSeq(s.stderr.String(), "\n") {
		if strings.Contains(l, "accepted and not acted on") {
			line = l
		}
	}
	for _, want := range []string{"REDIS_PIPELINE_LIMIT=8 (rueidis", "REDIS_TLS_CACERT (no store is rediss://"} {
		if !strings.Contains(line, want) {
			t.Errorf("start-up line %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "REDIS_POOL_SIZE") {
		t.Errorf("start-up line %q names REDIS_POOL_SIZE, which is acted on", line)
	}
}

// envoyproxy/ratelimit's TLS variables reach the connection to Redis:
// REDIS_TLS_CACERT names the authority of a TLS Redis whose certificate is
// for 127.0.0.1, and REDIS_TLS_SKIP_HOSTNAME_VERIFICATION lets it be
// reached as localhost. With -failure-mode closed, a store that cannot
// connect answers 429 at once; one that decides admits the first request
// of a rule of 1 per hour.
func TestServeRedisTLSFromEnv(t *testing.T) {
	srv := redistest.StartTLSServer(t)
	_, ca, _ := strings.Cut(srv.Do(t, "CONFIG", "GET", "tls-ca-cert-file"), "\n")
	port := srv.TLSAddr[strings.LastIndexByte(srv.TLSAddr, ':')+1:]
	path := filepath.Join(t.TempDir(), "rl.yaml")
	writeFile(t, path, "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: hour\n      requests_per_unit: 1\n")
	t.Setenv("REDIS_TLS", "true")
	for _, tt := range []struct {
		name, host, ca, skip string
		decides              bool
	}{
		{"no authority", "127.0.0.1", "", "", false},
		{"REDIS_TLS_CACERT", "127.0.0.1", strings.TrimSpace(ca), "", true},
		{"another name", "localhost", strings.TrimSpace(ca), "", false},
		{"another name, REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "localhost", strings.TrimSpace(ca), "true", true},
	} {
		t.Setenv("REDIS_URL", tt.host+":"+port)
		t.Setenv("REDIS_TLS_CACERT", tt.ca)
		t.Setenv("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", tt.skip)
		t.Setenv("CACHE_KEY_PREFIX", strconv.FormatInt(time.Now().UnixNano(), 36))
		s := launch(t, "-config", path, "-failure-mode", "closed")
		first := post(t, s.url, reqK)
		if decided := first == 200; decided != tt.decides {
			t.Errorf("%s: the first request is %d; want Redis deciding: %v", tt.name, first, tt.decides)
		}
		s.stop(t)
	}
}

// metricSum returns the sum of the samples of the metric name (every
// label set) that serve at url exposes; 0 when there are none.
func metricSum(t *testing.T, url, name string) float64 {
	t.Helper()
	_, b := call(t, http.MethodGet, url+"/metrics", "", nil)
	sum := 0.0
	for _, m := range regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(name)+`(?:\{[^}]*\})? (\S+)$`).FindAllSubmatch(b, -1) {
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			t.Fatalf("%s: %q", name, m[1])
		}
		sum += v
	}
	return sum
}
