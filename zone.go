package sluice

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// MaxZoneName bounds a time zone name's length, in bytes: the longest IANA
// name is about 30.
const MaxZoneName = 64

// LoadZone returns the time zone of an IANA name (such as Europe/Berlin,
// or UTC), as every part of Sluice reads a calendar's time zone: the
// config's time_zone, and a limit's time_zone that the admin API or a plan
// sends. It refuses, with an error wrapping ErrBadInput, the empty name,
// "Local" (the machine's zone, which differs from one replica to the next),
// a name over MaxZoneName bytes or with a character no IANA name has (only
// letters, digits and "/_-+": no path, no control character reaches the
// zone database), and a name the database does not know. Each name is
// loaded once: equal names give one *time.Location, so that Calendars in
// that zone compare equal.
func LoadZone(name string) (*time.Location, error) {
	if v, ok := zones.Load(name); ok {
		return v.(*time.Location), nil
	}
	if name == "" || len(name) > MaxZoneName || name == "Local" || strings.ContainsFunc(name, badZoneRune) {
		short := name
		if len(short) > MaxZoneName {
			short = short[:MaxZoneName] + "…"
		}
		return nil, zoneError(fmt.Sprintf("time_zone %q is not an IANA time zone name (such as Europe/Berlin, or UTC)", short))
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, zoneError(fmt.Sprintf("unknown time_zone %q (want an IANA name such as Europe/Berlin, or UTC)", name))
	}
	v, _ := zones.LoadOrStore(name, loc)
	return v.(*time.Location), nil
}

// zones caches LoadZone's locations by name. It holds only names the zone
// database knows: a few hundred at most.
var zones sync.Map // string → *time.Location

// zoneError is LoadZone's error: its message alone, wrapping ErrBadInput.
type zoneError string

func (e zoneError) Error() string { return string(e) }
func (e zoneError) Unwrap() error { return ErrBadInput }

// badZoneRune reports a rune no IANA zone name has. Names are letters,
// digits and "/_-+"; refusing the rest keeps ".." and control characters
// away from the zone database (time.LoadLocation refuses a leading "/").
func badZoneRune(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("/_-+", r)
}
