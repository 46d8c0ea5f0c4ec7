package stores

import (
	"strings"
	"testing"
	"time"
)

// -redis-coalesce-wait reaches both Redis stores' configs, and is refused
// where nothing would act on it: negative, or without a Redis store.
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
	if o, _ := redisOpts(t, nil); o.coalesce != 0 {
		t.Errorf("default %v, want 0 (off)", o.coalesce)
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
