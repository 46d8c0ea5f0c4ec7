package rlheader

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
)

// httpsfvList parses a serialized field with the independent parser and
// fails the test if it does not accept it.
func httpsfvList(t *testing.T, v string) httpsfv.List {
	t.Helper()
	l, err := httpsfv.UnmarshalList([]string{v})
	if err != nil {
		t.Fatalf("httpsfv rejects our output %q: %v", v, err)
	}
	return l
}

// checkItem asserts that member i of l is the String name with exactly the
// given parameters, in order.
func checkItem(t *testing.T, l httpsfv.List, i int, name string, params ...any) {
	t.Helper()
	it, ok := l[i].(httpsfv.Item)
	if !ok {
		t.Fatalf("member %d is %T, want an Item", i, l[i])
	}
	if it.Value != name {
		t.Errorf("member %d = %#v, want String %q", i, it.Value, name)
	}
	names := it.Params.Names()
	if len(names) != len(params)/2 {
		t.Fatalf("member %d has params %v, want %v", i, names, params)
	}
	for j := 0; j < len(params); j += 2 {
		k := params[j].(string)
		if names[j/2] != k {
			t.Errorf("member %d param %d = %s, want %s", i, j/2, names[j/2], k)
		}
		got, _ := it.Params.Get(k)
		if !reflect.DeepEqual(got, params[j+1]) {
			t.Errorf("member %d %s = %#v, want %#v", i, k, got, params[j+1])
		}
	}
}

func TestAppendPolicies(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    []Policy
		want  string
		check func(t *testing.T, l httpsfv.List)
	}{
		{"A1", []Policy{{Name: "default", Quota: 100, Window: time.Minute}}, `"default";q=100;w=60`,
			func(t *testing.T, l httpsfv.List) { checkItem(t, l, 0, "default", "q", int64(100), "w", int64(60)) }},
		{"A4", []Policy{{Name: "permin", Quota: 50, Window: time.Minute}, {Name: "perhr", Quota: 1000, Window: time.Hour}},
			`"permin";q=50;w=60, "perhr";q=1000;w=3600`,
			func(t *testing.T, l httpsfv.List) {
				checkItem(t, l, 0, "permin", "q", int64(50), "w", int64(60))
				checkItem(t, l, 1, "perhr", "q", int64(1000), "w", int64(3600))
			}},
		{"A5", []Policy{{Name: "peruser", Quota: 10, Window: time.Minute, PartitionKey: []byte("user-42")}},
			`"peruser";q=10;w=60;pk=:dXNlci00Mg==:`,
			func(t *testing.T, l httpsfv.List) {
				checkItem(t, l, 0, "peruser", "q", int64(10), "w", int64(60), "pk", []byte("user-42"))
			}},
		{"A6", []Policy{{Name: "bw", Quota: 65535, Unit: UnitContentBytes, Window: 10 * time.Second}},
			`"bw";q=65535;qu="content-bytes";w=10`,
			func(t *testing.T, l httpsfv.List) {
				checkItem(t, l, 0, "bw", "q", int64(65535), "qu", "content-bytes", "w", int64(10))
			}},
		{"A7/quote", []Policy{{Name: `a"b`, Quota: 1, Window: time.Second}}, `"a\"b";q=1;w=1`,
			func(t *testing.T, l httpsfv.List) { checkItem(t, l, 0, `a"b`, "q", int64(1), "w", int64(1)) }},
		{"A7/backslash", []Policy{{Name: `a\b`, Quota: 1, Window: time.Second}}, `"a\\b";q=1;w=1`,
			func(t *testing.T, l httpsfv.List) { checkItem(t, l, 0, `a\b`, "q", int64(1), "w", int64(1)) }},
		{"A7/non-ASCII is sanitized", []Policy{{Name: "caf\u00e9\t\x7f\xff!", Quota: 1, Window: time.Second}}, `"caf????!";q=1;w=1`,
			func(t *testing.T, l httpsfv.List) { checkItem(t, l, 0, "caf????!", "q", int64(1), "w", int64(1)) }},
		{"A8", nil, ``, nil},
		{"empty partition key", []Policy{{Name: "e", Quota: 1, Window: time.Second, PartitionKey: []byte{}}}, `"e";q=1;w=1;pk=::`,
			func(t *testing.T, l httpsfv.List) {
				checkItem(t, l, 0, "e", "q", int64(1), "w", int64(1), "pk", []byte{})
			}},
		{"quota clamped to 15 digits", []Policy{{Name: "big", Quota: 1 << 62, Window: time.Second}}, `"big";q=999999999999999;w=1`,
			func(t *testing.T, l httpsfv.List) { checkItem(t, l, 0, "big", "q", int64(MaxInteger), "w", int64(1)) }},
		{"negative quota clamped to 0", []Policy{{Name: "neg", Quota: -5, Window: time.Second}}, `"neg";q=0;w=1`, nil},
		{"sub-second window rounded up", []Policy{{Name: "s", Quota: 1, Window: 1500 * time.Millisecond}}, `"s";q=1;w=2`, nil},
		{"zero window omitted", []Policy{{Name: "z", Quota: 1}}, `"z";q=1`, nil},
		{"unit sanitized", []Policy{{Name: "u", Quota: 1, Unit: "b\u00fd\"tes", Window: time.Second}}, `"u";q=1;qu="b?\"tes";w=1`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(AppendPolicies(nil, tc.in...))
			if got != tc.want {
				t.Fatalf("AppendPolicies(%+v) = %s, want %s", tc.in, got, tc.want)
			}
			l := httpsfvList(t, got)
			if len(l) != len(tc.in) {
				t.Fatalf("httpsfv sees %d members, want %d", len(l), len(tc.in))
			}
			if tc.check != nil {
				tc.check(t, l)
			}
			// Our own parser reads back what we wrote.
			ps, err := ParsePolicies([]string{got})
			if err != nil || len(ps) != len(tc.in) {
				t.Fatalf("ParsePolicies(%s) = %+v, %v", got, ps, err)
			}
		})
	}
}

