package adminclient

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/sluicehq/sluice/admin"
)

// Operation maps the arguments of one sluice admin operation (args[0] the
// operation, the rest its arguments, as `sluice admin -h` lists them) to
// its call; now is the time an override's EXPIRES duration counts from.
// Every error is of the arguments (sluice admin exits 2 on it). args must
// not be empty.
func Operation(args []string, now time.Time) (Call, error) {
	op, a := args[0], args[1:]
	if (op == "peek" || op == "reset") && len(a) > 0 && strings.HasPrefix(a[0], "-") {
		return descriptorCall(op, a)
	}
	want := map[string][2]int{"peek": {2, 2}, "reset": {2, 2}, "set-plan": {2, 2}, "assign": {2, 2},
		"override": {3, 4}, "clear-override": {2, 2}, "usage": {1, 1}, "ledger": {2, 3}, "login": {0, 0}}
	n, ok := want[op]
	if !ok {
		return Call{}, fmt.Errorf("unknown operation %q. Run 'sluice admin -h' for the list", op)
	}
	if len(a) < n[0] || len(a) > n[1] {
		return Call{}, fmt.Errorf("%s takes %d to %d arguments, got %d. Run 'sluice admin -h' for the usage", op, n[0], n[1], len(a))
	}
	raw := func(s, what string) (json.RawMessage, error) {
		if !json.Valid([]byte(s)) {
			return nil, fmt.Errorf("%s: %s is not JSON", op, what)
		}
		return json.RawMessage(s), nil
	}
	esc := url.PathEscape
	switch op {
	case "peek", "reset":
		lim, err := raw(a[1], "LIMIT")
		return Call{"POST", "/v1/keys/" + op, map[string]any{"key": a[0], "limit": lim}}, err
	case "set-plan":
		lims, err := raw(a[1], "LIMITS")
		return Call{"PUT", "/v1/plans/" + esc(a[0]), map[string]any{"limits": lims}}, err
	case "assign":
		return Call{"PUT", "/v1/tenants/" + esc(a[0]) + "/plan", map[string]any{"plan": a[1]}}, nil
	case "override":
		return overrideCall(a, now)
	case "clear-override":
		return Call{"DELETE", "/v1/tenants/" + esc(a[0]) + "/overrides/" + esc(a[1]), nil}, nil
	case "usage":
		return Call{"GET", "/v1/usage?" + url.Values{"key": {a[0]}}.Encode(), nil}, nil
	case "login":
		return Call{"POST", admin.LoginLinksPath, struct{}{}}, nil
	}
	q := url.Values{"from": {a[0]}, "to": {a[1]}}
	if len(a) == 3 {
		q.Set("format", a[2])
	}
	return Call{"GET", "/v1/ledger?" + q.Encode(), nil}, nil
}

// descriptorCall is the call of peek or reset by descriptor: -domain D
// and -descriptor K=V[,K2=V2] (repeatable; the entries in order).
func descriptorCall(op string, args []string) (Call, error) {
	fs := flag.NewFlagSet("sluice admin "+op, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	domain := fs.String("domain", "", "the descriptor's domain (on sluice proxy: the limit's name)")
	var entries []admin.DescriptorEntry
	fs.Func("descriptor", "the descriptor's entries, K=V[,K2=V2] (repeatable)", func(s string) error {
		for kv := range strings.SplitSeq(s, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return fmt.Errorf("%q: want KEY=VALUE[,KEY2=VALUE2]", kv)
			}
			entries = append(entries, admin.DescriptorEntry{Key: k, Value: v})
		}
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return Call{}, fmt.Errorf("%s: %w. Run 'sluice admin -h' for the usage", op, err)
	}
	switch {
	case fs.NArg() > 0:
		return Call{}, fmt.Errorf("%s: unexpected argument %q (by descriptor it takes -domain and -descriptor only)", op, fs.Arg(0))
	case *domain == "" || len(entries) == 0:
		return Call{}, fmt.Errorf("%s: give -domain D and -descriptor K=V[,K2=V2]", op)
	}
	return Call{"POST", "/v1/descriptors/" + op, map[string]any{"domain": *domain, "entries": entries}}, nil
}

// overrideCall is the override operation's call: EXPIRES is an RFC 3339
// time or a duration from now.
func overrideCall(a []string, now time.Time) (Call, error) {
	if !json.Valid([]byte(a[2])) {
		return Call{}, errors.New("override: LIMIT is not JSON")
	}
	body := map[string]any{"limit": json.RawMessage(a[2])}
	if len(a) == 4 {
		exp, err := time.Parse(time.RFC3339, a[3])
		if err != nil {
			d, derr := time.ParseDuration(a[3])
			if derr != nil || d <= 0 {
				return Call{}, fmt.Errorf("override: EXPIRES %q is neither an RFC 3339 time nor a positive duration", a[3])
			}
			exp = now.Add(d)
		}
		body["expires"] = exp.UTC().Format(time.RFC3339Nano)
	}
	return Call{"PUT", "/v1/tenants/" + url.PathEscape(a[0]) + "/overrides/" + url.PathEscape(a[1]), body}, nil
}
