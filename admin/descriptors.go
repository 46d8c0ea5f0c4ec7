package admin

import (
	"context"
	"errors"
	"net/http"

	"github.com/sluicehq/sluice"
)

// DescriptorEntry is one key=value entry of a descriptor, as a request
// sends it (envoyproxy/ratelimit's descriptor entry).
type DescriptorEntry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// CountedKey is a store key a descriptor is counted under by the running
// config, and the limit it is counted against.
type CountedKey struct {
	// Rule names the limit, as the response headers and the live page
	// name it.
	Rule string
	// Key is the store key.
	Key string
	// Limit is the limit the key is counted against (a tenant's plan's,
	// when one applies).
	Limit sluice.Limit
}

// KeyResolver maps a descriptor to the keys the running config counts it
// under: serve's rules (service.Service.CountedKeys), the proxy's
// policies.
type KeyResolver interface {
	// CountedKeys returns the keys and limits of one descriptor of
	// domain, asking no store. A descriptor no rule counts is an error
	// wrapping ErrNoRule (answered 404); a malformed one wraps
	// sluice.ErrBadInput (400).
	CountedKeys(ctx context.Context, domain string, entries []DescriptorEntry) ([]CountedKey, error)
}

// ErrNoRule is what a KeyResolver's error wraps for a descriptor that no
// rule counts (none matches, or the one that matches counts nothing): the
// API answers it 404, never a fresh key's state.
var ErrNoRule = errors.New("admin: no rule counts this descriptor")

// Bounds of a descriptor call, besides the body's bytes.
const (
	// MaxDescriptorEntries is the most entries a descriptor call takes.
	MaxDescriptorEntries = 64
	maxDescriptorField   = 1024
)

// descriptorRequest is the body of the descriptor calls.
type descriptorRequest struct {
	Domain  string            `json:"domain"`
	Entries []DescriptorEntry `json:"entries"`
}

// descriptorState is the answer of the descriptor calls: each key the
// descriptor is counted under, with its state.
type descriptorState struct {
	Domain  string            `json:"domain"`
	Entries []DescriptorEntry `json:"entries"`
	Keys    []countedState    `json:"keys"`
}

// countedState is one counted key's state.
type countedState struct {
	Rule  string `json:"rule"`
	Limit string `json:"limit"`
	// Hash is the keyed hash the live page and the proxy's logs show of
	// the key (Config.KeyHash); empty without one.
	Hash string `json:"hash,omitempty"`
	keyState
}

// descriptorCall reads a descriptor call's body and resolves its keys, or
// answers why not.
func (a *API) descriptorCall(w http.ResponseWriter, r *http.Request) (descriptorRequest, []CountedKey, sluice.Peeker, bool) {
	var req descriptorRequest
	pk, isPeeker := a.cfg.Limiter.(sluice.Peeker)
	if a.cfg.Keys == nil || !isPeeker {
		writeError(w, http.StatusNotImplemented, "descriptors cannot be resolved here (no rules, or a store that cannot read a key's state)")
		return req, nil, nil, false
	}
	if !a.readBody(w, r, &req) {
		return req, nil, nil, false
	}
	if msg := checkDescriptor(req); msg != "" {
		writeError(w, http.StatusBadRequest, "malformed body: "+msg)
		return req, nil, nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.cfg.Timeout)
	defer cancel()
	keys, err := a.cfg.Keys.CountedKeys(ctx, req.Domain, req.Entries)
	if errors.Is(err, ErrNoRule) {
		writeError(w, http.StatusNotFound, err.Error())
		return req, nil, nil, false
	}
	if err == nil && len(keys) == 0 {
		err = ErrNoRule
	}
	if err != nil {
		errStatus(w, err)
		return req, nil, nil, false
	}
	return req, keys, pk, true
}

// checkDescriptor returns what is wrong with a descriptor call's body, ""
// for nothing.
func checkDescriptor(req descriptorRequest) string {
	switch {
	case req.Domain == "" || len(req.Domain) > maxDescriptorField:
		return "domain: required, at most 1024 bytes"
	case len(req.Entries) == 0:
		return "entries: give at least one {\"key\", \"value\"}"
	case len(req.Entries) > MaxDescriptorEntries:
		return "entries: at most 64"
	}
	for _, e := range req.Entries {
		if e.Key == "" || len(e.Key) > maxDescriptorField || len(e.Value) > maxDescriptorField {
			return "entries: each key non-empty, key and value at most 1024 bytes"
		}
	}
	return ""
}

// peekDescriptor answers the state of each key a descriptor is counted
// under, spending nothing.
func (a *API) peekDescriptor(w http.ResponseWriter, r *http.Request) { a.answerDescriptor(w, r, false) }

// resetDescriptor gives back, for each key a descriptor is counted under,
// what it has spent (its limit's capacity less what remains, under the
// limit the config counts it against), and answers the states after.
func (a *API) resetDescriptor(w http.ResponseWriter, r *http.Request) {
	if _, ok := a.cfg.Limiter.(sluice.Refunder); !ok {
		writeError(w, http.StatusNotImplemented, "the store cannot refund, so cannot reset a key")
		return
	}
	a.answerDescriptor(w, r, true)
}

func (a *API) answerDescriptor(w http.ResponseWriter, r *http.Request, reset bool) {
	req, keys, pk, ok := a.descriptorCall(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.cfg.Timeout)
	defer cancel()
	out := descriptorState{Domain: req.Domain, Entries: req.Entries, Keys: make([]countedState, 0, len(keys))}
	for _, k := range keys {
		res, err := pk.Peek(ctx, k.Key, k.Limit)
		refunded := 0
		if err == nil && reset {
			if spent := k.Limit.Capacity() - res.Remaining; spent > 0 {
				if err = a.cfg.Limiter.(sluice.Refunder).RefundN(ctx, k.Key, k.Limit, spent); err == nil {
					refunded = spent
					res, err = pk.Peek(ctx, k.Key, k.Limit)
				}
			}
		}
		if err != nil {
			errStatus(w, err)
			return
		}
		st := countedState{Rule: k.Rule, Limit: k.Limit.String(), keyState: state(k.Key, k.Limit, res)}
		st.Refunded = refunded
		if a.cfg.KeyHash != nil {
			st.Hash = a.cfg.KeyHash(k.Key)
		}
		out.Keys = append(out.Keys, st)
	}
	writeJSON(w, out)
}
