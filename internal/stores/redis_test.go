package stores

import (
	"flag"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/internal/ratelimitenv"
	"github.com/sluicehq/sluice/redisstore"
)

// redisEnvNames are the variables RedisOptions reads; each test starts
// with all of them unset.
var redisEnvNames = ratelimitenv.Names(ratelimitenv.Redis)

// redisOpts reads env (over all of redisEnvNames unset) and args into
// RedisOptions, as serve does.
func redisOpts(t *testing.T, env map[string]string, args ...string) (*RedisOptions, envflag.Errs) {
	t.Helper()
	for _, n := range redisEnvNames {
		t.Setenv(n, env[n]) // restored at the end of the test
		if _, ok := env[n]; !ok {
			os.Unsetenv(n)
		}
	}
	var o RedisOptions
	var errs envflag.Errs
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.Flags(fs, &errs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &o, errs
}

// Each tuning variable of envoyproxy/ratelimit's reaches the store's
// config with its meaning, for the main store and, under
// REDIS_PERSECOND, the per-second one, which is a URL of its own built
// as REDIS_URL is.
func TestRedisEnvConfigs(t *testing.T) {
	o, errs := redisOpts(t, map[string]string{
		"REDIS_KEY_FORMAT": "envoy", "EXPIRATION_JITTER_MAX_SECONDS": "7",
		"REDIS_POOL_SIZE": "16", "REDIS_PIPELINE_WINDOW": "150us", "REDIS_TIMEOUT": "3s", "REDIS_SENTINEL_AUTH": "su:sp",
		"REDIS_PERSECOND": "true", "REDIS_PERSECOND_URL": "ps1:26379,ps2:26379", "REDIS_PERSECOND_TYPE": "cluster",
		"REDIS_PERSECOND_AUTH": "pw", "REDIS_PERSECOND_TLS": "true", "REDIS_PERSECOND_POOL_SIZE": "4",
		"REDIS_PERSECOND_PIPELINE_WINDOW": "1ms", "REDIS_PERSECOND_TIMEOUT": "2s",
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	main, ps, err := o.Configs("redis+sentinel://s:26379/m")
	if err != nil {
		t.Fatal(err)
	}
	want := redisstore.Config{URL: "redis+sentinel://s:26379/m", KeyFormat: redisstore.KeyEnvoy, ExpirationJitter: 7 * time.Second, CoalesceWait: DefaultCoalesceWait,
		Connections: 16, FlushDelay: 150 * time.Microsecond, Timeout: 3 * time.Second, SentinelUsername: "su", SentinelPassword: "sp"}
	if main != want {
		t.Errorf("main store:\n%+v\nwant\n%+v", main, want)
	}
	if ps == nil {
		t.Fatal("REDIS_PERSECOND=true: no per-second store")
	}
	want = redisstore.Config{URL: "rediss+cluster://:pw@ps1:26379,ps2:26379", KeyFormat: redisstore.KeyEnvoy, ExpirationJitter: 7 * time.Second, CoalesceWait: DefaultCoalesceWait,
		Connections: 4, FlushDelay: time.Millisecond, Timeout: 2 * time.Second}
	if *ps != want {
		t.Errorf("per-second store:\n%+v\nwant\n%+v", *ps, want)
	}
	if got := o.NotActedOn("redis+sentinel://s:26379/m"); len(got) > 0 {
		t.Errorf("all acted on, yet named: %q", got)
	}
	// Without REDIS_PERSECOND, no per-second store; -store-per-second
	// gives one, and EXPIRATION_JITTER_MAX_SECONDS defaults to 300.
	o, _ = redisOpts(t, map[string]string{"REDIS_KEY_FORMAT": "envoy"})
	if _, ps, _ := o.Configs("redis://r:6379"); ps != nil {
		t.Errorf("a per-second store without REDIS_PERSECOND: %+v", ps)
	}
	o, _ = redisOpts(t, map[string]string{"REDIS_KEY_FORMAT": "envoy"}, "-store-per-second", "redis://ps:6379")
	main, ps, _ = o.Configs("redis://r:6379")
	if ps == nil || ps.URL != "redis://ps:6379" || main.ExpirationJitter != 300*time.Second {
		t.Errorf("-store-per-second: %+v, jitter %v; want redis://ps:6379 and 300s", ps, main.ExpirationJitter)
	}
}

// Variables that set nothing with the stores given are named in the
// start-up line, each with why, never dropped in silence.
func TestRedisEnvNotActedOn(t *testing.T) {
	for _, tt := range []struct {
		name  string
		env   map[string]string
		store string
		want  []string
	}{
		{"tuning with the memory store", map[string]string{"REDIS_POOL_SIZE": "5", "REDIS_TIMEOUT": "1s"}, "memory",
			[]string{"REDIS_POOL_SIZE", "REDIS_TIMEOUT"}},
		{"client certificates without TLS", map[string]string{"REDIS_TLS_CLIENT_CERT": "c", "REDIS_TLS_CLIENT_KEY": "k", "REDIS_TLS_CACERT": "ca", "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION": "true"}, "redis://r:6379",
			[]string{"REDIS_TLS_CLIENT_CERT", "REDIS_TLS_CLIENT_KEY", "REDIS_TLS_CACERT", "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION"}},
		{"sentinel auth without a sentinel", map[string]string{"REDIS_SENTINEL_AUTH": "x"}, "redis://r:6379", []string{"REDIS_SENTINEL_AUTH"}},
		{"per-second variables without REDIS_PERSECOND", map[string]string{"REDIS_PERSECOND_URL": "ps:6379", "REDIS_PERSECOND_POOL_SIZE": "3"}, "redis://r:6379",
			[]string{"REDIS_PERSECOND_URL", "REDIS_PERSECOND_POOL_SIZE"}},
		{"what rueidis has no knob for", map[string]string{"REDIS_PIPELINE_LIMIT": "8", "REDIS_CLUSTER_PIPELINE_PARALLELISM": "2", "REDIS_POOL_ON_EMPTY_BEHAVIOR": "ERROR", "REDIS_STARTUP_MAX_ELAPSED_TIME": "1m"}, "redis://r:6379",
			[]string{"REDIS_PIPELINE_LIMIT", "REDIS_CLUSTER_PIPELINE_PARALLELISM", "REDIS_POOL_ON_EMPTY_BEHAVIOR", "REDIS_STARTUP_MAX_ELAPSED_TIME"}},
		{"the per-second URL's variables with -store-per-second", map[string]string{"REDIS_PERSECOND_URL": "ps:6379", "REDIS_PERSECOND_POOL_SIZE": "3"}, "redis://r:6379",
			[]string{"REDIS_PERSECOND_URL"}},
		{"jitter with Sluice's keys", map[string]string{"EXPIRATION_JITTER_MAX_SECONDS": "10"}, "redis://r:6379", []string{"EXPIRATION_JITTER_MAX_SECONDS"}},
		{"their defaults", map[string]string{"REDIS_PIPELINE_LIMIT": "0", "REDIS_POOL_ON_EMPTY_BEHAVIOR": "wait", "REDIS_TIMEOUT": ""}, "redis://r:6379", nil},
	} {
		var args []string
		if strings.Contains(tt.name, "-store-per-second") {
			args = []string{"-store-per-second", "redis://ps:6379"}
		}
		o, errs := redisOpts(t, tt.env, args...)
		if len(errs) > 0 {
			t.Fatalf("%s: %v", tt.name, errs)
		}
		got := o.NotActedOn(tt.store)
		var names []string
		for _, g := range got {
			name, why, ok := strings.Cut(g, " (")
			if !ok || len(why) < 10 || strings.Contains(why, ",") {
				t.Errorf("%s: %q gives no reason, or one with a comma (the start-up line's separator)", tt.name, g)
			}
			names = append(names, strings.SplitN(name, "=", 2)[0])
		}
		slices.Sort(names)
		want := slices.Sorted(slices.Values(tt.want))
		if !slices.Equal(names, want) {
			t.Errorf("%s: named %q, want %v", tt.name, got, want)
		}
	}
}

// Values that cannot be acted on as given stop serve (exit 2) with the
// variable's name: a key format that is neither sluice nor envoy, the
// envoy key format or a per-second store without Redis, REDIS_PERSECOND
// without its URL, a pool size that is no number.
func TestRedisEnvRefused(t *testing.T) {
	for _, tt := range []struct {
		env   map[string]string
		args  []string
		store string
		want  string
	}{
		{map[string]string{"REDIS_KEY_FORMAT": "lyft"}, nil, "redis://r:6379", "lyft"},
		{nil, []string{"-redis-key-format", "envoy"}, "memory", "-redis-key-format"},
		{nil, []string{"-store-per-second", "redis://ps:6379"}, "memory", "-store-per-second"},
		{map[string]string{"REDIS_PERSECOND": "true"}, nil, "redis://r:6379", "REDIS_PERSECOND_URL"},
		{map[string]string{"REDIS_PERSECOND": "yes"}, nil, "redis://r:6379", "REDIS_PERSECOND"},
		{map[string]string{"REDIS_POOL_SIZE": "ten"}, nil, "redis://r:6379", "REDIS_POOL_SIZE"},
		{map[string]string{"REDIS_POOL_SIZE": "-1"}, nil, "redis://r:6379", "REDIS_POOL_SIZE"},
		{map[string]string{"REDIS_PERSECOND_TIMEOUT": "-2s"}, nil, "redis://r:6379", "REDIS_PERSECOND_TIMEOUT"},
		{nil, []string{"-store-per-second", "http://ps"}, "redis://r:6379", "-store-per-second"},
	} {
		o, errs := redisOpts(t, tt.env, tt.args...)
		err := o.Check(tt.store)
		var all []string
		for _, e := range append(errs, err) {
			if e != nil {
				all = append(all, e.Error())
			}
		}
		if msg := strings.Join(all, "; "); !strings.Contains(msg, tt.want) {
			t.Errorf("%v %v: errors %q, want one naming %s", tt.env, tt.args, msg, tt.want)
		}
	}
}
