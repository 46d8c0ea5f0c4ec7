// Package sluice is the vocabulary of the Sluice rate limiter: the Limit a
// caller asks for, the Result a decision returns, the Limiter interface every
// store implements, a Clock, and the errors that describe bad input.
//
// The package imports nothing but the standard library. The algorithms live in
// package algorithm, the stores in memstore (and later redisstore), and the
// faces (HTTP, gRPC, CLI) build on the Limiter interface alone.
//
// A Limit travels with every call, so one Limiter serves every key and every
// policy:
//
//	store := memstore.New(memstore.Config{})
//	defer store.Close()
//	res, err := store.AllowN(ctx, "user:42", sluice.PerSecond(5).WithBurst(10), 1)
//	if err != nil { /* bad input or a failing backend, never a denial */ }
//	if !res.Allowed { /* wait res.RetryAfter */ }
package sluice

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Algorithm names one of the five rate limiting algorithms. The zero value is
// TokenBucket.
type Algorithm uint8

const (
	// TokenBucket refills Rate tokens every Period up to Burst tokens; a
	// request of cost c takes c tokens. It is implemented in its
	// one-timestamp GCRA form. Capacity: Burst.
	TokenBucket Algorithm = iota
	// FixedWindow counts requests in windows of length Period aligned to the
	// Unix epoch and admits at most Rate per window. Its documented flaw: up
	// to 2·Rate can pass around a window boundary. Capacity: Rate.
	FixedWindow
	// SlidingWindow estimates the count in the last Period as
	// previous·overlap + current and admits while the estimate stays within
	// Rate. Memory is constant per key; the count is an estimate.
	// Capacity: Rate.
	SlidingWindow
	// SlidingLog keeps a log of (instant, count) entries and admits at most
	// Rate units in any window of length Period, exactly: a request is
	// admitted if and only if the units admitted in the last Period plus its
	// cost are at most Rate. A request is one entry whatever its cost, so a
	// key holds at most Rate entries of 16 bytes (Limit.LogEntries); a
	// Precision trades exactness for fewer entries (see package
	// algorithm). Capacity: Rate.
	SlidingLog
	// LeakyBucket is the leaky bucket as a meter with NGINX limit_req's exact
	// accounting (milli-requests, millisecond clock, rejected requests not
	// charged). Burst is the number of requests admitted back to back from
	// an idle key, so NGINX's burst=N is Burst N+1. Capacity: Burst.
	LeakyBucket

	numAlgorithms = iota
)

// algorithms registers each algorithm: its configuration name, and whether
// Burst is its capacity (a bucket) or Rate is (a window). A new algorithm is
// a constant above and a row here; the stores add theirs (see
// docs/architecture.md).
var algorithms = [numAlgorithms]struct {
	name   string
	bucket bool
}{
	TokenBucket:   {"token_bucket", true},
	FixedWindow:   {"fixed_window", false},
	SlidingWindow: {"sliding_window", false},
	SlidingLog:    {"sliding_log", false},
	LeakyBucket:   {"leaky_bucket", true},
}

// Algorithms lists every algorithm, in a stable order.
func Algorithms() []Algorithm {
	out := make([]Algorithm, numAlgorithms)
	for i := range out {
		out[i] = Algorithm(i)
	}
	return out
}

// String returns the algorithm's configuration name, such as "token_bucket".
func (a Algorithm) String() string {
	if int(a) < len(algorithms) {
		return algorithms[a].name
	}
	return "algorithm(" + strconv.Itoa(int(a)) + ")"
}

// UsesBurst reports whether a is a bucket, whose capacity is Limit.Burst
// (TokenBucket, LeakyBucket), rather than a window, whose capacity is
// Limit.Rate and which ignores Burst. It is false for an unknown algorithm.
func (a Algorithm) UsesBurst() bool { return bucketAlgorithms>>a&1 != 0 }

// bucketAlgorithms has bit a set for each algorithm a whose row in
// algorithms is a bucket: UsesBurst in a few instructions, for a decision's
// hot path.
var bucketAlgorithms = func() uint64 {
	var m uint64
	for a, alg := range algorithms {
		if alg.bucket {
			m |= 1 << a
		}
	}
	return m
}()

