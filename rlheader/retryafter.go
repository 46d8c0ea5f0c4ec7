package rlheader

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter is the longest delay ParseRetryAfter returns: the largest
// whole number of seconds a time.Duration holds (about 292 years). Larger
// delay-seconds saturate to it rather than being ignored, because ignoring
// a huge wait would make the client retry at once. Capping a server-given
// wait to something sensible is the client's job.
const MaxRetryAfter = time.Duration(maxSeconds) * time.Second

// FormatRetryAfter returns the delay-seconds form of Retry-After for d: whole
// seconds rounded up, never negative (a negative d gives "0"). Example:
// 120*time.Second gives "120"; 1500*time.Millisecond gives "2".
func FormatRetryAfter(d time.Duration) string {
	return strconv.FormatInt(ceilSeconds(d), 10)
}

// AppendRetryAfter appends FormatRetryAfter(d) to dst without allocating.
func AppendRetryAfter(dst []byte, d time.Duration) []byte {
	return strconv.AppendInt(dst, ceilSeconds(d), 10)
}

// imfFixdate is the layout of IMF-fixdate (RFC 9110 §5.6.7), the only form
// senders may generate.
const imfFixdate = "Mon, 02 Jan 2006 15:04:05 GMT"

// FormatRetryAfterDate returns the HTTP-date form of Retry-After for the
// instant t, as an IMF-fixdate in GMT. A fraction of a second is rounded up,
// so the date is never earlier than t. Example: time.Unix(1700000005, 0)
// gives "Tue, 14 Nov 2023 22:13:25 GMT".
func FormatRetryAfterDate(t time.Time) string {
	t = t.UTC()
	if t.Nanosecond() != 0 {
		t = t.Truncate(time.Second).Add(time.Second)
	}
	return t.Format(imfFixdate)
}

// ParseRetryAfter parses a Retry-After value (RFC 9110 §10.2.3) received at
// now and returns the delay it asks for.
//
// It accepts delay-seconds (1*DIGIT) and an HTTP-date in any of the three
// formats recipients must accept: IMF-fixdate ("Sun, 06 Nov 1994 08:49:37
// GMT"), RFC 850 ("Sunday, 06-Nov-94 08:49:37 GMT", whose two-digit year is
// read as RFC 9110 says: the year with those digits that is no more than 50
// years ahead of now) and asctime ("Sun Nov  6 08:49:37 1994"). Leading and
// trailing spaces and tabs are ignored; the formats are otherwise matched
// exactly, including case. A date in the past gives 0, true. Delays beyond
// MaxRetryAfter, in either form, saturate to it.
//
// Anything else, such as "-5", "1.5", "+3", an empty value or a malformed
// date, gives 0, false: the field must then be ignored.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.Trim(v, " \t")
	if v == "" {
		return 0, false
	}
	if isDigit(v[0]) {
		return parseDelaySeconds(v)
	}
	t, ok := parseHTTPDate(v, now)
	if !ok {
		return 0, false
	}
	d := t.Sub(now)
	switch {
	case d < 0:
		d = 0
	case d > MaxRetryAfter:
		d = MaxRetryAfter
	}
	return d, true
}

func parseDelaySeconds(v string) (time.Duration, bool) {
	var secs int64
	for i := 0; i < len(v); i++ {
		if !isDigit(v[i]) {
			return 0, false
		}
		if secs <= maxSeconds {
			secs = secs*10 + int64(v[i]-'0') // cannot overflow: maxSeconds*10+9 < MaxInt64
		}
	}
	return secondsDuration(secs), true
}

var (
	shortDays = [...]string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}
	longDays  = [...]string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
	months    = [...]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
)

// parseHTTPDate parses the three HTTP-date formats of RFC 9110 §5.6.7,
// told apart by where the first comma stands. The day name must be a valid
// one but is not checked against the date.
func parseHTTPDate(v string, now time.Time) (time.Time, bool) {
	comma := strings.IndexByte(v, ',')
	switch {
	case comma == 3:
		return parseIMFFixdate(v)
	case comma > 3:
		return parseRFC850Date(v, comma, now)
	case comma < 0:
		return parseAsctimeDate(v)
	}
	return time.Time{}, false
}

