package page

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/keyhash"
	"github.com/sluicehq/sluice/service"
)

func serve(t *testing.T, p *Page) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	p.Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func getJSON(t *testing.T, url string) Snapshot {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// The JSON counts each rule's outcomes, their rates per second, the
// limited keys hashed in the top list (those refused twice in the minute:
// d|s=x, refused once, is not listed) and the refusals newest first (a
// key's first refusal without its hash, which is not made).
func TestDataCountsRatesAndHashesKeys(t *testing.T) {
	c := clocktest.At(time.Unix(1_000_000, 0))
	secret := []byte("a secret of the operator's")
	p := New(Config{Now: c.Now, Refusals: 3, KeySecret: secret})
	srv := serve(t, p)
	getJSON(t, srv.URL+"/page/data.json") // the first rate sample
	for range 10 {
		p.Observe(service.Decision{Domain: "d", Rule: "d.a", Outcome: service.Allowed, Cost: 1})
	}
	for i := range 5 {
		p.Observe(service.Decision{Domain: "d", Rule: "d.a", Outcome: service.Limited, Cost: 1, Key: "d|a=" + string(rune('0'+i%2))})
	}
	p.Observe(service.Decision{Domain: "d", Rule: "d.s", Outcome: service.Shadow, Cost: 1, Key: "d|s=x"})
	c.Advance(2 * time.Second)
	s := getJSON(t, srv.URL+"/page/data.json")
	if len(s.Rules) != 2 || s.Rules[0].Rule != "d.a" || s.Rules[0].Allowed != 10 || s.Rules[0].Limited != 5 || s.Rules[0].AllowedPerSec != 5 || s.Rules[1].Shadow != 1 {
		t.Fatalf("rules %+v", s.Rules)
	}
	if len(s.Top) != 2 || s.Top[0].Key != keyhash.New(secret).Hash("", "d|a=0") || s.Top[0].Count != 3 || s.Top[0].Rule != "d.a" || s.Top[1].Count != 2 {
		t.Fatalf("top %+v, want d|a=0 hashed first with 3, d|a=1 with 2", s.Top)
	}
	if len(s.Refusals) != 3 || s.Refusals[0].Rule != "d.s" || s.Refusals[0].Outcome != "shadow" || s.Refusals[0].Key != "" ||
		s.Refusals[1].Key != s.Top[0].Key || s.Refusals[2].Key != s.Top[1].Key {
		t.Fatalf("refusals %+v, want the 3 newest, the shadow one first without a hash, then d|a=0's and d|a=1's", s.Refusals)
	}
	for _, r := range s.Refusals {
		if strings.Contains(r.Key, "|") {
			t.Fatalf("a raw key is shown: %+v", r)
		}
	}
}

func TestRawKeysAreShownWhenAllowed(t *testing.T) {
	p := New(Config{RawKeys: true})
	p.Observe(service.Decision{Rule: "r", Outcome: service.Limited, Key: "d|k=v"})
	if s := p.Snapshot(); s.Top[0].Key != "d|k=v" || s.Refusals[0].Key != "d|k=v" {
		t.Fatalf("%+v", s)
	}
}

// Rules past MaxRules are counted together: the page's memory is bounded
// whatever the rules' names.
func TestRulesPastTheCapAreCountedAsOther(t *testing.T) {
	p := New(Config{})
	for i := range MaxRules + 10 {
		p.Observe(service.Decision{Rule: "r" + strings.Repeat("x", i), Outcome: service.Allowed})
	}
	rules := p.Snapshot().Rules
	if len(rules) != MaxRules+1 {
		t.Fatalf("%d rules, want %d and %q", len(rules), MaxRules, OtherRule)
	}
	for _, r := range rules {
		if r.Rule == OtherRule && r.Allowed != 10 {
			t.Fatalf("other: %+v", r)
		}
	}
}

// The event stream sends a snapshot at once and then one per interval.
func TestEventsStreamSnapshots(t *testing.T) {
	p := New(Config{Interval: 10 * time.Millisecond})
	p.Observe(service.Decision{Rule: "d.a", Outcome: service.Allowed})
	srv := serve(t, p)
	resp := events(t, srv.URL)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	events := 0
	for events < 2 && sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var s Snapshot
			if err := json.Unmarshal([]byte(data), &s); err != nil || len(s.Rules) != 1 {
				t.Fatalf("event %q: %v", data, err)
			}
			events++
		}
	}
	if events != 2 {
		t.Fatalf("%d events: %v", events, sc.Err())
	}
}

// Streams past MaxStreams are refused, so that clients cannot hold an
// unbounded number of goroutines.
func TestStreamsPastTheCapAreRefused(t *testing.T) {
	p := New(Config{MaxStreams: 1, Interval: time.Hour})
	srv := serve(t, p)
	events(t, srv.URL) // the first stream, held open
	second := events(t, srv.URL)
	if second.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("second stream: %d, want 503", second.StatusCode)
	}
}

// decider records the requests the form sends.
type decider struct{ got []*pb.RateLimitRequest }

