//go:build unix

package adminclient

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// sluice admin reads -cert and -key as every TLS file is read (a regular
// file, a bounded size): a FIFO given as the client key is refused at once
// rather than blocking the command for ever on an open with no writer.
func TestAdminClientRefusesAKeyThatIsNotAFile(t *testing.T) {
	t.Parallel() // waits on a timer; touches no process-wide state
	dir := t.TempDir()
	fifo := filepath.Join(dir, "key.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO:", err)
	}
	c := &Client{Cert: fifo, Key: fifo}
	done := make(chan error, 1)
	go func() {
		_, err := c.httpClient(context.Background())
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a FIFO as -cert and -key made a client")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading a FIFO as -cert did not return within 10 s")
	}
}
