package rlheader

import (
	"net/http"
	"testing"
	"time"
)

func TestFormatRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{120 * time.Second, "120"}, // C28
		{0, "0"},
		{-5 * time.Second, "0"},
		{time.Nanosecond, "1"},
		{1500 * time.Millisecond, "2"},
		{30 * time.Second, "30"},
		{time.Duration(1<<63 - 1), "9223372037"},
	} {
		if got := FormatRetryAfter(tc.d); got != tc.want {
			t.Errorf("FormatRetryAfter(%v) = %s, want %s", tc.d, got, tc.want)
		}
		if got := string(AppendRetryAfter([]byte("x"), tc.d)); got != "x"+tc.want {
			t.Errorf("AppendRetryAfter(%v) = %s, want x%s", tc.d, got, tc.want)
		}
	}
}

func TestFormatRetryAfterDate(t *testing.T) {
	// C29
	if got, want := FormatRetryAfterDate(time.Unix(1700000000, 0).Add(5*time.Second)), "Tue, 14 Nov 2023 22:13:25 GMT"; got != want {
		t.Errorf("FormatRetryAfterDate = %s, want %s", got, want)
	}
	// Any zone is written in GMT, and a fraction rounds up.
	at := time.Date(2023, 11, 14, 23, 13, 24, 1, time.FixedZone("CET", 3600))
	if got, want := FormatRetryAfterDate(at), "Tue, 14 Nov 2023 22:13:25 GMT"; got != want {
		t.Errorf("FormatRetryAfterDate(%v) = %s, want %s", at, got, want)
	}
	// Same layout as net/http's.
	if got, want := FormatRetryAfterDate(time.Unix(784111777, 0)), time.Unix(784111777, 0).UTC().Format(http.TimeFormat); got != want {
		t.Errorf("FormatRetryAfterDate = %s, net/http says %s", got, want)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(1994, 11, 6, 8, 49, 0, 0, time.UTC) // 37 s before the RFC's example date
	for _, tc := range []struct {
		name string
		in   string
		want time.Duration
		ok   bool
	}{
		{"C28 delay-seconds", "120", 120 * time.Second, true},
		{"zero", "0", 0, true},
		{"leading zeros", "007", 7 * time.Second, true},
		{"surrounding OWS", " \t30 ", 30 * time.Second, true},
		{"IMF-fixdate", "Sun, 06 Nov 1994 08:49:37 GMT", 37 * time.Second, true},
		{"C30 RFC 850", "Sunday, 06-Nov-94 08:49:37 GMT", 37 * time.Second, true},
		{"C30 asctime", "Sun Nov  6 08:49:37 1994", 37 * time.Second, true},
		{"asctime two-digit day", "Sun Nov 06 08:49:37 1994", 37 * time.Second, true},
		{"date in the past", "Sun, 06 Nov 1994 08:48:00 GMT", 0, true},
		{"leap second", "Sun, 06 Nov 1994 08:49:60 GMT", 60 * time.Second, true},
		{"overflow saturates", "99999999999999999999", MaxRetryAfter, true},
		{"just above a Duration", "9223372037", MaxRetryAfter, true},
		{"C30 negative", "-5", 0, false},
		{"C30 fraction", "1.5", 0, false},
		{"plus sign", "+5", 0, false},
		{"empty", "", 0, false},
		{"blank", "  ", 0, false},
		{"digits then junk", "12a", 0, false},
		{"inner space", "1 2", 0, false},
		{"garbage", "soon", 0, false},
		{"lower-case IMF", "sun, 06 nov 1994 08:49:37 gmt", 0, false},
		{"not GMT", "Sun, 06 Nov 1994 08:49:37 UTC", 0, false},
		{"fractional seconds", "Sun, 06 Nov 1994 08:49:37.5 GMT", 0, false},
		{"30 February", "Wed, 30 Feb 1994 08:49:37 GMT", 0, false},
		{"hour 24", "Sun, 06 Nov 1994 24:00:00 GMT", 0, false},
		{"minute 60", "Sun, 06 Nov 1994 08:60:00 GMT", 0, false},
		{"day 0", "Sun, 00 Nov 1994 08:49:37 GMT", 0, false},
		{"one-digit IMF day", "Sun, 6 Nov 1994 08:49:37 GMT", 0, false},
		{"bad day name", "Sun, 06 Nov 1994 08:49:37 GMT"[1:], 0, false},
		{"bad month", "Sun, 06 Nox 1994 08:49:37 GMT", 0, false},
		{"RFC 850 short day name", "Sun, 06-Nov-94 08:49:37 GMT", 0, false},
		{"RFC 850 bad separator", "Sunday, 06 Nov 94 08:49:37 GMT", 0, false},
		{"asctime bad spacing", "Sun Nov 6  08:49:37 1994", 0, false},
		{"asctime trailing junk", "Sun Nov  6 08:49:37 1994x", 0, false},
		{"sign in a date field", "Sun, -6 Nov 1994 08:49:37 GMT", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseRetryAfter(tc.in, now)
			if got != tc.want || ok != tc.ok {
				t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestRFC850Century checks RFC 9110 §5.6.7: a two-digit year that looks more
// than 50 years ahead is in the previous century.
func TestRFC850Century(t *testing.T) {
	for _, tc := range []struct {
		now  int
		in   string
		want int
	}{
		{2026, "Sunday, 06-Nov-94 08:49:37 GMT", 1994},
		{2026, "Thursday, 06-Nov-30 08:49:37 GMT", 2030},
		{2026, "Friday, 06-Nov-76 08:49:37 GMT", 2076},
		{2026, "Friday, 06-Nov-77 08:49:37 GMT", 1977},
		{2099, "Friday, 06-Nov-01 08:49:37 GMT", 2101},
		{2099, "Friday, 06-Nov-50 08:49:37 GMT", 2050},
		{2099, "Friday, 06-Nov-49 08:49:37 GMT", 2149},
		{2099, "Friday, 06-Nov-48 08:49:37 GMT", 2148},
		{2000, "Friday, 06-Nov-51 08:49:37 GMT", 1951},
	} {
		now := time.Date(tc.now, 1, 1, 0, 0, 0, 0, time.UTC)
		got, ok := parseHTTPDate(tc.in, now)
		if !ok || got.Year() != tc.want {
			t.Errorf("now %d: parseHTTPDate(%q) = %v, %v; want year %d", tc.now, tc.in, got, ok, tc.want)
		}
	}
}

func TestRetryAfterDateRoundTrip(t *testing.T) {
	now := time.Unix(1700000000, 0)
	for _, d := range []time.Duration{0, time.Second, 5 * time.Second, 90 * time.Minute, 400 * 24 * time.Hour} {
		v := FormatRetryAfterDate(now.Add(d))
		got, ok := ParseRetryAfter(v, now)
		if !ok || got != d {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v", v, got, ok, d)
		}
	}
	// A date far in the future is capped like delay-seconds.
	if got, ok := ParseRetryAfter("Fri, 31 Dec 9999 23:59:59 GMT", now); !ok || got != MaxRetryAfter {
		t.Errorf("year 9999 = %v, %v; want %v", got, ok, MaxRetryAfter)
	}
}
