package calendar_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/calendar"
)

// BenchmarkPeriod is the cost of finding the period that holds an instant:
// what a calendar window pays when its period may have changed.
func BenchmarkPeriod(b *testing.B) {
	loc := zone(b, "Europe/Berlin")
	for _, c := range []sluice.Calendar{
		{Location: loc, Unit: sluice.CalendarDay},
		{Location: loc, Unit: sluice.CalendarMonth, AnchorDay: 15},
	} {
		b.Run(c.Unit.String(), func(b *testing.B) {
			at := time.Date(2026, 3, 20, 12, 0, 0, 0, time.UTC)
			for b.Loop() {
				calendar.Period(c, at)
			}
		})
	}
}

// BenchmarkIndex is the cost of numbering the period of an instant's local
// date, the cheap check a calendar window makes early in a period.
func BenchmarkIndex(b *testing.B) {
	c := sluice.Calendar{Location: zone(b, "Europe/Berlin"), Unit: sluice.CalendarMonth}
	at := time.Date(2026, 3, 20, 12, 0, 0, 0, time.UTC)
	for b.Loop() {
		calendar.Index(c, at)
	}
}
