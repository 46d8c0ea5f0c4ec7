package page

import (
	"fmt"

	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/keyhash"
	"github.com/sluicehq/sluice/service"
)

// shownKey is the key the page shows for key refused twice in a minute:
// the first refusal is only remembered (no hash made, nothing listed),
// the second lists the key with both.
func shownKey(t *testing.T, cfg Config, key string) string {
	t.Helper()
	cfg.Now = clocktest.At(time.Unix(1_000_020, 0)).Now
	p := New(cfg)
	for range 2 {
		p.Observe(service.Decision{Domain: "d", Rule: "d.ip", Outcome: service.Limited, Cost: 1, Key: key})
	}
	s := p.Snapshot()
	if len(s.Refusals) != 2 || s.Refusals[1].Key != "" || len(s.Top) != 1 || s.Top[0].Key != s.Refusals[0].Key || s.Top[0].Count != 2 {
		t.Fatalf("refusals %+v top %+v, want the second refusal's key shown in both, counted twice", s.Refusals, s.Top)
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

// A key refused again shows the hash it showed the first time, and every
// key its own: past the cache of hashes (more keys than its slots, all of
// one length, under two rules, twice over), each key's second refusal in
// a minute shows the keyed hash of its own key, as hashing it afresh
// gives.
func TestPageShowsEachKeysOwnHashPastTheCache(t *testing.T) {
	secret := []byte("replicas-share-this-one")
	p := New(Config{KeySecret: secret, Refusals: 1, Now: clocktest.At(time.Unix(1_000_020, 0)).Now})
	want := keyhash.New(secret)
	for pass := range 2 {
		for i := range 3 * shownSlots {
			key := fmt.Sprintf("d|remote_address=198.51.%03d.%03d", i/256, i%256)
			rule := []string{"d.ip", "d.ip_burst"}[i%2]
			for range 2 {
				p.Observe(service.Decision{Domain: "d", Rule: rule, Outcome: service.Limited, Cost: 1, Key: key})
			}
			got := p.Snapshot().Refusals
			if len(got) != 1 || got[0].Key != want.Hash("", key) || got[0].Rule != rule {
				t.Fatalf("pass %d, key %q of %s: the page shows %+v, want its hash %q", pass, key, rule, got, want.Hash("", key))
			}
		}
	}
}

// Refusing a key refused lately allocates nothing: its hash is the one
// the page made the first time.
func TestRefusingAKeyAgainAllocatesNothing(t *testing.T) {
	p := New(Config{})
	d := service.Decision{Domain: "d", Rule: "d.ip", Outcome: service.Limited, Cost: 1, Key: ipKey}
	p.Observe(d)
	if a := testing.AllocsPerRun(1000, func() { p.Observe(d) }); a != 0 {
		t.Fatalf("%v allocations per refusal of a key refused lately", a)
	}
}
