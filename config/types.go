package config

import (
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// Unit is the unit of a rate limit's requests_per_unit, as envoyproxy/ratelimit
// names them, plus Quarter, which exists only with a calendar block.
type Unit uint8

// The units. Second, Minute, Hour and Day are fixed lengths; Week, Month and
// Year are calendar units in envoyproxy/ratelimit's protocol, counted there
// (and here, without a calendar block) as 7, 30 and 365 days. Quarter is a
// Sluice extension that envoyproxy/ratelimit does not have: load accepts it
// only with a calendar block, so it always means a calendar quarter in a
// time zone; its nominal length is 90 days.
const (
	UnitUnknown Unit = iota
	Second
	Minute
	Hour
	Day
	Week
	Month
	Year
	Quarter
)

var unitNames = [...]string{
	UnitUnknown: "unknown",
	Second:      "second",
	Minute:      "minute",
	Hour:        "hour",
	Day:         "day",
	Week:        "week",
	Month:       "month",
	Year:        "year",
	Quarter:     "quarter",
}

var unitLengths = [...]time.Duration{
	Second: time.Second,
	Minute: time.Minute,
	Hour:   time.Hour,
	Day:    24 * time.Hour,
	Week:   7 * 24 * time.Hour,
	Month:  30 * 24 * time.Hour,
	Year:   365 * 24 * time.Hour,
	// Quarter is the calendar's nominal quarter (sluice.CalendarQuarter's
	// Nominal), the Period a Limit with a quarterly Calendar has.
	Quarter: 90 * 24 * time.Hour,
}

// String returns the unit's configuration name in lower case, such as
// "second", or "unknown" for UnitUnknown and out-of-range values.
func (u Unit) String() string {
	if int(u) < len(unitNames) {
		return unitNames[u]
	}
	return "unknown"
}

// Duration returns the nominal length of one unit: a week is 7 days, a month
// 30 and a year 365, as envoyproxy/ratelimit counts them, and a quarter 90.
// It returns 0 for UnitUnknown.
func (u Unit) Duration() time.Duration {
	if int(u) < len(unitLengths) {
		return unitLengths[u]
	}
	return 0
}

// ParseUnit returns the unit named s, ignoring case ("second", "SECOND"), as
// envoyproxy/ratelimit accepts them, or Quarter for "quarter" (which a
// config accepts only with a calendar block). It returns UnitUnknown and
// false for any other string.
func ParseUnit(s string) (Unit, bool) {
	for i, n := range unitNames {
		if i != int(UnitUnknown) && strings.EqualFold(s, n) {
			return Unit(i), true
		}
	}
	return UnitUnknown, false
}

// Entry is one key/value pair of a request descriptor.
type Entry struct {
	Key, Value string
}

// PathEntry is one level of the configured descriptor path that leads to a
// rule, from the domain's top level down to the rule's own descriptor.
type PathEntry struct {
	// Key is the descriptor's key.
	Key string
	// Value is the configured value: "" for a key-only descriptor (each
	// request value gets its own counter), the pattern itself, such as
	// "/api/*", for a wildcard.
	Value string
	// Wildcard reports whether Value is a pattern with '*'.
	Wildcard bool
	// ShareThreshold (a wildcard only) makes every request value that
	// matches the pattern share one counter: the service keys the counter
	// by Value, the pattern, instead of the request's value.
	ShareThreshold bool
	// ValueToMetric asks for the request's value in the metric name of
	// this level even when the descriptor has no value of its own.
	ValueToMetric bool
}

// RateLimit is a compiled rate limit: envoyproxy/ratelimit's rate_limit block
// plus Sluice's extensions. A RateLimit belongs to its Config and must not be
// modified; it is safe to read from many goroutines.
type RateLimit struct {
	// FullKey names the rule: the domain and the descriptor path that
	// leads to it, e.g. "mongo_cps.database_users"; used in metrics and
	// logs.
	FullKey string
	// Name is the rule's optional name (rate_limit.name).
	Name string
	// Unit and RequestsPerUnit are as configured; UnitMultiplier (a Sluice
	// extension, default 1) multiplies the unit, e.g. 30 seconds.
	Unit            Unit
	UnitMultiplier  int
	RequestsPerUnit uint32
	// Unlimited rules never touch the store.
	Unlimited bool
	// ShadowMode rules are evaluated and counted, never enforced.
	ShadowMode bool
	// QuotaMode, DetailedMetric and the other flags of envoyproxy/ratelimit
	// are kept as configured.
	QuotaMode      bool
	DetailedMetric bool
	// Replaces lists the names of the rules this one replaces.
	Replaces []string
	// Limit is the sluice.Limit the rule enforces: the algorithm (default
	// fixed window, as envoyproxy/ratelimit), RequestsPerUnit per
	// Unit×UnitMultiplier, Burst (default RequestsPerUnit), and the
	// Calendar of a calendar block (a Sluice extension; zero without one),
	// and Billable from billable: true (a Sluice extension: a PostgreSQL
	// store keeps the rule's periods as the ledger after they end; the
	// periods of other rules are deleted once ended). Invalid when Unlimited or RequestsPerUnit is 0 (a rule that blocks
	// everything).
	Limit sluice.Limit
	// FailureMode is the rule's failure policy ("open", "closed", "local"),
	// "" for the service's default.
	FailureMode string
	// Path is the configured descriptor path that leads to the rule, one
	// element per level; a request matches the rule only with exactly
	// len(Path) entries. Path[len(Path)-1] is the rule's own descriptor.
	Path []PathEntry
	// File and Line locate the rule's rate_limit block in its config file.
	File string
	Line int
	// Metadata is the descriptor's metadata map (envoyproxy/ratelimit's
	// descriptor metadata), nil when it has none: mappings are
	// map[string]any, lists []any, scalars string, int64, float64, bool
	// or nil. The service returns it in dynamic_metadata. Every rule of a
	// rate_limits list shares the same map; it must not be modified.
	Metadata map[string]any
	// More are the further limits of a rate_limits list (a Sluice
	// extension): the rule itself is the list's first limit, More the
	// rest, in config order, each a RateLimit with the same FullKey, Path,
	// flags and Metadata and its own limit, name, unit and line; nil for
	// a rate_limit block. A request is admitted only if every limit of
	// the list admits it. Their periods differ (load refuses two limits
	// of one period in a list), so that each has its own counter.
	More []*RateLimit
	// Shared reports whether some level of Path has ShareThreshold: the
	// counter is then keyed by those levels' patterns rather than by the
	// request's values. Derived from Path at load.
	Shared bool
	// ValueToMetric reports whether some level of Path has
	// ValueToMetric (and DetailedMetric is off): the metrics name then
	// holds request values. Derived from Path at load.
	ValueToMetric bool
}

// Limits returns the rule and then each of More: every limit a request
// that matches the rule must pass, in a new slice.
func (r *RateLimit) Limits() []*RateLimit {
	if len(r.More) == 0 {
		return []*RateLimit{r}
	}
	return append([]*RateLimit{r}, r.More...)
}

// Period returns the length of one unit times the multiplier; calendar
// units use their nominal length (a week is 7 days, a month 30, a year 365).
// It returns 0 for an unlimited rule, which has no unit.
func (r *RateLimit) Period() time.Duration {
	return r.Unit.Duration() * time.Duration(max(r.UnitMultiplier, 1))
}

// BlocksAll reports whether the rule denies every request: it is not
// unlimited and its requests_per_unit is 0, envoyproxy/ratelimit's way of
// writing a block list.
func (r *RateLimit) BlocksAll() bool { return !r.Unlimited && r.RequestsPerUnit == 0 }