func TestAppendAppendsToDst(t *testing.T) {
	buf := []byte("prefix ")
	buf = AppendPolicies(buf, Policy{Name: "a", Quota: 1, Window: time.Second})
	buf = AppendStatuses(append(buf, ' '), Status{Name: "a", Remaining: 1, Reset: time.Second})
	if want := `prefix "a";q=1;w=1 "a";r=1;t=1`; string(buf) != want {
		t.Fatalf("got %s, want %s", buf, want)
	}
	if got := AppendStatuses([]byte("x")); string(got) != "x" {
		t.Fatalf("AppendStatuses with no items changed dst to %q (case A8)", got)
	}
}

func TestAppendStatuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     []Status
		want   string
		params []any
	}{
		{"A1", []Status{{Name: "default", Remaining: 99, Reset: 60 * time.Second}}, `"default";r=99;t=60`,
			[]any{"r", int64(99), "t", int64(60)}},
		{"A2", []Status{{Name: "default", Remaining: 0, Reset: 30 * time.Second}}, `"default";r=0;t=30`,
			[]any{"r", int64(0), "t", int64(30)}},
		{"A5", []Status{{Name: "peruser", Remaining: 9, Reset: time.Minute, PartitionKey: []byte("user-42")}},
			`"peruser";r=9;t=60;pk=:dXNlci00Mg==:`, []any{"r", int64(9), "t", int64(60), "pk", []byte("user-42")}},
		{"t rounded up", []Status{{Name: "d", Remaining: 1, Reset: 29*time.Second + time.Nanosecond}}, `"d";r=1;t=30`,
			[]any{"r", int64(1), "t", int64(30)}},
		{"zero t kept", []Status{{Name: "d", Remaining: 1, Reset: 0}}, `"d";r=1;t=0`, []any{"r", int64(1), "t", int64(0)}},
		{"negative t omitted", []Status{{Name: "d", Remaining: 1, Reset: -1}}, `"d";r=1`, []any{"r", int64(1)}},
		{"r clamped", []Status{{Name: "d", Remaining: MaxInteger + 1, Reset: -1}}, `"d";r=999999999999999`, []any{"r", int64(MaxInteger)}},
		{"negative r clamped", []Status{{Name: "d", Remaining: -3, Reset: -1}}, `"d";r=0`, []any{"r", int64(0)}},
		{"huge t", []Status{{Name: "d", Remaining: 1, Reset: time.Duration(1<<63 - 1)}}, `"d";r=1;t=9223372037`,
			[]any{"r", int64(1), "t", int64(9223372037)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(AppendStatuses(nil, tc.in...))
			if got != tc.want {
				t.Fatalf("AppendStatuses(%+v) = %s, want %s", tc.in, got, tc.want)
			}
			l := httpsfvList(t, got)
			checkItem(t, l, 0, tc.in[0].Name, tc.params...)
		})
	}
	if got := AppendStatuses(nil); len(got) != 0 {
		t.Errorf("A8: AppendStatuses() = %q, want nothing", got)
	}
}

