package rlheader

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
)

// fuzzLines splits fuzz input into field lines at '\n'.
func fuzzLines(s string) []string { return strings.Split(s, "\n") }

// checkAgainstHTTPSFV is the cross-check every SF fuzzer makes: our List
// parser and httpsfv agree on acceptance and values (see
// compareWithHTTPSFV), and if a field parser of ours accepts the field,
// httpsfv accepts it too.
func checkAgainstHTTPSFV(t *testing.T, lines []string, accepted bool) {
	t.Helper()
	compareWithHTTPSFV(t, lines)
	if !accepted {
		return
	}
	p := sfParser{s: strings.Join(lines, ", ")}
	if _, err := p.list(); err == nil && p.lenientB64 {
		return // the documented padding leniency httpsfv lacks
	}
	if _, err := httpsfv.UnmarshalList(lines); err != nil {
		t.Fatalf("we accept %q, httpsfv rejects it: %v", lines, err)
	}
}

func FuzzParseStatuses(f *testing.F) {
	fuzzList(f, "ParseStatuses", ParseStatuses, AppendStatuses, func(st Status) bool {
		return st.Remaining >= 0 && st.Remaining <= MaxInteger && st.Reset >= -1 && st.Validate() == nil
	}, `"default";r=50;t=30`, "\"a\";r=1\n\"b\";r=2", `"a";r=5;pk=:dXNlci00Mg:`, `"a";r=1, `)
}

func FuzzParsePolicies(f *testing.F) {
	fuzzList(f, "ParsePolicies", ParsePolicies, AppendPolicies, func(p Policy) bool {
		return p.Quota >= 0 && p.Quota <= MaxInteger && p.Window >= 0 && p.Window%time.Second == 0
	}, `"permin";q=50;w=60, "perhr";q=1000;w=3600`, `"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`, `default;q=100`, `"a";q=10;w=0`)
}

// fuzzList fuzzes parse (named what), a parser of a list field, from
// seeds: it accepts only what httpsfv accepts, every item it gives is
// valid, and it reads the serialization appendTo writes of them back.
func fuzzList[T any](f *testing.F, what string, parse func([]string) ([]T, error), appendTo func([]byte, ...T) []byte, valid func(T) bool, seeds ...string) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lines := fuzzLines(s)
		vs, err := parse(lines)
		checkAgainstHTTPSFV(t, lines, err == nil)
		if err != nil {
			return
		}
		for _, v := range vs {
			if !valid(v) {
				t.Fatalf("%s(%q) gave an invalid %+v", what, lines, v)
			}
		}
		checkRoundTrip(t, what, lines, vs, parse, appendTo)
	})
}

// checkRoundTrip checks that parse (named what) reads the serialization
// appendTo writes of vs, which parse read from lines, back as vs, and
// that httpsfv accepts that serialization.
func checkRoundTrip[T any](t *testing.T, what string, lines []string, vs []T, parse func([]string) ([]T, error), appendTo func([]byte, ...T) []byte) {
	t.Helper()
	out := appendTo(nil, vs...)
	again, err := parse([]string{string(out)})
	if err != nil {
		t.Fatalf("%s rejects our serialization %s of %q: %v", what, out, lines, err)
	}
	if len(vs) == 0 {
		again = vs
	}
	if !reflect.DeepEqual(vs, again) {
		t.Fatalf("%q: parsed %+v, reparsed %s as %+v", lines, vs, out, again)
	}
	if len(out) > 0 {
		if _, err := httpsfv.UnmarshalList([]string{string(out)}); err != nil {
			t.Fatalf("httpsfv rejects our serialization %s: %v", out, err)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"120", "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "-5", "1.5"} {
		f.Add(s, int64(1700000000))
	}
	f.Fuzz(func(t *testing.T, v string, nowUnix int64) {
		now := time.Unix(nowUnix%(1<<40), 0) // keep now within years time.Time formats
		d, ok := ParseRetryAfter(v, now)
		if !ok {
			if d != 0 {
				t.Fatalf("ParseRetryAfter(%q) = %v, false", v, d)
			}
			return
		}
		if d < 0 || d > MaxRetryAfter {
			t.Fatalf("ParseRetryAfter(%q) = %v out of range", v, d)
		}
		tv := strings.Trim(v, " \t")
		if isDigit(tv[0]) {
			// delay-seconds: formatting and parsing again is stable.
			if d2, ok := ParseRetryAfter(FormatRetryAfter(d), now); !ok || d2 != d {
				t.Fatalf("ParseRetryAfter(%q) = %v; reformatted %q parses as %v, %v", v, d, FormatRetryAfter(d), d2, ok)
			}
			return
		}
		// HTTP-date: the instant survives formatting as IMF-fixdate.
		at, ok := parseHTTPDate(tv, now)
		if !ok {
			t.Fatalf("ParseRetryAfter accepts %q but parseHTTPDate does not", v)
		}
		if at.Year() < 0 || at.Year() > 9999 {
			return // outside what a 4-digit year can say
		}
		back, ok := parseHTTPDate(FormatRetryAfterDate(at), now)
		if !ok || !back.Equal(at) {
			t.Fatalf("%q = %v; as IMF-fixdate %q = %v, %v", v, at, FormatRetryAfterDate(at), back, ok)
		}
	})
}
