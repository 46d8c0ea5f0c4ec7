package page

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/service"
)

// shownKey is the key the page shows for one refusal of key.
func shownKey(t *testing.T, cfg Config, key string) string {
	t.Helper()
	p := New(cfg)
	p.Observe(service.Decision{Domain: "d", Rule: "d.ip", Outcome: service.Limited, Cost: 1, Key: key})
	s := p.Snapshot()
	if len(s.Refusals) != 1 || len(s.Top) != 1 || s.Top[0].Key != s.Refusals[0].Key {
		t.Fatalf("refusals %+v top %+v, want one key shown in both", s.Refusals, s.Top)
	}
	return s.Refusals[0].Key
}

const ipKey = "d|remote_address=203.0.113.7"

// A shown key is not a plain hash of the key: hashing every IPv4 address
// (or every likely value) and looking the page's hash up does not find
// it, as it did when the page showed the first 128 bits of SHA-256.
func TestPageKeyHashIsNotAPlainSHA256(t *testing.T) {
	got := shownKey(t, Config{}, ipKey)
	sum := sha256.Sum256([]byte(ipKey))
	for _, plain := range []string{sluice.HashKey("", ipKey), hex.EncodeToString(sum[:16]), hex.EncodeToString(sum[:])} {
		if strings.Contains(got, plain[strings.LastIndexByte(plain, '#')+1:]) {
			t.Fatalf("the page shows %q, the key's plain SHA-256 (%q)", got, plain)
		}
	}
	if strings.Contains(got, "203.0.113.7") || len(got) != 33 || got[0] != '~' {
		t.Fatalf("the page shows %q, want ~ and 32 hex digits", got)
	}
}

// Under one configured secret the hash is the same in every page (and
// process): replicas given the same secret show the same hash of a key;
// another secret gives another hash.
func TestPageKeyHashFollowsTheConfiguredSecret(t *testing.T) {
	a := shownKey(t, Config{KeySecret: []byte("replicas-share-this-one")}, ipKey)
	if b := shownKey(t, Config{KeySecret: []byte("replicas-share-this-one")}, ipKey); a != b {
		t.Errorf("one secret, two hashes: %q and %q", a, b)
	}
	if c := shownKey(t, Config{KeySecret: []byte("another-secret-entirely")}, ipKey); c == a {
		t.Errorf("two secrets, one hash %q", a)
	}
	if d := shownKey(t, Config{KeySecret: []byte("replicas-share-this-one")}, ipKey+"8"); d == a {
		t.Errorf("two keys, one hash %q", a)
	}
}

// Without a configured secret each process draws its own: the hash of a
// key differs from one process to the next (a child of the test binary
// prints its hash of the same key).
func TestPageKeyHashDiffersAcrossProcessesWithoutASecret(t *testing.T) {
	if os.Getenv("SLUICE_PAGE_HASH_CHILD") == "1" {
		os.Stdout.WriteString(shownKey(t, Config{}, ipKey) + "\n")
		return
	}
	mine := shownKey(t, Config{}, ipKey)
	if again := shownKey(t, Config{}, ipKey); again != mine {
		t.Fatalf("two pages of one process: %q and %q, want one hash", mine, again)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPageKeyHashDiffersAcrossProcessesWithoutASecret$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SLUICE_PAGE_HASH_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the child: %v: %s", err, out)
	}
	theirs := strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	if len(theirs) != len(mine) || theirs[0] != '~' {
		t.Fatalf("the child printed %q", out)
	}
	if theirs == mine {
		t.Fatalf("two processes without a secret show one hash %q", mine)
	}
}