// TestRejectionRetryAfterNotBeforeResetWithProblemBody is the rejection of standards case A3: 429 with Retry-After no
// earlier than t, RateLimit, and the problem body.
func TestRejectionRetryAfterNotBeforeResetWithProblemBody(t *testing.T) {
	st := Status{Name: "default", Remaining: 0, Reset: 30 * time.Second}
	if got, want := string(AppendStatuses(nil, st)), `"default";r=0;t=30`; got != want {
		t.Errorf("RateLimit = %s, want %s", got, want)
	}
	ra := FormatRetryAfter(st.Reset)
	if ra != "30" {
		t.Errorf("Retry-After = %s, want 30", ra)
	}
	ss, err := ParseStatuses([]string{string(AppendStatuses(nil, st))})
	if err != nil {
		t.Fatal(err)
	}
	d, ok := ParseRetryAfter(ra, time.Unix(1700000030, 0))
	if !ok || d < ss[0].Reset {
		t.Errorf("Retry-After %v is earlier than t %v (RLH-11 §6)", d, ss[0].Reset)
	}
	body, err := QuotaExceeded(429, "default").MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded","status":429,"violated-policies":["default"]}`
	if string(body) != want {
		t.Errorf("body = %s, want %s", body, want)
	}
	if ProblemContentType != "application/problem+json" {
		t.Errorf("ProblemContentType = %s", ProblemContentType)
	}
}

// TestPolicyWindowUnderOneSecondRejected is standards case A9: a zero or sub-second window is rejected.
func TestPolicyWindowUnderOneSecondRejected(t *testing.T) {
	for _, w := range []time.Duration{0, 500 * time.Millisecond, 1500 * time.Millisecond, -time.Second} {
		if err := (Policy{Name: "p", Quota: 1, Window: w}).Validate(); err == nil {
			t.Errorf("Validate accepts window %v", w)
		} else if !strings.HasPrefix(err.Error(), "rlheader: ") {
			t.Errorf("error %q lacks the package prefix", err)
		}
	}
	if err := (Policy{Name: "p", Quota: 1, Window: time.Second}).Validate(); err != nil {
		t.Errorf("Validate rejects a 1 s window: %v", err)
	}
}

// TestZeroRemainingSerializesAsValidField documents the choice for standards case A10 at this layer: the
// serializer writes r=0 whatever the response status, and the result is a
// valid field. Whether a 3xx carries RateLimit at all is the middleware's
// decision (package httplimit), not the wire format's.
func TestZeroRemainingSerializesAsValidField(t *testing.T) {
	got := string(AppendStatuses(nil, Status{Name: "default", Remaining: 0, Reset: 30 * time.Second}))
	checkItem(t, httpsfvList(t, got), 0, "default", "r", int64(0), "t", int64(30))
}

func TestValidate(t *testing.T) {
	valid := Policy{Name: "ok", Quota: 5, Unit: UnitRequests, Window: time.Second, PartitionKey: []byte{1}}
	if err := valid.Validate(); err != nil {
		t.Fatalf("valid policy: %v", err)
	}
	for _, p := range []Policy{
		{Name: "caf\u00e9", Quota: 1, Window: time.Second},
		{Name: "tab\t", Quota: 1, Window: time.Second},
		{Name: "neg", Quota: -1, Window: time.Second},
		{Name: "big", Quota: MaxInteger + 1, Window: time.Second},
		{Name: "unit", Quota: 1, Unit: "\u00fc", Window: time.Second},
	} {
		if err := p.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", p)
		}
	}
	if err := (Status{Name: "ok", Remaining: 0, Reset: -1}).Validate(); err != nil {
		t.Errorf("valid status: %v", err)
	}
	for _, s := range []Status{{Name: "\u00e9"}, {Name: "n", Remaining: -1}, {Name: "n", Remaining: MaxInteger + 1}} {
		if err := s.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", s)
		}
	}
}

