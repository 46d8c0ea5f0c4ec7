package config

import (
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice"
)

// calendarKeys are the keys of a rate_limit's calendar block.
var calendarKeys = []string{"time_zone", "anchor_day", "anchor_month", "first_weekday"}

// calendarUnits maps the config units a calendar applies to onto the
// calendar's units.
var calendarUnits = map[Unit]sluice.CalendarUnit{
	Day: sluice.CalendarDay, Week: sluice.CalendarWeek, Month: sluice.CalendarMonth,
	Quarter: sluice.CalendarQuarter, Year: sluice.CalendarYear,
}

// maxZoneName bounds a time_zone's length: the longest IANA name is about
// 30 bytes.
const maxZoneName = 64

// calendar reads a rate_limit's calendar block (val, under the key node
// key) into r.Limit.Calendar: the periods of r.Unit in a time zone, with
// an anchor. r.Unit and r.Limit.Algorithm must already be read.
func (p *parser) calendar(key, val *yaml.Node, r *RateLimit) error {
	cu, ok := calendarUnits[r.Unit]
	if !ok {
		return p.errf(key, "a calendar applies to unit day, week, month, quarter or year, not %v", r.Unit)
	}
	if r.Limit.Algorithm != sluice.FixedWindow {
		return p.errf(key, "a calendar applies only to fixed_window, not %v", r.Limit.Algorithm)
	}
	if r.UnitMultiplier != 1 {
		return p.errf(key, "a calendar period is one %v: unit_multiplier %d does not apply", r.Unit, r.UnitMultiplier)
	}
	fields, err := p.fields(val, "calendar", calendarKeys)
	if err != nil {
		return err
	}
	c := sluice.Calendar{Unit: cu}
	var zone bool
	for _, f := range fields {
		switch f.key.Value {
		case "time_zone":
			zone = true
			c.Location, err = p.timeZone(f.val)
		case "anchor_day":
			err = p.calendarAnchor(f, cu >= sluice.CalendarMonth, 31, &c.AnchorDay, "month, quarter or year")
		case "anchor_month":
			err = p.calendarAnchor(f, cu >= sluice.CalendarQuarter, 12, &c.AnchorMonth, "quarter or year")
		case "first_weekday":
			c.FirstWeekday, err = p.firstWeekday(f, cu)
		}
		if err != nil {
			return err
		}
	}
	if !zone {
		return p.errf(deref(val), "calendar has no time_zone (an IANA name such as Europe/Berlin, or UTC)")
	}
	r.Limit.Calendar = c
	return nil
}

// calendarAnchor reads an anchor_day or anchor_month of at most hi, which
// applies only when ok (to the units named by units).
func (p *parser) calendarAnchor(f field, ok bool, hi int64, dst *uint8, units string) error {
	if !ok {
		return p.errf(f.key, "%s applies only to a %s", f.key.Value, units)
	}
	v, err := p.integer(f.val, f.key.Value, 1, hi)
	*dst = uint8(v)
	return err
}

// firstWeekday reads first_weekday: a day's English name, or iso (Monday).
func (p *parser) firstWeekday(f field, cu sluice.CalendarUnit) (sluice.WeekStart, error) {
	if cu != sluice.CalendarWeek {
		return 0, p.errf(f.key, "first_weekday applies only to a week")
	}
	s, err := p.str(f.val, "first_weekday")
	if err != nil {
		return 0, err
	}
	if strings.EqualFold(s, "iso") {
		return sluice.ISOWeek, nil
	}
	for d := time.Sunday; d <= time.Saturday; d++ {
		if strings.EqualFold(s, d.String()) {
			return sluice.WeekStartingOn(d), nil
		}
	}
	return 0, p.errf(deref(f.val), "unknown first_weekday %q (want monday to sunday, or iso)", s)
}

// timeZone reads a time_zone: an IANA name that time.LoadLocation knows.
func (p *parser) timeZone(n *yaml.Node) (*time.Location, error) {
	name, err := p.str(n, "time_zone")
	if err != nil {
		return nil, err
	}
	n = deref(n)
	if name == "" || len(name) > maxZoneName || name == "Local" || strings.ContainsFunc(name, badZoneRune) {
		return nil, p.errf(n, "time_zone %q is not an IANA time zone name (such as Europe/Berlin, or UTC)", truncate(name, maxZoneName))
	}
	loc, err := loadLocation(name)
	if err != nil {
		return nil, p.errf(n, "unknown time_zone %q (want an IANA name such as Europe/Berlin, or UTC)", name)
	}
	return loc, nil
}

// badZoneRune reports a rune no IANA zone name has. Names are letters,
// digits and "/_-+"; refusing the rest keeps paths ("..", a leading "/")
// and control characters away from the zone database lookup.
func badZoneRune(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("/_-+", r)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// zones caches the locations loaded, by name, so that every rule of every
// load that names a zone shares one *time.Location: their sluice.Limits
// then compare equal, and a reload does not read the zone database again.
// It holds only names the database knows (a few hundred at most).
var zones sync.Map // string → *time.Location

func loadLocation(name string) (*time.Location, error) {
	if v, ok := zones.Load(name); ok {
		return v.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	v, _ := zones.LoadOrStore(name, loc)
	return v.(*time.Location), nil
}
