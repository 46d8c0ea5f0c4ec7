package safefile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestReadReturnsARegularFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.yaml")
	if err := os.WriteFile(p, []byte("domain: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := Read(context.Background(), p, 0)
	if err != nil || string(b) != "domain: x\n" {
		t.Fatalf("Read = %q, %v", b, err)
	}
}

func TestReadFollowsSymlinksToRegularFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "data.yaml")
	if err := os.WriteFile(p, []byte("x: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := filepath.Join(dir, "link.yaml")
	if err := os.Symlink(p, l); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(context.Background(), l, 0); err != nil || string(b) != "x: 1\n" {
		t.Fatalf("Read(symlink) = %q, %v", b, err)
	}
}

func TestReadRefusesDevicesFIFOsAndDirectoriesWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	zero := filepath.Join(dir, "zero.yaml")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "dir.yaml")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{zero, fifo, sub} {
		_, err := Read(context.Background(), p, 0)
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("Read(%s) error = %v, want ErrNotRegular", filepath.Base(p), err)
		}
		if err != nil && !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not name the file", err)
		}
	}
}

func TestReadRefusesAFileOverTheLimitWithItsSize(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(p, make([]byte, 1001), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Read(context.Background(), p, 1000)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "1001 bytes") {
		t.Fatalf("Read = %v, want ErrTooLarge naming 1001 bytes", err)
	}
	if _, err := Read(context.Background(), p, 1001); err != nil {
		t.Fatalf("Read at exactly the limit = %v", err)
	}
}

func TestReadStopsWhenTheContextIsDone(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.yaml")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Read(ctx, p, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read with a done context = %v, want context.Canceled", err)
	}
}
