package config

import (
	"strings"
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

// timeZone reads a time_zone: an IANA name that sluice.LoadZone, the one
// reader of time zone names (the admin API's and plans' too), accepts.
func (p *parser) timeZone(n *yaml.Node) (*time.Location, error) {
	name, err := p.str(n, "time_zone")
	if err != nil {
		return nil, err
	}
	loc, err := sluice.LoadZone(name)
	if err != nil {
		return nil, p.errf(deref(n), "%v", err)
	}
	return loc, nil
}
