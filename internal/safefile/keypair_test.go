package safefile_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sluicehq/sluice/internal/safefile"
	"github.com/sluicehq/sluice/internal/testpki"
)

// ReadKeyPair pairs a certificate with its key, refuses a FIFO at once
// rather than waiting for a writer, and names both files when they do not
// pair.
func TestReadKeyPairPairsRefusesFIFOsAndNamesBothFiles(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ca")
	cert, key := ca.Issue(t, "server", false, "localhost").WriteFiles(t, dir, "server")
	otherCert, _ := ca.Issue(t, "other", false, "localhost").WriteFiles(t, dir, "other")
	ctx := context.Background()
	if pair, err := safefile.ReadKeyPair(ctx, cert, key); err != nil || len(pair.Certificate) == 0 {
		t.Fatalf("ReadKeyPair: %v, %d certificates", err, len(pair.Certificate))
	}
	fifo := filepath.Join(dir, "key.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := safefile.ReadKeyPair(ctx, cert, fifo); !errors.Is(err, safefile.ErrNotRegular) {
		t.Errorf("a FIFO key: %v, want ErrNotRegular", err)
	}
	_, err := safefile.ReadKeyPair(ctx, otherCert, key)
	if err == nil || !strings.Contains(err.Error(), otherCert) || !strings.Contains(err.Error(), key) {
		t.Errorf("a key of another certificate: %v, want an error naming both files", err)
	}
}
