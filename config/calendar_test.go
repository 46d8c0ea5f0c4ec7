package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // zones load the same on a machine without a zone database

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
)

const calendarDoc = `domain: quotas
descriptors:
  - key: tenant
    value: pro
    rate_limit:
      unit: month
      requests_per_unit: 10000
      calendar: {time_zone: Europe/Berlin, anchor_day: 15}
  - key: tenant
    value: team
    rate_limit:
      unit: week
      requests_per_unit: 500
      calendar: {time_zone: Europe/Berlin, first_weekday: monday}
  - key: tenant
    value: free
    rate_limit:
      unit: month
      requests_per_unit: 100
`

// TestCalendarLoads: a rate_limit with a calendar block compiles to a
// fixed window over calendar periods in its zone, with its anchor; rules
// naming one zone share its *time.Location, so their limits compare equal
// across loads; plain unit month stays 30 days with no calendar.
func TestCalendarLoads(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "quotas.yaml")
	if err := os.WriteFile(path, []byte(calendarDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	pro := c.Lookup("quotas", []config.Entry{{Key: "tenant", Value: "pro"}})
	team := c.Lookup("quotas", []config.Entry{{Key: "tenant", Value: "team"}})
	free := c.Lookup("quotas", []config.Entry{{Key: "tenant", Value: "free"}})
	if pro == nil || team == nil || free == nil {
		t.Fatalf("lookups: %v %v %v", pro, team, free)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	want := sluice.PerCalendar(10000, sluice.Calendar{Location: pro.Limit.Calendar.Location, Unit: sluice.CalendarMonth, AnchorDay: 15}).WithBurst(10000) // config sets Burst; a window ignores it
	if pro.Limit != want || pro.Limit.Calendar.Location.String() != berlin.String() {
		t.Errorf("pro: %v, want %v", pro.Limit, want)
	}
	if team.Limit.Calendar.Location != pro.Limit.Calendar.Location {
		t.Error("two rules naming Europe/Berlin hold different locations")
	}
	if team.Limit.Calendar.Unit != sluice.CalendarWeek || team.Limit.Calendar.FirstWeekday.Weekday() != time.Monday {
		t.Errorf("team: %+v", team.Limit.Calendar)
	}
	if !free.Limit.Calendar.IsZero() || free.Limit.Period != 30*24*time.Hour {
		t.Errorf("plain month: %v, want 30 days and no calendar", free.Limit)
	}
	again, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if l := again.Lookup("quotas", []config.Entry{{Key: "tenant", Value: "pro"}}).Limit; l != pro.Limit {
		t.Errorf("a reload's limit %v differs from %v", l, pro.Limit)
	}
}

// TestCalendarBadTimeZoneIsFileLineError: an unknown zone is refused at
// load with the file, line and column of its value.
func TestCalendarBadTimeZoneIsFileLineError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "quotas.yaml")
	doc := strings.Replace(calendarDoc, "time_zone: Europe/Berlin, anchor_day", "time_zone: Europe/Berlim, anchor_day", 1)
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := config.Load(path)
	var ce *config.Error
	if !errors.As(err, &ce) {
		t.Fatalf("err %v, want a *config.Error", err)
	}
	if ce.Line != 8 || !strings.Contains(err.Error(), "quotas.yaml:8:") || !strings.Contains(err.Error(), `unknown time_zone "Europe/Berlim"`) {
		t.Errorf("err %q (line %d), want quotas.yaml:8: unknown time_zone", err, ce.Line)
	}
}

// TestCalendarHostileTimeZone: a zone name is bounded and limited to the
// characters IANA names use before anything looks it up.
func TestCalendarHostileTimeZone(t *testing.T) {
	for _, zone := range []string{strings.Repeat("A", 100000), "/etc/localtime", "Europe/../../etc/passwd", "Local", `Europe\Berlin`, "Europe/Berlin\x00"} {
		doc := "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: day\n      requests_per_unit: 1\n      calendar: {time_zone: \"" + strings.ReplaceAll(zone, "\x00", `\0`) + "\"}\n"
		_, err := config.Parse("hostile.yaml", []byte(doc))
		if err == nil || !strings.Contains(err.Error(), "hostile.yaml:7:") || len(err.Error()) > 300 {
			t.Errorf("zone %.40q: err %.300v", zone, err)
		}
	}
}