// TestParseCases covers the parsing cases B11-B27 of the standards.
func TestParseCases(t *testing.T) {
	type want struct {
		statuses []Status // nil with ok false means the field is ignored
		ok       bool
	}
	ignore := want{}
	valid := func(ss ...Status) want { return want{ss, true} }
	for _, tc := range []struct {
		name  string
		lines []string
		want  want
	}{
		{"B11", []string{`"default";r=50;t=30`}, valid(Status{Name: "default", Remaining: 50, Reset: 30 * time.Second})},
		{"B12 two field lines", []string{`"a";r=1`, `"b";r=2`},
			valid(Status{Name: "a", Remaining: 1, Reset: -1}, Status{Name: "b", Remaining: 2, Reset: -1})},
		{"B13 duplicate parameter: last wins", []string{`"a";r=1;r=2`}, valid(Status{Name: "a", Remaining: 2, Reset: -1})},
		{"B14 trailing comma", []string{`"a";r=1, `}, ignore},
		{"B15 SP before ;", []string{`"a" ;r=1`}, ignore},
		{"B15 SP after ;", []string{`"a"; r=1`}, valid(Status{Name: "a", Remaining: 1, Reset: -1})},
		{"B16 upper-case key", []string{`"a";R=1`}, ignore},
		{"B17 16 digits", []string{`"a";r=1000000000000000`}, ignore},
		{"B17 15 digits", []string{`"a";r=999999999999999`}, valid(Status{Name: "a", Remaining: 999999999999999, Reset: -1})},
		{"B18 Decimal r", []string{`"a";r=1.5`}, ignore},
		{"B19 negative r", []string{`"a";r=-1`}, ignore},
		{"B20 r missing", []string{`"a";t=10`}, ignore},
		{"B23 unknown parameter", []string{`"a";r=5;acme-burst=10`}, valid(Status{Name: "a", Remaining: 5, Reset: -1})},
		{"B24 no padding", []string{`"a";r=5;pk=:dXNlci00Mg:`},
			valid(Status{Name: "a", Remaining: 5, Reset: -1, PartitionKey: []byte("user-42")})},
		{"B24 non-zero pad bits", []string{`"a";r=5;pk=:cHsdsRa894==:`},
			valid(Status{Name: "a", Remaining: 5, Reset: -1, PartitionKey: []byte{0x70, 0x7b, 0x1d, 0xb1, 0x16, 0xbc, 0xf7}})},
		{"B24 bad base64 character", []string{`"a";r=5;pk=:abc$:`}, ignore},
		{"B25 invalid escape", []string{`"a\q";r=1`}, ignore},
		{"B25 non-ASCII", []string{`"é";r=1`}, ignore},
		{"B26 legacy -07 dictionary", []string{`limit=100, remaining=50, reset=5`}, ignore},
		// beyond the standards' list
		{"negative t", []string{`"a";r=1;t=-1`}, ignore},
		{"Decimal t", []string{`"a";r=1;t=1.0`}, ignore},
		{"String r", []string{`"a";r="1"`}, ignore},
		{"Boolean r", []string{`"a";r`}, ignore},
		{"Token name", []string{`a;r=1`}, ignore},
		{"Inner List member", []string{`("a");r=1`}, ignore},
		{"pk not bytes", []string{`"a";r=1;pk="x"`}, ignore},
		{"one bad member spoils the field", []string{`"a";r=1, "b";r=-1`}, ignore},
		{"empty field", []string{``}, valid()},
		{"no lines", nil, valid()},
		{"huge t saturates", []string{`"a";r=1;t=999999999999999`},
			valid(Status{Name: "a", Remaining: 1, Reset: time.Duration(maxSeconds) * time.Second})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStatuses(tc.lines)
			if (err == nil) != tc.want.ok {
				t.Fatalf("ParseStatuses(%q) = %+v, %v; want ok %v", tc.lines, got, err, tc.want.ok)
			}
			if err != nil {
				if got != nil || !strings.HasPrefix(err.Error(), "rlheader: ") {
					t.Fatalf("ParseStatuses(%q) = %+v, %v", tc.lines, got, err)
				}
				return
			}
			if !reflect.DeepEqual(got, tc.want.statuses) {
				t.Fatalf("ParseStatuses(%q) = %+v, want %+v", tc.lines, got, tc.want.statuses)
			}
		})
	}
}

