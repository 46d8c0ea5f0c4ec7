// Package stores is the table of the store kinds that sluice serve's and
// sluice proxy's -store names: the memory store, Redis (every scheme
// redisstore.ParseURL reads) and PostgreSQL. Each Kind says which URLs
// name it, what limits it can serve, whether the proxy can decide on it,
// the default deadline of one decision on it, and which flags it makes
// moot; the commands look a -store up here once instead of asking
// "is it memory? is it PostgreSQL?" in every file. It also holds how a
// remote store is opened and guarded (the decision deadline, the local
// share while it fails). It is wiring, shipped in the binary: it knows the
// concrete stores.
//
// Shipped: built into the sluice binary through the packages that import
// it; it imports no test-only package (internal/archtest holds that).
package stores

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/pgstore"
	"github.com/sluicehq/sluice/redisstore"
)

// A Kind is one kind of store. Kinds are compared by pointer: Memory,
// Redis and Postgres are the only ones.
type Kind struct {
	// Name is the kind's name in messages: memory, Redis, PostgreSQL.
	Name string
	// Schemes are the URL schemes that name the kind, matched without
	// regard to case; the memory store has none (it is named by "" or
	// "memory").
	Schemes []string
	// Remote says that decisions cross the network: the kind can fail, so
	// a failure mode, a decision deadline, reservations and a local share
	// apply to it.
	Remote bool
	// Proxy says that sluice proxy can decide on the kind; the proxy
	// refuses the others by name.
	Proxy bool
	// Serves says, for people, which limits the kind can serve.
	Serves string
	// Ledger says that the kind keeps a ledger of past periods, so that
	// it can serve a billable limit (Limit.Billable).
	Ledger bool
	// Validate is the check of the limits the kind serves (see
	// sluice.LimitValidator), needing no connection: a kind without a
	// Ledger refuses billable limits first.
	Validate func(sluice.Limit) error
	// DecisionTimeout is the default deadline of one decision on the kind
	// (-store-timeout 0) before the failure mode answers; 0 for a kind
	// that is not Remote.
	DecisionTimeout time.Duration
	// Moot are serve's flags (without their dash) that the kind makes
	// moot, in the order the start-up line names them when given.
	Moot []string
	// ProxyMoot are the proxy's flags the kind makes moot, likewise.
	ProxyMoot []string
}

// decisionTimeout is the default deadline of one decision on Redis and
// on PostgreSQL (-store-timeout 0), chosen from measurement: a local
// redis-server on a 2-core machine running 7 other loads (load average
// 15) answered 256 concurrent callers with p99 96 ms, p99.9 145 ms, max
// 160 ms (64 callers: p99 11 ms, max 26 ms). 50 ms, the former default,
// was under that p99, so a busy store sent a share of decisions to the
// failure mode; 250 ms clears the worst decision measured by half again.
// On PostgreSQL, decisions on one hot key queue on its row lock and, with
// few connections in the pool, on the pool: the same bound. A caller's
// deadline still shortens it (Envoy's 20 ms leaves the store 18 ms).
const decisionTimeout = 250 * time.Millisecond

// The kinds.
var (
	// Memory is the in-process store: it never fails and has no deadline.
	Memory = &Kind{
		Name:      "memory",
		Proxy:     true,
		Serves:    "every algorithm, no billable limit",
		Validate:  noLedger("the memory store", nil),
		Moot:      []string{"local-cache", "lease-share", "health-needs-store", "failure-mode", "store-timeout", "failure-nodes"},
		ProxyMoot: []string{"failure-mode", "store-timeout", "failure-nodes"},
	}
	// Redis is redisstore, on a single Redis, a Cluster or Sentinel, with
	// or without TLS.
	Redis = &Kind{
		Name:            "Redis",
		Schemes:         []string{"redis", "rediss", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel"},
		Remote:          true,
		Proxy:           true,
		Serves:          "every algorithm, periods in whole microseconds, no billable limit",
		Validate:        noLedger("Redis", redisstore.ValidateLimit),
		DecisionTimeout: decisionTimeout,
		Moot:            []string{"memory-clock-resolution"}, // -memory-max-bytes: failure mode local's store (FailureLocal)
	}
	// Postgres is pgstore: durable fixed-window quotas.
	Postgres = &Kind{
		Name:            "PostgreSQL",
		Schemes:         []string{"postgres", "postgresql"},
		Remote:          true,
		Serves:          "fixed_window only, billable or not",
		Ledger:          true,
		Validate:        pgstore.ValidateLimit,
		DecisionTimeout: decisionTimeout,
		Moot:            []string{"memory-clock-resolution"}, // -memory-max-bytes: failure mode local's store (FailureLocal)
	}
)

// noLedger returns v (nil: no check) refusing, first, a billable limit,
// which store keeps no ledger for.
func noLedger(store string, v func(sluice.Limit) error) func(sluice.Limit) error {
	return func(lim sluice.Limit) error {
		if lim.Billable {
			return fmt.Errorf("billable: %s keeps no ledger of past periods (only a PostgreSQL -store does)", store)
		}
		if v == nil {
			return nil
		}
		return v(lim)
	}
}

// Kinds is every kind, in the order messages list them.
var Kinds = []*Kind{Memory, Redis, Postgres}

// kindOf returns the kind store names, or nil.
func kindOf(store string) *Kind {
	if store == "" || store == "memory" {
		return Memory
	}
	scheme, _, ok := strings.Cut(store, "://")
	if !ok {
		return nil
	}
	for _, k := range Kinds {
		for _, s := range k.Schemes {
			if strings.EqualFold(scheme, s) {
				return k
			}
		}
	}
	return nil
}

// Of returns the kind that -store store names, or an error that names
// every kind (with the store's secrets masked) when it names none.
func Of(store string) (*Kind, error) {
	if k := kindOf(store); k != nil {
		return k, nil
	}
	return nil, fmt.Errorf("-store %s: not a store Sluice knows: want %s", Name(store), Known())
}

// Is reports whether store names a store of kind k.
func Is(store string, k *Kind) bool { return kindOf(store) == k }

// Known lists every kind and how to name it, for messages: "memory,
// Redis (redis://, …) or PostgreSQL (postgres://, postgresql://)".
func Known() string {
	parts := make([]string, len(Kinds))
	for i, k := range Kinds {
		parts[i] = k.Name
		if len(k.Schemes) > 0 {
			parts[i] += " (" + strings.Join(k.Schemes, "://, ") + "://)"
		}
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
}

// Validator returns the check of the limits the store named by store
// serves, with no connection: its kind's Validate; nil for a store of no
// kind (which Of refuses).
func Validator(store string) func(sluice.Limit) error {
	if k := kindOf(store); k != nil {
		return k.Validate
	}
	return nil
}

// Name describes the store without its secrets (redact.URL: the password
// of its user information, secret query parameters, a key=value
// connection string's password), for every place that prints one: logs,
// banners, errors, the admin page. The memory store is "memory".
func Name(store string) string {
	if kindOf(store) == Memory {
		return "memory"
	}
	return redact.URL(store)
}
