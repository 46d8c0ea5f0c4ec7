// Package safefile reads configuration files as a server must: only regular
// files, only up to a size cap, and never past a deadline.
//
// A config directory is input like any other. A symlink to /dev/zero would
// make os.ReadFile read forever, a FIFO would block os.Open until a writer
// appears, and a 10 GB file would be read into memory whole. Read refuses all
// three: it checks the file's type before opening it, opens it without
// blocking, checks the type again on the open descriptor (the path may have
// been swapped in between), reads at most limit+1 bytes, and gives up when the
// context ends.
//
// Shipped: built into the sluice binary through the packages that import
// it; it imports no test-only package (internal/archtest holds that).
package safefile

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// DefaultLimit is the size cap used by callers that have no better one:
// 4 MiB, about forty times the largest rate limit config we have seen.
const DefaultLimit = 4 << 20

// ErrNotRegular is returned (wrapped) for a path that is not a regular file
// after following symlinks: a directory, FIFO, socket or device.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is returned (wrapped) for a file larger than the limit; the
// error's text gives the file's size and the limit.
var ErrTooLarge = errors.New("file too large")

// Read returns the contents of the regular file at path, following symlinks.
// It refuses, without blocking, anything that is not a regular file
// (errors.Is(err, ErrNotRegular)), refuses a file over limit bytes
// (errors.Is(err, ErrTooLarge)), and returns ctx's error if ctx ends first. A
// limit ≤ 0 means DefaultLimit. Errors name the path.
func Read(ctx context.Context, path string, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := check(path, fi, limit); err != nil {
		return nil, err
	}
	// O_NONBLOCK: if the path became a FIFO since Stat, open returns at
	// once instead of waiting for a writer; the fstat below then refuses it.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err = f.Stat()
	if err == nil {
		err = check(path, fi, limit)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(f, limit+1))
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		f.Close()
		if r.err != nil {
			return nil, fmt.Errorf("%s: %w", path, r.err)
		}
		if int64(len(r.b)) > limit {
			// The file grew after the size check.
			return nil, fmt.Errorf("%s: more than %d bytes (limit %d): %w", path, limit, limit, ErrTooLarge)
		}
		return r.b, nil
	case <-ctx.Done():
		// Closing the file ends a read on most file systems; the
		// goroutine then exits and its result is dropped.
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, ctx.Err())
	}
}

func check(path string, fi fs.FileInfo, limit int64) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: %s (%s): %w", path, kind(fi.Mode()), fi.Mode().Type(), ErrNotRegular)
	}
	if fi.Size() > limit {
		return fmt.Errorf("%s: %d bytes, over the limit of %d: %w", path, fi.Size(), limit, ErrTooLarge)
	}
	return nil
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	default:
		return "not a regular file"
	}
}

// MaxPEMBytes caps each certificate, key or CA file read with
// ReadKeyPair, and is the limit to pass to Read for a CA bundle: a PEM
// bundle of a few hundred certificates is well under it.
const MaxPEMBytes = 1 << 20

// ReadKeyPair reads a PEM certificate (chain) and its key with Read, each a
// regular file of at most MaxPEMBytes, and pairs them. Errors name the file
// that could not be read, or both when they do not pair.
func ReadKeyPair(ctx context.Context, cert, key string) (tls.Certificate, error) {
	certPEM, err := Read(ctx, cert, MaxPEMBytes)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := Read(ctx, key, MaxPEMBytes)
	if err != nil {
		return tls.Certificate{}, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s, %s: %w", cert, key, err)
	}
	return pair, nil
}
