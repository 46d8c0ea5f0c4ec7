package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

var rosterScript = rueidis.NewLuaScript(scriptText("roster.lua"))

// MaxRosterTTL is the longest time to live a Roster's member may have: a
// member whose expiry lies further ahead was written by something other
// than a Roster, and is removed.
const MaxRosterTTL = time.Minute

// MaxRosterName is the longest fleet name and member id a Roster takes,
// in bytes.
const MaxRosterName = 256

// Roster is the membership set of a fleet of processes on Redis: each
// announces itself every so often with a time to live, and learns how many
// members are live. It is the shape of relief.Roster. A member that stops
// announcing (a process killed) is counted until its time to live has
// passed; one that leaves is gone at once. The set is one key,
// <prefix>:fleet:{name}, so on a Cluster it lives on one shard. It is safe
// for concurrent use; the zero value is not usable (see Store.Roster and
// Lazy.Roster).
type Roster struct {
	name  string
	store func() (*Store, error)
}

// Roster returns the membership set of the fleet called name on s.
func (s *Store) Roster(name string) *Roster {
	return &Roster{name: name, store: func() (*Store, error) { return s, nil }}
}

// Roster returns the membership set of the fleet called name on the store
// once it has connected; until then every call fails with the error
// Store returns.
func (l *Lazy) Roster(name string) *Roster {
	return &Roster{name: name, store: l.Store}
}

// MaxTTL returns MaxRosterTTL, the longest time to live Announce takes
// (relief.NewFleet refuses a longer FleetConfig.TTL with it).
func (r *Roster) MaxTTL() time.Duration { return MaxRosterTTL }

// Announce records id as a live member for ttl from the store's clock
// (Redis TIME), forgets the members whose time has passed, and returns how
// many are live, id among them, counting at most most. It errs on bad
// input (an empty or too long name or id, ttl outside 1ms to MaxRosterTTL,
// most below 1) and when Redis fails.
func (r *Roster) Announce(ctx context.Context, id string, ttl time.Duration, most int) (int, error) {
	if ttl < time.Millisecond || ttl > MaxRosterTTL {
		return 0, fmt.Errorf("redisstore: roster ttl %v: want 1ms to %v", ttl, MaxRosterTTL)
	}
	if most < 1 {
		return 0, fmt.Errorf("redisstore: roster count at most %d: want at least 1", most)
	}
	return r.run(ctx, "announce", id, ttl, most)
}

// Leave removes id from the live members, so that the others count one
// fewer at their next Announce. Leaving as a member that is not there is
// not an error.
func (r *Roster) Leave(ctx context.Context, id string) error {
	_, err := r.run(ctx, "leave", id, time.Millisecond, 1)
	return err
}

func (r *Roster) run(ctx context.Context, mode, id string, ttl time.Duration, most int) (int, error) {
	if err := checkRosterName("fleet name", r.name); err != nil {
		return 0, err
	}
	if err := checkRosterName("member id", id); err != nil {
		return 0, err
	}
	s, err := r.store()
	if err != nil {
		return 0, err
	}
	args := []string{mode, s.nowArg(), strconv.FormatInt(ttl.Microseconds(), 10), id,
		strconv.Itoa(most), strconv.FormatInt(MaxRosterTTL.Microseconds(), 10)}
	parts := s.keyParts("fleet", r.name)
	vals, err := execOnKey(ctx, s.client, rosterScript, args, parts[:]...).AsIntSlice()
	if err != nil {
		return 0, fmt.Errorf("redisstore: roster %s: %w", mode, err)
	}
	if len(vals) != 1 || vals[0] < 0 {
		return 0, fmt.Errorf("redisstore: roster %s: unexpected reply %v", mode, vals)
	}
	return int(vals[0]), nil
}

func checkRosterName(what, s string) error {
	switch {
	case s == "":
		return errors.New("redisstore: roster " + what + " is empty")
	case len(s) > MaxRosterName:
		return fmt.Errorf("redisstore: roster %s of %d bytes: at most %d", what, len(s), MaxRosterName)
	}
	return nil
}