// ParseAlgorithm returns the algorithm named s. It accepts the names that
// String returns, with '-' in place of '_' too, and "gcra" for TokenBucket.
func ParseAlgorithm(s string) (Algorithm, error) {
	names := make([]string, len(algorithms))
	for i, alg := range algorithms {
		if s == alg.name || s == strings.ReplaceAll(alg.name, "_", "-") {
			return Algorithm(i), nil
		}
		names[i] = alg.name
	}
	if s == "gcra" {
		return TokenBucket, nil
	}
	return 0, fmt.Errorf("%w: unknown algorithm %q (want one of %s)", ErrInvalidLimit, s, strings.Join(names, ", "))
}

// MarshalText implements encoding.TextMarshaler.
func (a Algorithm) MarshalText() ([]byte, error) {
	if int(a) >= len(algorithms) {
		return nil, fmt.Errorf("%w: unknown algorithm %d", ErrInvalidLimit, a)
	}
	return []byte(a.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler using ParseAlgorithm.
func (a *Algorithm) UnmarshalText(b []byte) error {
	v, err := ParseAlgorithm(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// Limit is a rate limit: at most Rate units per Period, shaped by Algorithm.
//
// For TokenBucket and LeakyBucket, Burst is how many units an idle key may
// spend at once and must be at least 1; the sustained rate is Rate per Period.
// For the window algorithms Burst is ignored: the capacity of a window is
// Rate.
//
// The zero Limit is invalid. Limits are plain values, safe to copy and to
// share between goroutines.
type Limit struct {
	// Algorithm shapes the traffic. The zero value is TokenBucket.
	Algorithm Algorithm
	// Rate is the number of units allowed per Period. Must be at least 1.
	Rate int
	// Period is the length of the window, or the time in which the bucket
	// refills Rate units. Must be positive.
	Period time.Duration
	// Burst is the bucket size for TokenBucket and LeakyBucket (at least 1);
	// ignored by the window algorithms.
	Burst int
	// CountRejected makes SlidingWindow count rejected requests too, so that
	// a client that keeps sending while limited stays limited into the next
	// window (Cloudflare counts every request this way). It is an error with
	// the other algorithms.
	CountRejected bool
	// Buckets, for SlidingWindow, cuts each Period into that many
	// sub-windows of Period/Buckets and keeps one counter for each, plus
	// one for the sub-window just gone: the estimate then assumes only that
	// oldest sub-window's units were spread evenly, not a whole period's,
	// so it errs less (docs/algorithms.md has the measured error at 1 to
	// 16). 0 and 1 both mean today's counter of two whole windows; at most
	// MaxBuckets. With more than one, Period must be a whole number of
	// microseconds times Buckets and Rate at most MaxBucketRate. It is an
	// error with the other algorithms.
	Buckets uint8
	// Moments, for SlidingWindow, makes each of the Buckets sub-windows
	// (one for 0 or 1) also keep the means of the first Moments shifted
	// Legendre polynomials of its arrivals' offsets, so that the estimate
	// of the oldest sub-window's units still inside the period follows
	// where they fell instead of assuming them spread evenly
	// (docs/algorithms.md, "Estimators that know more than a count"). The
	// zero value keeps counts only, today's counter. At most MaxMoments;
	// with any, Period must be a whole number of microseconds times the
	// number of sub-windows and Rate at most MaxMomentsRate. It is an
	// error with the other algorithms.
	Moments uint8
	// Calendar, when set (its Unit is not zero), aligns a FixedWindow's
	// windows to calendar periods in a time zone (a month resetting on the
	// 15th, Berlin time) instead of to multiples of Period since the Unix
	// epoch; Period must then be the unit's nominal length
	// (CalendarUnit.Nominal), which faces report as the window's length.
	// The zero Calendar means no calendar: windows of Period. It is an
	// error with the other algorithms. See package calendar for the math.
	Calendar Calendar
	// Billable marks a limit whose counts a bill is made from. A store that
	// keeps a ledger (package pgstore) keeps each period of a billable
	// limit after the period ends, until the ledger is pruned, and may
	// delete the periods of other limits once they end, so that keys a
	// client chooses (one per descriptor value) leave no lasting rows. It
	// changes no decision, and stores that keep no ledger ignore it. The
	// zero value is not billable.
	Billable bool
	// Precision, for a SlidingLog, is the slot of time within which the log
	// merges the units it admits into one entry, stamped with the latest of
	// their instants: the log then holds at most ⌈Period/Precision⌉+1
	// entries whatever the rate, and is conservative by at most Precision
	// (a unit is counted in the window up to Precision longer than it
	// should be, so the log never admits more than Rate in a window, and
	// may refuse a request the exact log would admit). The zero value
	// means exact: only units of the same instant share an entry. It must
	// be zero or between a nanosecond and Period, and zero for the other
	// algorithms.
	Precision time.Duration
}

// LogEntries returns the most entries a SlidingLog under l holds, its
// memory in 16-byte entries at worst: Rate without a Precision, else
// ⌈Period/Precision⌉+1 if that is fewer. It is 0 for the other
// algorithms, whose state has a fixed size.
func (l Limit) LogEntries() int {
	if l.Algorithm != SlidingLog {
		return 0
	}
	n := int64(l.Rate)
	if l.Precision > 0 {
		n = min(n, (int64(l.Period)-1)/int64(l.Precision)+2)
	}
	return int(n)
}

// CalendarUnit is the length of a calendar period. The zero value,
// NoCalendar, means the Limit has no calendar.
type CalendarUnit uint8

// The calendar units. A day runs from local midnight to the next (23 or 25
// hours across a daylight saving change, 23h30 or 24h30 on Lord Howe
// Island); a week from its first weekday's midnight; a month, quarter or
// year from midnight of its anchor day.
const (
	NoCalendar CalendarUnit = iota
	CalendarDay
	CalendarWeek
	CalendarMonth
	CalendarQuarter
	CalendarYear

	numCalendarUnits = iota
)

var calendarUnitNames = [numCalendarUnits]string{"", "day", "week", "month", "quarter", "year"}

// String returns the unit's configuration name, such as "month", or "" for
// NoCalendar.
func (u CalendarUnit) String() string {
	if int(u) < len(calendarUnitNames) {
		return calendarUnitNames[u]
	}
	return "calendar_unit(" + strconv.Itoa(int(u)) + ")"
}

// Nominal returns the unit's nominal length, the Period a Limit with a
// Calendar of this unit must have: a day is 24 h, a week 7 days, a month 30
// days, a quarter 90 days and a year 365 days (envoyproxy/ratelimit's
// lengths for the units it has). The calendar's periods themselves vary
// (see package calendar). It returns 0 for NoCalendar or an unknown unit.
func (u CalendarUnit) Nominal() time.Duration {
	const day = 24 * time.Hour
	switch u {
	case CalendarDay:
		return day
	case CalendarWeek:
		return 7 * day
	case CalendarMonth:
		return 30 * day
	case CalendarQuarter:
		return 90 * day
	case CalendarYear:
		return 365 * day
	}
	return 0
}

// WeekStart is the day a calendar week starts on. The zero value, ISOWeek,
// is Monday, as in ISO 8601; WeekStartingOn names any other day.
type WeekStart uint8

// ISOWeek starts weeks on Monday, as ISO 8601 does.
const ISOWeek WeekStart = 0

// WeekStartingOn returns the WeekStart of weeks that begin on d.
func WeekStartingOn(d time.Weekday) WeekStart { return WeekStart(d%7) + 1 }

// Weekday returns the day weeks start on: Monday for ISOWeek.
func (w WeekStart) Weekday() time.Weekday {
	if w == ISOWeek {
		return time.Monday
	}
	return time.Weekday(w-1) % 7
}

// Calendar aligns a FixedWindow to calendar periods in a time zone. The zero
// value is no calendar. A Calendar is a plain comparable value; two that
// hold different *time.Location pointers for the same zone compare unequal
// (load a zone once and share it).
type Calendar struct {
	// Location is the time zone periods are aligned in; nil means UTC. Load
	// it with time.LoadLocation (a binary for a scratch image should
	// import time/tzdata).
	Location *time.Location
	// Unit is the period's length; NoCalendar (zero) means no calendar.
	Unit CalendarUnit
	// FirstWeekday is the day a CalendarWeek starts; the zero value is ISO
	// 8601's Monday. It must be zero for the other units.
	FirstWeekday WeekStart
	// AnchorDay is the day of the month a month, quarter or year starts on,
	// 1 to 31; 0 means 1. A month too short for it starts on its last day
	// (anchor 31 starts February's period on the 28th or 29th). It must be
	// zero for a day or a week.
	AnchorDay uint8
	// AnchorMonth is the month (1 to 12) a year starts in, or one of the
	// months a quarter starts in (quarters start every three months from
	// it); 0 means January. It must be zero for a day, a week or a month.
	AnchorMonth uint8
}

// IsZero reports whether c is the zero Calendar: no calendar.
func (c Calendar) IsZero() bool { return c == Calendar{} }

// Validate reports whether c is a usable calendar (the zero Calendar is);
// the error wraps ErrInvalidLimit.
func (c Calendar) Validate() error {
	switch {
	case c.IsZero():
		return nil
	case c.Unit == NoCalendar:
		return fmt.Errorf("%w: calendar fields set without a calendar unit", ErrInvalidLimit)
	case int(c.Unit) >= numCalendarUnits:
		return fmt.Errorf("%w: unknown calendar unit %d", ErrInvalidLimit, c.Unit)
	case c.FirstWeekday > 7:
		return fmt.Errorf("%w: unknown first weekday %d", ErrInvalidLimit, c.FirstWeekday)
	case c.FirstWeekday != ISOWeek && c.Unit != CalendarWeek:
		return fmt.Errorf("%w: a first weekday applies only to a week, not a %v", ErrInvalidLimit, c.Unit)
	case c.AnchorDay > 31:
		return fmt.Errorf("%w: anchor day %d must be 1 to 31", ErrInvalidLimit, c.AnchorDay)
	case c.AnchorDay != 0 && c.Unit < CalendarMonth:
		return fmt.Errorf("%w: an anchor day applies to a month, quarter or year, not a %v", ErrInvalidLimit, c.Unit)
	case c.AnchorMonth > 12:
		return fmt.Errorf("%w: anchor month %d must be 1 to 12", ErrInvalidLimit, c.AnchorMonth)
	case c.AnchorMonth != 0 && c.Unit < CalendarQuarter:
		return fmt.Errorf("%w: an anchor month applies to a quarter or a year, not a %v", ErrInvalidLimit, c.Unit)
	}
	return nil
}

// String describes c, for example "month Europe/Berlin anchor 15", or ""
// for the zero Calendar.
func (c Calendar) String() string {
	if c.IsZero() {
		return ""
	}
	s := c.Unit.String() + " " + c.Location.String()
	if c.Unit == CalendarWeek && c.FirstWeekday != ISOWeek {
		s += " from " + c.FirstWeekday.Weekday().String()
	}
	if c.AnchorMonth > 1 {
		s += " anchor month " + strconv.Itoa(int(c.AnchorMonth))
	}
	if c.AnchorDay > 1 {
		s += " anchor " + strconv.Itoa(int(c.AnchorDay))
	}
	return s
}

// PerCalendar returns a FixedWindow of n per period of c, with the Period
// c's unit requires.
func PerCalendar(n int, c Calendar) Limit {
	return Limit{Algorithm: FixedWindow, Rate: n, Period: c.Unit.Nominal(), Calendar: c}
}

// MaxPeriod is the longest Period a Limit may have: about 292 years is what
// int64 nanoseconds hold; a limit of a century is plenty.
const MaxPeriod = 100 * 365 * 24 * time.Hour

// maxSpan bounds Burst·Period/Rate, the longest time a bucket can take to
// refill, so that every computation on nanoseconds stays inside int64.
const maxSpan = int64(MaxPeriod)

// PerSecond returns a token bucket of n per second with a burst of n.
func PerSecond(n int) Limit {
	return Limit{Algorithm: TokenBucket, Rate: n, Period: time.Second, Burst: n}
}

// PerMinute returns a token bucket of n per minute with a burst of n.
func PerMinute(n int) Limit {
	return Limit{Algorithm: TokenBucket, Rate: n, Period: time.Minute, Burst: n}
}

// PerHour returns a token bucket of n per hour with a burst of n.
func PerHour(n int) Limit { return Limit{Algorithm: TokenBucket, Rate: n, Period: time.Hour, Burst: n} }

// PerDay returns a token bucket of n per day with a burst of n.
func PerDay(n int) Limit {
	return Limit{Algorithm: TokenBucket, Rate: n, Period: 24 * time.Hour, Burst: n}
}

// Every returns a token bucket that admits one unit every d with a burst of 1,
// like golang.org/x/time/rate.Every.
func Every(d time.Duration) Limit { return Limit{Algorithm: TokenBucket, Rate: 1, Period: d, Burst: 1} }

// WithBurst returns a copy of l with the given burst.
func (l Limit) WithBurst(burst int) Limit { l.Burst = burst; return l }

// WithAlgorithm returns a copy of l shaped by a. Burst is kept, so that
// switching back and forth loses nothing.
func (l Limit) WithAlgorithm(a Algorithm) Limit { l.Algorithm = a; return l }

// Capacity returns the largest cost a single call can ever be admitted with:
// Burst for the buckets, Rate for the windows.
func (l Limit) Capacity() int {
	if l.Algorithm.UsesBurst() {
		return l.Burst
	}
	return l.Rate
}

// Validate reports whether l is a usable limit. The error wraps
// ErrInvalidLimit and says which field is wrong.
func (l Limit) Validate() error {
	switch {
	case int(l.Algorithm) >= numAlgorithms:
		return fmt.Errorf("%w: unknown algorithm %d", ErrInvalidLimit, l.Algorithm)
	case l.Rate < 1:
		return fmt.Errorf("%w: rate %d must be at least 1", ErrInvalidLimit, l.Rate)
	case l.Rate > MaxRate:
		return fmt.Errorf("%w: rate %d exceeds the maximum %d", ErrInvalidLimit, l.Rate, MaxRate)
	case l.Period <= 0:
		return fmt.Errorf("%w: period %v must be positive", ErrInvalidLimit, l.Period)
	case l.Period > MaxPeriod:
		return fmt.Errorf("%w: period %v exceeds the maximum %v", ErrInvalidLimit, l.Period, MaxPeriod)
	case l.Precision != 0 && l.Algorithm != SlidingLog:
		return fmt.Errorf("%w: precision applies only to sliding_log, not %v", ErrInvalidLimit, l.Algorithm)
	case l.Precision < 0 || l.Precision > l.Period:
		return fmt.Errorf("%w: precision %v must be between 1ns and the period %v", ErrInvalidLimit, l.Precision, l.Period)
	case l.CountRejected && l.Algorithm != SlidingWindow:
		return fmt.Errorf("%w: count-rejected applies only to sliding_window, not %v", ErrInvalidLimit, l.Algorithm)
	case l.Buckets > 1 && l.validateBuckets() != nil:
		return l.validateBuckets()
	case l.Moments > 0 && l.validateMoments() != nil:
		return l.validateMoments()
	case !l.Calendar.IsZero():
		return l.validateCalendar()
	}
	switch {
	case l.Algorithm.UsesBurst():
		if l.Burst < 1 {
			return fmt.Errorf("%w: burst %d must be at least 1 for %v", ErrInvalidLimit, l.Burst, l.Algorithm)
		}
		if l.Burst > MaxRate {
			return fmt.Errorf("%w: burst %d exceeds the maximum %d", ErrInvalidLimit, l.Burst, MaxRate)
		}
		if int64(l.Period) < int64(l.Rate) {
			return fmt.Errorf("%w: %d per %v is more than one unit per nanosecond, which a bucket cannot time", ErrInvalidLimit, l.Rate, l.Period)
		}
		// The time to refill the whole bucket, Burst·⌈Period/Rate⌉, must fit
		// comfortably in int64. ⌈P/R⌉ < P/R + 1, so Burst·(P+R) ≤ maxSpan·R
		// is enough; it is checked without a division, in 128 bits.
		if !fits(uint64(l.Burst), uint64(l.Period)+uint64(l.Rate), uint64(maxSpan), uint64(l.Rate)) {
			return fmt.Errorf("%w: burst %d at %d per %v takes longer than %v to refill", ErrInvalidLimit, l.Burst, l.Rate, l.Period, MaxPeriod)
		}
		if l.Algorithm == LeakyBucket {
			// NGINX keeps the rate in whole milli-requests per second:
			// Rate·10^12/Period, truncated, as algorithm.MilliRate computes it.
			hi, lo := bits.Mul64(uint64(l.Rate), 1e12)
			var milli uint64
			if hi < uint64(l.Period) {
				milli, _ = bits.Div64(hi, lo, uint64(l.Period))
			}
			if hi >= uint64(l.Period) || milli > 1<<50 {
				return fmt.Errorf("%w: leaky bucket rate %d per %v is too large", ErrInvalidLimit, l.Rate, l.Period)
			}
			if milli == 0 {
				return fmt.Errorf("%w: leaky bucket rate %d per %v is below 0.001 per second", ErrInvalidLimit, l.Rate, l.Period)
			}
			if l.Burst > math.MaxInt32 {
				return fmt.Errorf("%w: leaky bucket burst %d exceeds %d", ErrInvalidLimit, l.Burst, math.MaxInt32)
			}
		}
	case l.Algorithm == SlidingLog:
		if l.Rate > MaxLogRate {
			return fmt.Errorf("%w: sliding log rate %d exceeds %d; use sliding_window", ErrInvalidLimit, l.Rate, MaxLogRate)
		}
	}
	return nil
}

// validateBuckets checks the rules of a Limit with more than one bucket.
func (l Limit) validateBuckets() error {
	k := time.Duration(l.Buckets)
	switch {
	case l.Algorithm != SlidingWindow:
		return fmt.Errorf("%w: buckets applies only to sliding_window, not %v", ErrInvalidLimit, l.Algorithm)
	case l.Buckets > MaxBuckets:
		return fmt.Errorf("%w: buckets %d exceeds the maximum %d", ErrInvalidLimit, l.Buckets, MaxBuckets)
	case l.Period%(k*time.Microsecond) != 0:
		return fmt.Errorf("%w: period %v is not a whole number of microseconds times buckets %d", ErrInvalidLimit, l.Period, l.Buckets)
	case l.Rate > MaxBucketRate:
		return fmt.Errorf("%w: rate %d exceeds %d, the most a sliding window with buckets counts", ErrInvalidLimit, l.Rate, MaxBucketRate)
	}
	return nil
}

// validateMoments checks the rules of a Limit with moments.
func (l Limit) validateMoments() error {
	k := time.Duration(max(l.Buckets, 1))
	switch {
	case l.Algorithm != SlidingWindow:
		return fmt.Errorf("%w: moments applies only to sliding_window, not %v", ErrInvalidLimit, l.Algorithm)
	case l.Moments > MaxMoments:
		return fmt.Errorf("%w: moments %d exceeds the maximum %d", ErrInvalidLimit, l.Moments, MaxMoments)
	case l.Period%(k*time.Microsecond) != 0:
		return fmt.Errorf("%w: period %v is not a whole number of microseconds times buckets %d", ErrInvalidLimit, l.Period, k)
	case l.Rate > MaxMomentsRate:
		return fmt.Errorf("%w: rate %d exceeds %d, the most a sliding window with moments counts", ErrInvalidLimit, l.Rate, MaxMomentsRate)
	}
	return nil
}

// MaxMoments is the most moments a SlidingWindow Limit may keep per
// sub-window.
const MaxMoments = 8

// MaxMomentsRate is the largest Rate of a SlidingWindow Limit with moments:
// its counts are 16 bits wide and its means one signed byte each, which
// past about 10^4 units in a sub-window round off more than they tell.
const MaxMomentsRate = 10_000

// MaxBuckets is the most sub-windows a SlidingWindow Limit may have.
const MaxBuckets = 16

// MaxBucketRate is the largest Rate of a SlidingWindow Limit with more than
// one bucket: its counters are 32 bits wide, which keeps a key's state to
// 88 bytes whatever the number of buckets.
const MaxBucketRate = 1<<32 - 1

// validateCalendar checks the rules of a Limit with a Calendar.
func (l Limit) validateCalendar() error {
	if err := l.Calendar.Validate(); err != nil {
		return err
	}
	if l.Algorithm != FixedWindow {
		return fmt.Errorf("%w: a calendar applies only to fixed_window, not %v", ErrInvalidLimit, l.Algorithm)
	}
	if n := l.Calendar.Unit.Nominal(); l.Period != n {
		return fmt.Errorf("%w: period %v of a calendar %v must be its nominal %v", ErrInvalidLimit, l.Period, l.Calendar.Unit, n)
	}
	return nil
}

// fits reports whether a·b ≤ c·d, in 128-bit arithmetic.
func fits(a, b, c, d uint64) bool {
	h1, l1 := bits.Mul64(a, b)
	h2, l2 := bits.Mul64(c, d)
	return h1 < h2 || h1 == h2 && l1 <= l2
}

// MaxRate is the largest Rate or Burst a Limit may have: 2^53, the largest
// count a JSON number or a Lua double holds exactly, and far from int64
// overflow in every sum an algorithm makes.
const MaxRate = 1 << 53

// MaxLogRate is the largest Rate a SlidingLog limit may have: a key of an
// exact log holds at most Rate entries of 16 bytes, 16 MiB at this bound.
// Configurations bound it further per key (see Limit.LogEntries).
const MaxLogRate = 1 << 20

// String describes l, for example "token_bucket 5/1s burst 10",
// "fixed_window 100/1m0s" or "fixed_window 100/calendar month Europe/Berlin
// anchor 15".
func (l Limit) String() string {
	if !l.Calendar.IsZero() {
		return l.Algorithm.String() + " " + strconv.Itoa(l.Rate) + "/calendar " + l.Calendar.String()
	}
	s := l.Algorithm.String() + " " + strconv.Itoa(l.Rate) + "/" + l.Period.String()
	if l.Algorithm.UsesBurst() {
		s += " burst " + strconv.Itoa(l.Burst)
	}
	if l.Buckets > 1 {
		s += " buckets " + strconv.Itoa(int(l.Buckets))
	}
	if l.Moments > 0 {
		s += " moments " + strconv.Itoa(int(l.Moments))
	}
	if l.CountRejected {
		s += " count-rejected"
	}
	if l.Precision > 0 {
		s += " precision " + l.Precision.String()
	}
	return s
}

// Result is the outcome of one decision. Its fields map one to one onto the
// response headers of package httplimit. It does not repeat the Limit, which
// the caller holds: kept to four words, a Result is returned in registers.
type Result struct {
	// Allowed reports whether the request was admitted and its cost spent.
	//
	// Example: a fixed window of 100/min that admitted 99 units this
	// minute admits a request of cost 1 (Allowed true, Remaining 0) and
	// denies one of cost 2 (Allowed false, Remaining 1): a denied request
	// spends nothing.
	Allowed bool

	// Remaining is how many more units of cost 1 would be admitted right now,
	// after this decision. For SlidingWindow it is an estimate.
	//
	// Example: a token bucket of 5/s with burst 10 that admitted 3 requests
	// back to back has Remaining 7.
	Remaining int

	// RetryAfter is zero when Allowed. When denied it is the time until a
	// request of the same cost would be admitted if nothing else is spent:
	// for a token bucket the time until enough tokens exist (never a full
	// reset), for a fixed window the next boundary, for a sliding log the
	// time until enough old entries leave, for a sliding window the time
	// until the estimate drops far enough.
	//
	// Example: a token bucket of 5/s with burst 10 that admitted 10 requests
	// back to back denies the 11th with RetryAfter 200ms.
	RetryAfter time.Duration

	// ResetAfter is the time until the key's state is as if it had never been
	// used (a full bucket, an empty window), if nothing else is spent.
	//
	// Example: a fixed window of 100/min, 20 s into the window, has
	// ResetAfter 40s; the token bucket above, after 10 requests, has
	// ResetAfter 2s.
	ResetAfter time.Duration
}

// Limiter decides whether a key may spend cost units of its allowance under
// a limit. Implementations are safe for concurrent use.
//
// A key names one allowance per algorithm: two policies that share a key and
// an algorithm share one state, so give each policy its own keys (package
// httplimit prefixes them with the policy's name). When the limit of a key
// changes, as on a config reload, its state carries over to the new limit
// rather than starting fresh.
//
// An implementation does not use a call's context, nor one derived from it,
// after the call returns, unless that context has ended: package failsafe
// lends its calls pooled contexts and takes back those that did not end.
type Limiter interface {
	// AllowN spends cost units of key's allowance under lim, if they fit.
	// A denial is a Result with Allowed false, never an error. The error is
	// for bad input (wrapping ErrInvalidLimit, ErrInvalidCost,
	// ErrCostExceedsCapacity or ErrInvalidKey) and for a failing backend.
	AllowN(ctx context.Context, key string, lim Limit, cost int) (Result, error)
}

// Refunder is implemented by limiters that can give back units an earlier
// AllowN spent, as when a queued request is cancelled before it runs. A refund
// never raises a key above a fresh key's allowance.
type Refunder interface {
	// RefundN returns cost units to key's allowance under lim.
	RefundN(ctx context.Context, key string, lim Limit, cost int) error
}

// Peeker is implemented by limiters that can read a key's state without
// spending it: a check-only request (envoyproxy/ratelimit's hits_addend 0),
// an admin view of a key. Every store implements it, and every wrapper that
// wraps a Peeker forwards it.
//
// A peek answers what a decision of cost 0 would, and changes nothing (no
// write, no expiry refreshed, nothing created):
//
//   - Allowed is true unless the key is already over its limit, which only a
//     limit lowered since the units were spent, or a SlidingWindow with
//     CountRejected, can make so. A key with Remaining 0 that is exactly at
//     its limit is Allowed, as envoyproxy/ratelimit answers OK with
//     remaining 0 for a check at the limit.
//   - Remaining is what the last decision reported, updated to now: the
//     units of cost 1 that would be admitted right now. Remaining > 0 exactly
//     when AllowN(key, lim, 1) would admit a request now.
//   - ResetAfter is the key's real reset, as a decision reports it: right
//     after an AllowN, a peek at the same instant reports the same Remaining
//     and ResetAfter. For a fixed window it is the end of the current window
//     even for an unused key (as envoyproxy/ratelimit's duration_until_reset);
//     for the other algorithms an unused key has ResetAfter 0.
//   - RetryAfter is zero when Allowed, else the time until the key is back
//     within its limit if nothing else is spent.
//
// A key never used peeks as a fresh key: Remaining is the limit's capacity.
type Peeker interface {
	// Peek returns key's state under lim at the limiter's current time,
	// without spending. Its errors are AllowN's: bad input (the key or the
	// limit; there is no cost) and a failing backend.
	Peek(ctx context.Context, key string, lim Limit) (Result, error)
}

// CheckPeek validates a Peek's input: the key and the limit. It is Check
// without a cost, and does not allocate unless it returns an error.
func CheckPeek(key string, lim Limit) error { return Check(key, lim, 1) }

// LimitValidator is implemented by a Limiter that cannot serve every Limit
// that Limit.Validate accepts (redisstore keeps time in microseconds, for
// one), and by wrappers that forward to such a Limiter. A Limiter that does
// not implement it serves every valid Limit.
type LimitValidator interface {
	// ValidateLimit returns nil if the Limiter serves lim, else an error
	// wrapping ErrInvalidLimit that says why; AllowN with lim would then
	// fail on every call with that error. It needs no backend: a
	// configuration can be checked before the store is reachable.
	ValidateLimit(lim Limit) error
}

// Clock tells the time. Stores take a Clock so that tests can control time;
// a nil Clock means the system's monotonic clock. (Code that sleeps, such as
// package queue, is tested with testing/synctest instead.)
type Clock interface {
	Now() time.Time
}

// SystemClock is the Clock of the system's time: time.Now, with its
// monotonic reading. It is what a nil Clock stands for, wherever one is
// taken. Its zero value is the only value and ready to use.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// ClockOr returns c, or SystemClock when c is nil: the one place where a
// nil Clock becomes the system's, so that code holding the result reads
// the time without a nil check.
func ClockOr(c Clock) Clock {
	if c == nil {
		return SystemClock{}
	}
	return c
}

// MaxKeyLen is the longest key a Limiter accepts, in bytes: the one bound
// on keys, for every store and face. Hash longer identifiers (HashKey)
// before they become keys.
const MaxKeyLen = 4096

// ErrBadInput matches, with errors.Is, every error that is the caller's
// mistake rather than the store's failure: ErrInvalidLimit, ErrInvalidCost,
// ErrCostExceedsCapacity, ErrInvalidKey and any error wrapping one of them.
// Wrappers (package failsafe) pass such an error through without counting it
// as a store failure; faces answer it as a bad request.
var ErrBadInput = errors.New("sluice: bad input")

// badInput is an error of the bad-input family: errors.Is(e, ErrBadInput)
// holds for it, and its message is its own.
type badInput struct{ msg string }

func (e *badInput) Error() string        { return e.msg }
func (e *badInput) Is(target error) bool { return target == ErrBadInput }

// Errors that describe bad input. Test for them with errors.Is; the errors
// returned wrap them with details. Each matches ErrBadInput too.
var (
	// ErrInvalidLimit reports a Limit that fails Validate.
	ErrInvalidLimit error = &badInput{"sluice: invalid limit"}
	// ErrInvalidCost reports a cost below 1.
	ErrInvalidCost error = &badInput{"sluice: invalid cost"}
	// ErrCostExceedsCapacity reports a cost that can never be admitted
	// because it exceeds the limit's capacity. It is an error, never a
	// silent denial.
	ErrCostExceedsCapacity error = &badInput{"sluice: cost exceeds capacity"}
	// ErrInvalidKey reports an empty key or one longer than MaxKeyLen.
	ErrInvalidKey error = &badInput{"sluice: invalid key"}
	// ErrUnavailable is wrapped by the error of a limiter that refuses a
	// request because its store is unavailable and its policy is to fail
	// closed (see package failsafe). The Result that comes with it denies
	// the request, with RetryAfter set; callers should refuse the request
	// (HTTP 503), not let it through.
	ErrUnavailable = errors.New("sluice: rate limit store unavailable")
)

// Check validates one call's input: the key, the limit and the cost. Every
// store calls it first; it does not allocate unless it returns an error.
func Check(key string, lim Limit, cost int) error {
	if len(key) == 0 {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: key of %d bytes exceeds %d", ErrInvalidKey, len(key), MaxKeyLen)
	}
	if err := lim.Validate(); err != nil {
		return err
	}
	if cost < 1 {
		return fmt.Errorf("%w: cost %d must be at least 1", ErrInvalidCost, cost)
	}
	if c := lim.Capacity(); cost > c {
		return fmt.Errorf("%w: cost %d exceeds the capacity %d of %v", ErrCostExceedsCapacity, cost, c, lim)
	}
	return nil
}
