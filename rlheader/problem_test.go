package rlheader

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestProblemMarshal(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Problem
		want string
	}{
		{"A3", QuotaExceeded(429, "default"),
			`{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded","status":429,"violated-policies":["default"]}`},
		{"detail and two policies", Problem{Type: TypeQuotaExceeded, Title: "Quota Exceeded", Status: 429, Detail: "slow down", ViolatedPolicies: []string{"daily", "bandwidth"}},
			`{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded","status":429,"detail":"slow down","violated-policies":["daily","bandwidth"]}`},
		{"zero value", Problem{}, `{}`},
		{"escaping", Problem{Title: "a\"b\\c\n"}, `{"title":"a\"b\\c\n"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(tc.p) // through encoding/json, as a handler would
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			if !json.Valid(got) {
				t.Fatalf("invalid JSON %s", got)
			}
		})
	}
}

// TestProblemUnmarshal covers C32 and RFC 9457's consumer rules.
func TestProblemUnmarshal(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want Problem
		ok   bool
	}{
		{"round trip", `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded","status":429,"violated-policies":["default"]}`,
			QuotaExceeded(429, "default"), true},
		{"C32 unknown member ignored", `{"type":"https://example.com/x","foo":{"bar":1},"status":429}`,
			Problem{Type: "https://example.com/x", Status: 429}, true},
		{"C32 missing type is about:blank", `{"title":"Too Many Requests","status":429}`,
			Problem{Type: TypeAboutBlank, Title: "Too Many Requests", Status: 429}, true},
		{"wrong member types ignored", `{"type":7,"title":["x"],"status":"429","detail":null,"violated-policies":[1,"a"]}`,
			Problem{Type: TypeAboutBlank}, true},
		{"draft §5.1 body", `{"type": "https://iana.org/assignments/http-problem-types#quota-exceeded", "title": "Request cannot be satisfied as assigned quota has been exceeded", "violated-policies": ["daily","bandwidth"]}`,
			Problem{Type: TypeQuotaExceeded, Title: "Request cannot be satisfied as assigned quota has been exceeded", ViolatedPolicies: []string{"daily", "bandwidth"}}, true},
		{"not an object", `[1]`, Problem{}, false},
		{"null", `null`, Problem{}, false},
		{"not JSON", `{`, Problem{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got Problem
			err := json.Unmarshal([]byte(tc.in), &got)
			if (err == nil) != tc.ok {
				t.Fatalf("Unmarshal(%s) err = %v, want ok %v", tc.in, err, tc.ok)
			}
			if err == nil && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Unmarshal(%s) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}
