package stores

import (
	"strings"
	"testing"
	"time"
)

// -redis-coalesce-wait reaches both Redis stores' configs, is on by default
// (200µs; before, off), and is refused where nothing would act on it:
// negative, or given without a Redis store.
func TestRedisCoalesceWaitFlag(t *testing.T) {
	o, _ := redisOpts(t, nil, "-redis-coalesce-wait", "50us", "-store-per-second", "redis://ps:6379")
	if err := o.Check("redis://r:6379"); err != nil {
		t.Fatal(err)
	}
	main, ps, err := o.Configs("redis://r:6379")
	if err != nil {
		t.Fatal(err)
	}
	if main.CoalesceWait != 50*time.Microsecond || ps == nil || ps.CoalesceWait != 50*time.Microsecond {
		t.Errorf("CoalesceWait: main %v, per-second %+v; want 50µs on both", main.CoalesceWait, ps)
	}
	if o, _ := redisOpts(t, nil); o.coalesce != 200*time.Microsecond {
		t.Errorf("default %v, want 200µs (on)", o.coalesce)
	}
	// The default is refused by no store; 0 turns it off anywhere.
	for _, store := range []string{"memory", "postgres://db/sluice", "redis://r:6379"} {
		if o, _ := redisOpts(t, nil); o.Check(store) != nil {
			t.Errorf("default with -store %s: %v, want no error", store, o.Check(store))
		}
		if o, _ := redisOpts(t, nil, "-redis-coalesce-wait", "0"); o.Check(store) != nil {
			t.Errorf("-redis-coalesce-wait 0 with -store %s: %v, want no error", store, o.Check(store))
		}
	}
	for _, c := range []struct{ wait, store, want string }{
		{"-1us", "redis://r:6379", "want 0 or more"},
		{"20us", "memory", "needs a Redis -store"},
		{"20us", "postgres://db/sluice", "needs a Redis -store"},
	} {
		o, _ := redisOpts(t, nil, "-redis-coalesce-wait", c.wait)
		if err := o.Check(c.store); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("-redis-coalesce-wait %s with -store %s: %v, want an error saying %q", c.wait, c.store, err, c.want)
		}
	}
}