// parseIMFFixdate parses "Sun, 06 Nov 1994 08:49:37 GMT".
func parseIMFFixdate(v string) (time.Time, bool) {
	if len(v) != 29 || !slices.Contains(shortDays[:], v[:3]) || v[3:5] != ", " ||
		v[7] != ' ' || v[11] != ' ' || v[16] != ' ' || v[25:] != " GMT" {
		return time.Time{}, false
	}
	day, ok1 := num(v[5:7])
	mon, ok2 := month(v[8:11])
	year, ok3 := num(v[12:16])
	if !ok1 || !ok2 || !ok3 {
		return time.Time{}, false
	}
	return makeDate(year, mon, day, v[17:25])
}

// parseRFC850Date parses "Sunday, 06-Nov-94 08:49:37 GMT", whose comma
// stands at index comma; the two-digit year is read relative to now.
func parseRFC850Date(v string, comma int, now time.Time) (time.Time, bool) {
	rest := v[comma:]
	if !slices.Contains(longDays[:], v[:comma]) || len(rest) != 24 || rest[:2] != ", " {
		return time.Time{}, false
	}
	rest = rest[2:] // "06-Nov-94 08:49:37 GMT"
	if rest[2] != '-' || rest[6] != '-' || rest[9] != ' ' || rest[18:] != " GMT" {
		return time.Time{}, false
	}
	day, ok1 := num(rest[:2])
	mon, ok2 := month(rest[3:6])
	yy, ok3 := num(rest[7:9])
	if !ok1 || !ok2 || !ok3 {
		return time.Time{}, false
	}
	return makeDate(twoDigitYear(yy, now), mon, day, rest[10:18])
}

// twoDigitYear is the year ending in the two digits yy that is at most 50
// years ahead of now and less than 50 behind it.
func twoDigitYear(yy int, now time.Time) int {
	nowYear := now.UTC().Year()
	year := nowYear - nowYear%100 + yy
	switch {
	case year > nowYear+50:
		year -= 100
	case year <= nowYear-50:
		year += 100
	}
	return year
}

// parseAsctimeDate parses "Sun Nov  6 08:49:37 1994".
func parseAsctimeDate(v string) (time.Time, bool) {
	if len(v) != 24 || !slices.Contains(shortDays[:], v[:3]) || v[3] != ' ' || v[7] != ' ' ||
		v[10] != ' ' || v[19] != ' ' {
		return time.Time{}, false
	}
	mon, ok1 := month(v[4:7])
	dd := v[8:10]
	if dd[0] == ' ' {
		dd = dd[1:]
	}
	day, ok2 := num(dd)
	year, ok3 := num(v[20:])
	if !ok1 || !ok2 || !ok3 {
		return time.Time{}, false
	}
	return makeDate(year, mon, day, v[11:19])
}

func month(s string) (time.Month, bool) {
	i := slices.Index(months[:], s)
	return time.Month(i + 1), i >= 0
}

// num parses a short run of ASCII digits.
func num(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// makeDate builds a UTC time from a date and an "hh:mm:ss" time of day,
// rejecting impossible values. A leap second (:60) is accepted and read as
// the next second.
func makeDate(year int, mon time.Month, day int, hms string) (time.Time, bool) {
	if hms[2] != ':' || hms[5] != ':' {
		return time.Time{}, false
	}
	h, ok1 := num(hms[:2])
	m, ok2 := num(hms[3:5])
	s, ok3 := num(hms[6:8])
	if !ok1 || !ok2 || !ok3 || h > 23 || m > 59 || s > 60 || day < 1 {
		return time.Time{}, false
	}
	t := time.Date(year, mon, day, h, m, s, 0, time.UTC)
	if d := time.Date(year, mon, day, 0, 0, 0, 0, time.UTC); d.Day() != day {
		return time.Time{}, false // e.g. 30 Feb
	}
	return t, true
}