func TestParsePolicies(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		want  []Policy
		ok    bool
	}{
		{"B21 q missing", []string{`"a";w=60`}, nil, false},
		{"B21 w=0", []string{`"a";q=10;w=0`}, nil, false},
		{"B22 Token name", []string{`default;q=100`}, nil, false},
		{"draft example", []string{`"burst";q=100;w=60,"daily";q=1000;w=86400`},
			[]Policy{{Name: "burst", Quota: 100, Window: time.Minute}, {Name: "daily", Quota: 1000, Window: 24 * time.Hour}}, true},
		{"draft example with unit and pk", []string{`"peruser";q=65535;qu="content-bytes";w=10;pk=:dXNlci00Mg==:`},
			[]Policy{{Name: "peruser", Quota: 65535, Unit: "content-bytes", Window: 10 * time.Second, PartitionKey: []byte("user-42")}}, true},
		{"no w", []string{`"a";q=1`}, []Policy{{Name: "a", Quota: 1}}, true},
		{"two lines", []string{`"hour";q=1000;w=3600`, `"day";q=5000;w=86400`},
			[]Policy{{Name: "hour", Quota: 1000, Window: time.Hour}, {Name: "day", Quota: 5000, Window: 24 * time.Hour}}, true},
		{"unknown params", []string{`"a";q=1;acme-burst=5;x=?1;w=2`}, []Policy{{Name: "a", Quota: 1, Window: 2 * time.Second}}, true},
		{"negative q", []string{`"a";q=-1`}, nil, false},
		{"Decimal q", []string{`"a";q=1.0`}, nil, false},
		{"negative w", []string{`"a";q=1;w=-60`}, nil, false},
		{"Decimal w", []string{`"a";q=1;w=1.5`}, nil, false},
		{"Token qu", []string{`"a";q=1;qu=requests`}, nil, false},
		{"pk Token", []string{`"a";q=1;pk=abc`}, nil, false},
		{"syntax error", []string{`"a";q=1,`}, nil, false},
		{"empty", []string{` `}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePolicies(tc.lines)
			if (err == nil) != tc.ok {
				t.Fatalf("ParsePolicies(%q) = %+v, %v; want ok %v", tc.lines, got, err, tc.ok)
			}
			if err == nil && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParsePolicies(%q) = %+v, want %+v", tc.lines, got, tc.want)
			}
		})
	}
}

// TestRetryAfterAndRateLimitBothParse is standards case B27 at this layer: both fields parse, and the
// Retry-After delay (20 s) is what the client obeys over t (40 s). The
// precedence itself is the client's rule; here we check the values it needs.
func TestRetryAfterAndRateLimitBothParse(t *testing.T) {
	now := time.Unix(1700000000, 0)
	ra, ok := ParseRetryAfter("20", now)
	ss, err := ParseStatuses([]string{`"d";r=15;t=40`})
	if !ok || err != nil || ra != 20*time.Second || ss[0].Reset != 40*time.Second || ss[0].Remaining != 15 {
		t.Fatalf("Retry-After = %v, %v; RateLimit = %+v, %v", ra, ok, ss, err)
	}
}

func TestRoundTrip(t *testing.T) {
	ps := []Policy{
		{Name: `we"ird\name`, Quota: 0, Window: time.Second},
		{Name: "bw", Quota: MaxInteger, Unit: UnitContentBytes, Window: 24 * time.Hour, PartitionKey: []byte{0, 1, 2, 0xff}},
	}
	got, err := ParsePolicies([]string{string(AppendPolicies(nil, ps...))})
	if err != nil || !reflect.DeepEqual(got, ps) {
		t.Fatalf("policies round trip: %+v, %v; want %+v", got, err, ps)
	}
	ss := []Status{
		{Name: "a", Remaining: 3, Reset: -1},
		{Name: "b", Remaining: 0, Reset: 0, PartitionKey: []byte("k")},
	}
	gotS, err := ParseStatuses([]string{string(AppendStatuses(nil, ss...))})
	if err != nil || !reflect.DeepEqual(gotS, ss) {
		t.Fatalf("statuses round trip: %+v, %v; want %+v", gotS, err, ss)
	}
	if !bytes.Equal(gotS[1].PartitionKey, []byte("k")) {
		t.Fatal("pk lost")
	}
}
