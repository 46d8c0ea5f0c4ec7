package rlheader_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/rlheader"
)

// A server writes both fields into one reused buffer, and omits a field whose
// list is empty.
func ExampleAppendPolicies() {
	policies := []rlheader.Policy{
		{Name: "permin", Quota: 50, Window: time.Minute},
		{Name: "perhr", Quota: 1000, Window: time.Hour},
	}
	for _, p := range policies {
		if err := p.Validate(); err != nil { // at configuration time
			fmt.Println(err)
			return
		}
	}
	h := http.Header{}
	var buf []byte
	buf = rlheader.AppendPolicies(buf[:0], policies...)
	if len(buf) > 0 {
		h.Set(rlheader.HeaderRateLimitPolicy, string(buf))
	}
	buf = rlheader.AppendStatuses(buf[:0], rlheader.Status{Name: "permin", Remaining: 49, Reset: 59500 * time.Millisecond})
	if len(buf) > 0 {
		h.Set(rlheader.HeaderRateLimit, string(buf))
	}
	fmt.Println(h.Get("RateLimit-Policy"))
	fmt.Println(h.Get("RateLimit"))
	// Output:
	// "permin";q=50;w=60, "perhr";q=1000;w=3600
	// "permin";r=49;t=60
}

func ExampleAppendStatuses() {
	fmt.Printf("%s\n", rlheader.AppendStatuses(nil,
		rlheader.Status{Name: "peruser", Remaining: 9, Reset: time.Minute, PartitionKey: []byte("user-42")},
		rlheader.Status{Name: "daily", Remaining: 100, Reset: -1}, // negative Reset: no t
	))
	// Output:
	// "peruser";r=9;t=60;pk=:dXNlci00Mg==:, "daily";r=100
}

// A client reads the RateLimit field lines of a response; a malformed field
// is ignored as a whole.
func ExampleParseStatuses() {
	h := http.Header{}
	h.Add("RateLimit", `"default";r=50;t=30`)
	h.Add("RateLimit", `"daily";r=999`)
	ss, err := rlheader.ParseStatuses(h.Values("RateLimit"))
	if err != nil {
		fmt.Println("ignored:", err)
		return
	}
	for _, s := range ss {
		fmt.Println(s.Name, s.Remaining, s.Reset)
	}

	_, err = rlheader.ParseStatuses([]string{`"a";r=1.5`})
	fmt.Println(err)
	// Output:
	// default 50 30s
	// daily 999 -1ns
	// rlheader: RateLimit member 0 ("a"): parameter r is a Decimal, want an Integer
}

func ExampleParseRetryAfter() {
	now := time.Unix(1700000000, 0)
	for _, v := range []string{"120", "Tue, 14 Nov 2023 22:13:25 GMT", "Sun Nov  6 08:49:37 1994", "1.5"} {
		d, ok := rlheader.ParseRetryAfter(v, now)
		fmt.Println(d, ok)
	}
	// Output:
	// 2m0s true
	// 5s true
	// 0s true
	// 0s false
}

func ExampleFormatRetryAfter() {
	fmt.Println(rlheader.FormatRetryAfter(120 * time.Second))
	fmt.Println(rlheader.FormatRetryAfter(1500 * time.Millisecond))
	fmt.Println(rlheader.FormatRetryAfterDate(time.Unix(1700000005, 0)))
	// Output:
	// 120
	// 2
	// Tue, 14 Nov 2023 22:13:25 GMT
}

func ExampleQuotaExceeded() {
	body, err := json.Marshal(rlheader.QuotaExceeded(http.StatusTooManyRequests, "default"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rlheader.ProblemContentType)
	fmt.Println(string(body))
	// Output:
	// application/problem+json
	// {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded","status":429,"violated-policies":["default"]}
}
