package statsd

import (
	"bytes"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	gostats "github.com/lyft/gostats"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// The mogrifier of envoyproxy/ratelimit's README: the per-rule stats lose
// the domain and descriptor from their name, which become tags.
var readmeEnv = map[string]string{
	"DOG_STATSD_MOGRIFIER_HITS_PATTERN": `^ratelimit\.service\.rate_limit\.([^.]+)\.(.*)\.([^.]+)$`,
	"DOG_STATSD_MOGRIFIER_HITS_NAME":    "ratelimit.service.rate_limit.$3",
	"DOG_STATSD_MOGRIFIER_HITS_TAGS":    "domain:$1,descriptor:$2",
}

func readmeSink(t *testing.T, addr string) *DogSink {
	t.Helper()
	mogs, err := MogrifiersFromEnv("HITS", env(readmeEnv))
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewDogSink(addr, mogs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A stat's gostats tags become DogStatsD tags, and a matching mogrifier
// rewrites the name and adds its tags; a stat no mogrifier matches keeps
// its name.
func TestLineMogrifiesAndTags(t *testing.T) {
	s := readmeSink(t, "127.0.0.1:9")
	for _, tc := range []struct{ name, kind, want string }{
		{"ratelimit.service.rate_limit.mongo_cps.database_users.total_hits.__env=prod", "c",
			"ratelimit.service.rate_limit.total_hits:3|c|#env:prod,domain:mongo_cps,descriptor:database_users\n"},
		{"ratelimit_server.ShouldRateLimit.total_requests", "c", "ratelimit_server.ShouldRateLimit.total_requests:3|c\n"},
		{"ratelimit.go.heapAlloc.__a=1.__b=2", "g", "ratelimit.go.heapAlloc:3|g|#a:1,b:2\n"},
	} {
		if got := string(s.Line(nil, tc.name, 3, tc.kind)); got != tc.want {
			t.Errorf("Line(%q)\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

// Mogrifier settings envoyproxy/ratelimit refuses are refused.
func TestMogrifiersFromEnvRefusesIncompleteOnes(t *testing.T) {
	for _, tc := range []struct {
		what string
		drop string
		set  [2]string
	}{
		{what: "no pattern", drop: "DOG_STATSD_MOGRIFIER_HITS_PATTERN"},
		{what: "no name", drop: "DOG_STATSD_MOGRIFIER_HITS_NAME"},
		{what: "bad pattern", set: [2]string{"DOG_STATSD_MOGRIFIER_HITS_PATTERN", "("}},
		{what: "tag without value", set: [2]string{"DOG_STATSD_MOGRIFIER_HITS_TAGS", "domain"}},
	} {
		t.Run(tc.what, func(t *testing.T) {
			m := map[string]string{}
			for k, v := range readmeEnv {
				m[k] = v
			}
			delete(m, tc.drop)
			if tc.set[0] != "" {
				m[tc.set[0]] = tc.set[1]
			}
			if _, err := MogrifiersFromEnv("HITS", env(m)); err == nil || !strings.Contains(err.Error(), "DOG_STATSD_MOGRIFIER_HITS_") {
				t.Errorf("err = %v, want one naming the variable", err)
			}
		})
	}
}

// A gostats store flushing into the sink delivers DogStatsD lines to a UDP
// listener, packed into datagrams of at most DatagramBytes.
func TestDogSinkSendsToUDPListener(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	s := readmeSink(t, pc.LocalAddr().String())
	store := gostats.NewStore(s, false)
	scope := store.ScopeWithTags("ratelimit", map[string]string{"cluster": "eu1"}).Scope("service").Scope("rate_limit")
	const rules = 100 // several datagrams' worth
	for i := range rules {
		scope.NewCounter("d.k_" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + "_" + string(rune('0'+i/26)) + ".over_limit").Add(2)
	}
	store.Flush()
	pc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var lines []string
	buf := make([]byte, 64<<10)
	for len(lines) < rules {
		n, _, err := pc.ReadFrom(buf)
		if err != nil {
			t.Fatalf("after %d lines: %v", len(lines), err)
		}
		if n > DatagramBytes {
			t.Errorf("datagram of %d bytes, want at most %d", n, DatagramBytes)
		}
		lines = append(lines, strings.Split(strings.TrimSuffix(string(buf[:n]), "\n"), "\n")...)
	}
	want := "ratelimit.service.rate_limit.over_limit:2|c|#cluster:eu1,domain:d,descriptor:k_a_0"
	if !slices.Contains(lines, want) {
		t.Errorf("no line %q among %d, e.g. %q", want, len(lines), lines[0])
	}
}

// The sink sends each stat as Line makes it, whether its name's parts
// were kept from an earlier stat or not, and keeps at most maxCachedNames
// names.
func TestWriteSendsLinesAsLineMakesThem(t *testing.T) {
	s := readmeSink(t, "127.0.0.1:9")
	for round := range 2 {
		for i := range maxCachedNames + 10 {
			name := fmt.Sprintf("ratelimit.service.rate_limit.d.k_%d.total_hits.__env=prod", i)
			s.write(name, uint64(round), "c")
			if want := s.Line(nil, name, uint64(round), "c"); !bytes.Equal(s.line, want) {
				t.Fatalf("round %d, name %d: sent %q, want %q", round, i, s.line, want)
			}
		}
	}
	if len(s.names) != maxCachedNames {
		t.Errorf("%d names kept, want the cap, %d", len(s.names), maxCachedNames)
	}
}

// BenchmarkDogSinkTimer is what a decision costs the sink with statsd on:
// its response_time timing, a name the README's mogrifier does not match,
// with a gostats tag; and a per-rule counter, which it does.
func BenchmarkDogSinkTimer(b *testing.B) {
	mogs, err := MogrifiersFromEnv("HITS", env(readmeEnv))
	if err != nil {
		b.Fatal(err)
	}
	s, err := NewDogSink("127.0.0.1:9", mogs)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for _, name := range []string{
		"ratelimit_server.ShouldRateLimit.response_time.__env=prod",
		"ratelimit.service.rate_limit.mongo_cps.database_users.total_hits.__env=prod",
	} {
		b.Run(name[:strings.IndexByte(name, '.')], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.FlushTimer(name, 123)
			}
		})
	}
}