func (d *decider) ShouldRateLimit(_ context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	d.got = append(d.got, req)
	return &pb.RateLimitResponse{Statuses: []*pb.RateLimitResponse_DescriptorStatus{{
		Code: pb.RateLimitResponse_OVER_LIMIT, LimitRemaining: 0,
		CurrentLimit: &pb.RateLimitResponse_RateLimit{Name: "n", RequestsPerUnit: 3, Unit: pb.RateLimitResponse_RateLimit_MINUTE},
	}}}, nil
}

// The form sends a check-only descriptor (hits_addend 0) and shows the
// answer, as JSON for the script and as the page without it; malformed
// forms are refused before the service is asked.
func TestTrySendsACheckOnlyDescriptor(t *testing.T) {
	d := &decider{}
	srv := serve(t, New(Config{Decider: d}))
	form := url.Values{"domain": {"d"}, "descriptor": {"user=alice\n\nplan = x\n"}}
	resp, err := http.PostForm(srv.URL+"/page/try?format=json", form)
	if err != nil {
		t.Fatal(err)
	}
	var res TryResult
	json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	if res.Code != "OVER_LIMIT" || !res.Matched || res.Limit != "3 per MINUTE" || len(d.got) != 1 {
		t.Fatalf("result %+v", res)
	}
	desc := d.got[0].GetDescriptors()[0]
	if hits := desc.GetHitsAddend(); hits == nil || hits.GetValue() != 0 || len(desc.GetEntries()) != 2 || desc.GetEntries()[1].GetKey() != "plan " {
		t.Fatalf("sent %v", desc)
	}
	resp, err = http.PostForm(srv.URL+"/page/try", form)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	bufio.NewReader(resp.Body).WriteTo(&b)
	resp.Body.Close()
	if !strings.Contains(b.String(), `<dd id="try-code">OVER_LIMIT</dd>`) {
		t.Fatalf("the page without the script shows no result:\n%s", b.String())
	}
	for _, bad := range []url.Values{{"domain": {""}, "descriptor": {"a=b"}}, {"domain": {"d"}, "descriptor": {"novalue"}}, {"domain": {"d"}, "descriptor": {strings.Repeat("a=b\n", 65)}}} {
		resp, err := http.PostForm(srv.URL+"/page/try?format=json", bad)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%v: %d, want 400", bad, resp.StatusCode)
		}
	}
	if len(d.got) != 2 {
		t.Fatalf("the service was asked %d times, want 2", len(d.got))
	}
}

// answerless answers with no status, as a Decider other than the service
// may.
type answerless struct{}

func (answerless) ShouldRateLimit(context.Context, *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	return &pb.RateLimitResponse{}, nil
}

// A Decider's answer without the descriptor's status is a 503 with why,
// not a handler that panics and drops the connection.
func TestTryWithoutAStatusIsAnError(t *testing.T) {
	srv := serve(t, New(Config{Decider: answerless{}}))
	resp, err := http.PostForm(srv.URL+"/page/try?format=json", url.Values{"domain": {"d"}, "descriptor": {"a=b"}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res TryResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || res.Error == "" || res.Code != "" {
		t.Fatalf("%d %+v, want 503 with an error", resp.StatusCode, res)
	}
}

// Observing an allowed decision allocates nothing: the page's cost on
// the hot path.
func TestObservingAnAllowedDecisionAllocatesNothing(t *testing.T) {
	p := New(Config{})
	d := service.Decision{Domain: "d", Rule: "d.a", Outcome: service.Allowed, Cost: 1}
	p.Observe(d)
	if a := testing.AllocsPerRun(1000, func() { p.Observe(d) }); a != 0 {
		t.Fatalf("%v allocations per allowed decision", a)
	}
}

// The stream outlives the server's write timeout: each event extends the
// write deadline, as the admin listener's WriteTimeout would otherwise
// end the stream after seconds.
func TestEventsOutliveTheServersWriteTimeout(t *testing.T) {
	p := New(Config{Interval: 50 * time.Millisecond})
	mux := http.NewServeMux()
	p.Mount(mux)
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.WriteTimeout = 200 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	resp := events(t, srv.URL)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	start, events := time.Now(), 0
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			if events++; time.Since(start) > 600*time.Millisecond {
				return
			}
		}
	}
	t.Fatalf("the stream ended after %v and %d events: %v", time.Since(start), events, sc.Err())
}

// Close ends the open streams (a graceful shutdown would wait for them)
// and refuses new ones.
func TestCloseEndsTheStreams(t *testing.T) {
	p := New(Config{Interval: time.Hour})
	srv := serve(t, p)
	resp := events(t, srv.URL)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "data: ") {
	}
	p.Close()
	for sc.Scan() {
	}
	if sc.Err() != nil {
		t.Fatalf("the stream ended with %v, want its end", sc.Err())
	}
	again := events(t, srv.URL)
	if again.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a stream after Close: %d, want 503", again.StatusCode)
	}
}

// events opens the page's event stream on the server at base; its body is
// closed when the test ends (before the server's own close, registered
// earlier).
func events(t *testing.T, base string) *http.Response {
	t.Helper()
	resp, err := http.Get(base + "/page/events")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}
