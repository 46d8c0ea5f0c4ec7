package service

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/rlheader"
)

// PolicyNames says what the response headers call a rule's limits: the
// names in RateLimit-Policy and RateLimit (HeadersDraft11), and in forward
// auth's X-RateLimit-Reason and problem body too. A rule's name says how a
// deployment is laid out (under Envoy Gateway it spells Kubernetes
// namespaces and policy names), and the headers go to every client. The
// zero value is PolicyNamesRule.
type PolicyNames uint8

const (
	// PolicyNamesRule names a limit by its rule's name, else its full key
	// (the descriptor path; FullKey#<seconds>s for the further limits of
	// a rate_limits list).
	PolicyNamesRule PolicyNames = iota
	// PolicyNamesHash names a limit "r" and the first 12 hex digits of
	// the SHA-256 of what PolicyNamesRule would call it: the same on every
	// replica and across reloads, and distinct per limit, but not the
	// rule's name. It hides names from a reader of one header, not from
	// one who can guess a name and hash it.
	PolicyNamesHash
	// PolicyNamesIndex names a limit by its position in the response's
	// RateLimit-Policy list: "0", "1"... It tells a client nothing but
	// which policy RateLimit reports; the names of one limit may differ
	// from one response to the next.
	PolicyNamesIndex
)

// String returns "rule", "hash" or "index".
func (n PolicyNames) String() string {
	switch n {
	case PolicyNamesRule:
		return "rule"
	case PolicyNamesHash:
		return "hash"
	case PolicyNamesIndex:
		return "index"
	}
	return fmt.Sprintf("PolicyNames(%d)", uint8(n))
}

// ParsePolicyNames returns the PolicyNames named s: "rule" (also ""),
// "hash" or "index", in any case.
func ParsePolicyNames(s string) (PolicyNames, error) {
	switch strings.ToLower(s) {
	case "rule", "":
		return PolicyNamesRule, nil
	case "hash":
		return PolicyNamesHash, nil
	case "index":
		return PolicyNamesIndex, nil
	}
	return 0, fmt.Errorf("service: policy names %q: want rule, hash or index", s)
}

// hashPolicyName is PolicyNamesHash's name of the limit named name.
func hashPolicyName(name string) string {
	sum := sha256.Sum256([]byte(name))
	var b [13]byte
	b[0] = 'r'
	hex.Encode(b[1:], sum[:6])
	return string(b[:])
}

// renamePolicies renames pols, a response's RateLimit-Policy items in
// order, as Config.PolicyNames asks, and returns what status, the name
// of one of them, is called now (status itself when it is none of
// them). PolicyNamesRule changes nothing.
func (s *Service) renamePolicies(pols []rlheader.Policy, status string) string {
	out := status
	for i := range pols {
		var n string
		switch s.names {
		case PolicyNamesHash:
			n = hashPolicyName(pols[i].Name)
		case PolicyNamesIndex:
			n = strconv.Itoa(i)
		default:
			return status
		}
		if pols[i].Name == status {
			out = n
		}
		pols[i].Name = n
	}
	if s.names == PolicyNamesHash && out == status {
		out = hashPolicyName(status)
	}
	return out
}

// renameViolated renames the violated policies of a forward-auth answer,
// each a name of pols as they were before renamePolicies renamed them
// into renamed.
func (s *Service) renameViolated(violated []string, names []string, renamed []rlheader.Policy) {
	if s.names == PolicyNamesRule {
		return
	}
	for i, v := range violated {
		for j, n := range names {
			if n == v {
				violated[i] = renamed[j].Name
				break
			}
		}
		if s.names == PolicyNamesHash && violated[i] == v {
			violated[i] = hashPolicyName(v)
		}
	}
}
