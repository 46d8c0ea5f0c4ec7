// Package plans holds the limits a tenant gets at run time: plans (a name
// and its limits), the plan each tenant is on, and per-tenant overrides
// with an optional expiry, read through a small in-process Cache whose
// staleness is bounded (one second by default), so that a change made
// through the admin API takes effect without a reload.
//
// A limit in a plan or an override is named by the descriptor it applies
// to: the domain and the descriptor's entry keys, joined by dots (Name), so
// "api.tenant" is the limit of a descriptor of domain api with the single
// entry tenant=…, whatever the tenant. The middleware and the proxy name it
// by their policy's (their limit's) name instead. An override of a name
// wins over the plan's limit of that name until it expires; a name neither
// has keeps the config's rule (or the policy's). The middleware and the
// proxy look a limit up with Lookup.
//
// The package holds no database client: a Source reads a tenant's record
// (pgstore's PlanStore, in PostgreSQL), and the Cache decides with its own
// Clock whether an override has expired, so expiry is exact, not bounded by
// the staleness.
package plans

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sluicehq/sluice"
)

// Limit is a limit as plans and overrides hold it and the admin API
// carries it, in JSON. The zero Limit is invalid (its Rate is 0).
type Limit struct {
	// Algorithm is a sluice algorithm's name; "" means fixed_window, a
	// quota's algorithm.
	Algorithm string `json:"algorithm,omitempty"`
	// Rate is the units allowed per period; at least 1.
	Rate int `json:"rate"`
	// Period is the window's length as a Go duration ("1h", "720h"); with a
	// Calendar it may be empty (the unit's nominal length).
	Period string `json:"period,omitempty"`
	// Burst is a bucket's size; 0 means Rate. Ignored by the windows.
	Burst int `json:"burst,omitempty"`
	// Calendar aligns a fixed window to calendar periods; nil: none.
	Calendar *Calendar `json:"calendar,omitempty"`
}

// Calendar is sluice.Calendar in JSON.
type Calendar struct {
	// Unit is day, week, month, quarter or year.
	Unit string `json:"unit"`
	// TimeZone is an IANA zone name, read as the config reads it
	// (sluice.LoadZone: "Local" is refused); "" means UTC.
	TimeZone string `json:"time_zone,omitempty"`
	// AnchorDay is the day of the month a month, quarter or year starts
	// on (1 to 31); 0 means 1.
	AnchorDay uint8 `json:"anchor_day,omitempty"`
	// AnchorMonth is the month a year or quarter starts in; 0 means January.
	AnchorMonth uint8 `json:"anchor_month,omitempty"`
}

// ErrInvalid is wrapped by the errors of ParseLimit and ParseLimits.
var ErrInvalid = errors.New("plans: invalid limit")

// MaxLimitsPerPlan bounds the limits one plan may hold.
const MaxLimitsPerPlan = 256

// MaxNameLen bounds a plan's, a tenant's and a limit's name, in bytes.
const MaxNameLen = 256

// ParseLimit decodes one limit from JSON strictly (an unknown field is an
// error) and checks it with sluice.Limit.Validate.
func ParseLimit(b []byte) (sluice.Limit, error) {
	var l Limit
	if err := strictJSON(b, &l); err != nil {
		return sluice.Limit{}, err
	}
	return l.Sluice()
}

// ParseLimits decodes a plan's limits, an object of name to limit, and
// checks each: at most MaxLimitsPerPlan, names of at most MaxNameLen bytes.
func ParseLimits(b []byte) (map[string]sluice.Limit, error) {
	var raw map[string]Limit
	if err := strictJSON(b, &raw); err != nil {
		return nil, err
	}
	if len(raw) > MaxLimitsPerPlan {
		return nil, fmt.Errorf("%w: %d limits, over the maximum of %d", ErrInvalid, len(raw), MaxLimitsPerPlan)
	}
	out := make(map[string]sluice.Limit, len(raw))
	for name, l := range raw {
		if err := CheckName(name); err != nil {
			return nil, err
		}
		lim, err := l.Sluice()
		if err != nil {
			return nil, fmt.Errorf("limit %q: %w", name, err)
		}
		out[name] = lim
	}
	return out, nil
}

// CheckName returns nil for a usable name: 1 to MaxNameLen bytes of UTF-8,
// every character printable (a letter, mark, number, punctuation, symbol
// or the ASCII space: no control or format character, so no bidirectional
// override such as U+202E that shows a name as another), and no space at
// either end. It is the one check of plan, tenant and limit names, in a
// plan's limits and on the admin API alike.
func CheckName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("%w: a name must be 1 to %d bytes, got %d", ErrInvalid, MaxNameLen, len(name))
	}
	if !validName(name) {
		return fmt.Errorf("%w: name %+q has a space at an end, or a character that is not printable (a control or format character such as a bidirectional override) or not UTF-8", ErrInvalid, name)
	}
	return nil
}

