package calendar_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/calendar"
)

// A billing month that starts on the 31st, in Berlin: February's period
// starts on its last day, and the period that crosses the change to summer
// time is an hour short of 31 days.
func ExamplePeriod() {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		panic(err)
	}
	c := sluice.Calendar{Location: berlin, Unit: sluice.CalendarMonth, AnchorDay: 31}
	for _, at := range []time.Time{
		time.Date(2026, 2, 10, 12, 0, 0, 0, berlin),
		time.Date(2026, 3, 10, 12, 0, 0, 0, berlin),
	} {
		start, end := calendar.Period(c, at)
		fmt.Println(start.Format(time.RFC3339), "to", end.Format(time.RFC3339), end.Sub(start))
	}
	// Output:
	// 2026-01-31T00:00:00+01:00 to 2026-02-28T00:00:00+01:00 672h0m0s
	// 2026-02-28T00:00:00+01:00 to 2026-03-31T00:00:00+02:00 743h0m0s
}
