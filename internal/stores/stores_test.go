package stores

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

// The store's printed name hides the password of its URL, and only that:
// an '@' in the path or the query is not user information.
func TestStoreNameRedactsOnlyThePassword(t *testing.T) {
	for in, want := range map[string]string{
		"memory":                                             "memory",
		"redis://h:6379":                                     "redis://h:6379",
		"redis://user:pw@h:6379":                             "redis://user:xxxxx@h:6379",
		"redis://:secret@h:6379/0?x=a@b":                     "redis://:xxxxx@h:6379/0?x=a@b",
		"redis://h:6379/0?client_name=a@b":                   "redis://h:6379/0?client_name=a@b",
		"rediss://:p%40ss@h:6380":                            "rediss://:xxxxx@h:6380",
		"redis://:p@ss@h:6379":                               "redis://:xxxxx@h:6379",
		"redis+cluster://u:p@a:7000,b:7000":                  "redis+cluster://u:xxxxx@a:7000,b:7000",
		"redis+sentinel://:p@s1:26379,s2:26379/mymaster?x=@": "redis+sentinel://:xxxxx@s1:26379,s2:26379/mymaster?x=@",
		"redis://u:p@h:bad/0?x=a@b":                          "redis://u:xxxxx@h:bad/0?x=a@b", // not a URL net/url accepts: the same rule
	} {
		if got := Name(in); got != want {
			t.Errorf("Name(%q) = %q, want %q", in, got, want)
		}
	}
}

// Every URL scheme of each kind names that kind, whatever its case; the
// memory store is "" or "memory"; anything else is refused by an error
// that names every kind and masks the store's password.
func TestOfLooksEveryKindUp(t *testing.T) {
	for store, want := range map[string]*Kind{
		"": Memory, "memory": Memory,
		"redis://h:6379": Redis, "rediss://h": Redis, "redis+cluster://a,b": Redis, "rediss+cluster://a": Redis,
		"redis+sentinel://s/m": Redis, "rediss+sentinel://s/m": Redis, "REDIS://h": Redis,
		"postgres://db/x": Postgres, "postgresql://db/x": Postgres, "PostgreSQL://db/x": Postgres,
	} {
		if got, err := Of(store); got != want || err != nil {
			t.Errorf("Of(%q) = %v, %v; want %s", store, got, err, want.Name)
		}
	}
	for _, store := range []string{"foo://u:secret@x", "localhost:6379", "Memory", "mysql://db", "redis+foo://h"} {
		k, err := Of(store)
		if k != nil || err == nil || strings.Contains(err.Error(), "secret") {
			t.Errorf("Of(%q) = %v, %v; want no kind and an error without the password", store, k, err)
			continue
		}
		for _, name := range []string{"memory", "redis://", "rediss+sentinel://", "postgresql://"} {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("Of(%q): %q does not name %s", store, err, name)
			}
		}
	}
}

// Each kind's limits: the memory store serves every valid limit but a
// billable one, Redis refuses a period of no whole microsecond and a
// billable limit too, PostgreSQL everything but a fixed window.
func TestValidatorIsTheKinds(t *testing.T) {
	fine := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1, Period: 1001}
	if err := Validator("memory")(fine); err != nil {
		t.Errorf("the memory store with a period of 1001 ns: %v, want nil: it serves every valid limit", err)
	}
	billable := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10, Period: 60e9, Billable: true}
	for _, store := range []string{"memory", "redis://h"} {
		if err := Validator(store)(billable); err == nil {
			t.Errorf("%s admits a billable limit: it keeps no ledger", store)
		}
	}
	if err := Validator("redis://h")(fine); !errors.Is(err, sluice.ErrInvalidLimit) {
		t.Errorf("Redis with a period of 1001 ns: %v, want ErrInvalidLimit", err)
	}
	if err := Validator("postgresql://db/x")(sluice.PerMinute(10)); !errors.Is(err, sluice.ErrInvalidLimit) {
		t.Errorf("PostgreSQL with a token bucket: %v, want ErrInvalidLimit", err)
	}
	if err := Validator("postgres://db/x")(sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10, Period: 60e9}); err != nil {
		t.Errorf("PostgreSQL with a fixed window: %v", err)
	}
}
