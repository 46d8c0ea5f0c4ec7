package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
)

// KeyFormat says where a Store keeps fixed-window counters
// (Config.KeyFormat): sluice.KeyFormat, the one setting the service's keys
// and the store's layout share.
type KeyFormat = sluice.KeyFormat

const (
	// KeySluice keeps every state in Sluice's own keys,
	// "<prefix>:<algorithm>:{<key>}".
	KeySluice = sluice.KeySluice
	// KeyEnvoy keeps fixed windows of whole seconds in envoyproxy/ratelimit's
	// layout, so that both services can serve one Redis during a rolling
	// swap and a limit holds across them: the counter of a window is the
	// key as given (for the service, its cache key up to the window start:
	// CACHE_KEY_PREFIX + domain + "_" + key_value_ per entry; see
	// service.KeyEnvoy) followed by the window start in Unix seconds, a
	// plain integer raised with INCRBY, expiring the period plus a jitter
	// after its last admitted hit. Config.Prefix is not used for those keys.
	// Windows are epoch-aligned on Redis's clock (TIME), as the other
	// scripts' are; envoyproxy/ratelimit uses its host's clock, so the two
	// agree on a window as far as those clocks agree with Redis's.
	//
	// A decision admits iff the cost fits in what is left (a counter above
	// the limit, from envoyproxy/ratelimit's counting of denied hits, is
	// full), and a denied decision writes nothing. Peek reads the counter;
	// RefundN lowers it, never below 0. Every other limit (other
	// algorithms, fixed windows of periods that are not whole seconds)
	// keeps Sluice's layout, which envoyproxy/ratelimit never reads.
	KeyEnvoy = sluice.KeyEnvoy
)

// ParseKeyFormat reads "sluice" or "envoy" (any case; "" is sluice):
// sluice.ParseKeyFormat, its error prefixed "redisstore: ".
func ParseKeyFormat(s string) (KeyFormat, error) {
	f, err := sluice.ParseKeyFormat(s)
	if err != nil {
		return 0, fmt.Errorf("redisstore: %w", err)
	}
	return f, nil
}

// envoyScript is KeyEnvoy's fixed window.
var envoyScript = rueidis.NewLuaScript(scriptText("envoy_fixed_window.lua"))

// envoyTries bounds the attempts of one decision whose window start the
// store guessed wrong: the second one uses Redis's clock, so a third is
// needed only when a window ends between the two.
const envoyTries = 3

// maxJitterStrings bounds the table of jitter arguments a store keeps, so
// that a jitter costs no allocation per decision; larger jitters are
// formatted per decision.
const maxJitterStrings = 4096

// envoyState is what a store with KeyEnvoy keeps.
type envoyState struct {
	// jitter is Config.ExpirationJitter in whole seconds; jitters its
	// formatted values 0 … jitter−1, up to maxJitterStrings of them.
	jitter  int
	jitters []string
	// offset is Redis's clock minus the host's, in seconds, as last seen
	// by a wrong guess of the window start.
	offset atomic.Int64
	// window caches the last window start argument.
	window atomic.Pointer[windowArg]
}

// windowArg is a window start and its decimal form.
type windowArg struct {
	start int64
	s     string
}

func newEnvoyState(jitter time.Duration) *envoyState {
	e := &envoyState{jitter: int(jitter / time.Second)}
	e.jitters = make([]string, min(e.jitter, maxJitterStrings))
	for i := range e.jitters {
		e.jitters[i] = strconv.Itoa(i)
	}
	return e
}

// jitterArg returns a random jitter in [0, jitter) seconds, formatted.
func (e *envoyState) jitterArg() string {
	if e.jitter <= 1 {
		return "0"
	}
	j := rand.IntN(e.jitter)
	if j < len(e.jitters) {
		return e.jitters[j]
	}
	return strconv.Itoa(j)
}

// startArg returns start formatted, from the cache when it is the last one.
func (e *envoyState) startArg(start int64) string {
	if w := e.window.Load(); w != nil && w.start == start {
		return w.s
	}
	w := &windowArg{start: start, s: strconv.FormatInt(start, 10)}
	e.window.Store(w)
	return w.s
}

// sharesEnvoyLayout reports whether lim's state is kept in
// envoyproxy/ratelimit's layout.
func (s *Store) sharesEnvoyLayout(lim sluice.Limit) bool {
	return s.envoy != nil && lim.Algorithm == sluice.FixedWindow && lim.Period%time.Second == 0
}

// hostNow returns the host's idea of the time: the test clock's, else the
// wall clock's.
func (s *Store) hostNow() time.Time {
	switch {
	case s.guessNow != nil:
		return s.guessNow()
	case s.clock != nil:
		return s.clock.Now()
	}
	return time.Now()
}

// execEnvoy runs lim's fixed window in envoyproxy/ratelimit's layout,
// input already checked: the window start guessed from the host's clock
// and the offset to Redis's seen last, and tried again with Redis's when
// the guess was wrong.
func (s *Store) execEnvoy(ctx context.Context, mode, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	params, err := s.params(lim) // the period in microseconds, the rate
	if err != nil {
		return sluice.Result{}, err
	}
	p := int64(lim.Period / time.Second)
	now := s.hostNow().Unix() + s.envoy.offset.Load()
	for range envoyTries {
		start := now - now%p
		w := s.envoy.startArg(start)
		args := []string{mode, s.nowArg(), params[0], params[1], strconv.Itoa(cost), w, s.envoy.jitterArg()}
		vals, err := decodeInts(execOnKey(ctx, s.client, envoyScript, args, key, w))
		if err != nil {
			return sluice.Result{}, err
		}
		if vals[0] != 2 {
			return result(vals)
		}
		now = vals[1]
		s.envoy.offset.Store(now - s.hostNow().Unix())
	}
	return sluice.Result{}, fmt.Errorf("%w: the window moved %d times during one decision", ErrReply, envoyTries)
}