// validName is CheckName without the error's cost, for names that come
// from requests: ASCII is checked byte by byte, the rest rune by rune.
func validName(name string) bool {
	if name == "" || len(name) > MaxNameLen || name[0] == ' ' || name[len(name)-1] == ' ' {
		return false
	}
	for i := 0; i < len(name); {
		if c := name[i]; c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		// IsPrint refuses every space but ASCII's, so ends need no more.
		r, size := utf8.DecodeRuneInString(name[i:])
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return false
		}
		i += size
	}
	return true
}

// strictJSON decodes b into v: one JSON value, no unknown fields, nothing
// after it but white space.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	// Not dec.More, which is false before a stray '}' or ']'.
	if len(bytes.TrimSpace(b[dec.InputOffset():])) != 0 {
		return fmt.Errorf("%w: data after the JSON value", ErrInvalid)
	}
	return nil
}

// Sluice converts l to a sluice.Limit and validates it. A sliding window,
// which a plan gives no layout, gets the config's default one
// (sluice.DefaultSlidingWindow); the service and the middleware then decide
// it in the layout of the rule or policy it takes the place of, where that
// is a sliding window too (sluice.Limit.WithLayoutOf).
func (l Limit) Sluice() (sluice.Limit, error) {
	alg := sluice.FixedWindow
	if l.Algorithm != "" {
		a, err := sluice.ParseAlgorithm(l.Algorithm)
		if err != nil {
			return sluice.Limit{}, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		alg = a
	}
	lim := sluice.Limit{Algorithm: alg, Rate: l.Rate, Burst: l.Burst}
	if lim.Burst == 0 {
		lim.Burst = l.Rate
	}
	if l.Calendar != nil {
		c, err := l.Calendar.sluice()
		if err != nil {
			return sluice.Limit{}, err
		}
		lim.Calendar, lim.Period = c, c.Unit.Nominal()
	}
	if l.Period != "" {
		d, err := time.ParseDuration(l.Period)
		if err != nil {
			return sluice.Limit{}, fmt.Errorf("%w: period: %v", ErrInvalid, err)
		}
		lim.Period = d
	}
	if err := lim.Validate(); err != nil {
		return sluice.Limit{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	// A plan's sliding window has the config's default layout, the layout
	// of a rule that sets none; on a rule that sets one, the faces give it
	// the rule's.
	return sluice.DefaultSlidingWindow(lim), nil
}

func (c Calendar) sluice() (sluice.Calendar, error) {
	var out sluice.Calendar
	for u := sluice.CalendarDay; u <= sluice.CalendarYear; u++ {
		if u.String() == c.Unit {
			out.Unit = u
		}
	}
	if out.Unit == sluice.NoCalendar {
		return out, fmt.Errorf("%w: calendar unit %q, want day, week, month, quarter or year", ErrInvalid, c.Unit)
	}
	loc, err := zone(c.TimeZone)
	if err != nil {
		return out, err
	}
	out.Location, out.AnchorDay, out.AnchorMonth = loc, c.AnchorDay, c.AnchorMonth
	if err := out.Validate(); err != nil {
		return out, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return out, nil
}

// zone is the location of a limit's time_zone: "" is UTC, any other name
// is read as the config reads it (sluice.LoadZone: an IANA name, not
// "Local").
func zone(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	loc, err := sluice.LoadZone(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return loc, nil
}

// FromSluice is the JSON form of lim.
func FromSluice(lim sluice.Limit) Limit {
	l := Limit{Algorithm: lim.Algorithm.String(), Rate: lim.Rate, Period: lim.Period.String()}
	if lim.Algorithm.UsesBurst() && lim.Burst != lim.Rate {
		l.Burst = lim.Burst
	}
	if !lim.Calendar.IsZero() {
		c := lim.Calendar
		l.Calendar = &Calendar{Unit: c.Unit.String(), AnchorDay: c.AnchorDay, AnchorMonth: c.AnchorMonth}
		if c.Location != nil && c.Location != time.UTC {
			l.Calendar.TimeZone = c.Location.String()
		}
		l.Period = ""
	}
	return l
}

// Name is the name of the limit a descriptor of domain with entry keys
// keys gets from a plan or an override: domain.key1.key2.
func Name(domain string, keys ...string) string {
	return domain + "." + strings.Join(keys, ".")
}
