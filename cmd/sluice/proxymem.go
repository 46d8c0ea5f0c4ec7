package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/memstore"
)

// memoryFlags are the proxy's -memory-max-bytes and -memory-max-keys: the
// size of its memory store, as NGINX sizes a limit_req_zone. Each is taken
// from the command line (or, for the bytes, $MEMSTORE_MAX_BYTES, as
// serve's), else from the file's memory_max_bytes and memory_max_keys,
// else memstore's default. The zero memoryFlags, unparsed, gives
// memstore's defaults.
type memoryFlags struct {
	maxBytes int64 // 0: not given
	maxKeys  int   // 0: not given
	fs       *flag.FlagSet
	envErr   envflag.Errs // $MEMSTORE_MAX_BYTES when it does not parse
}

// flags defines the two flags on fs.
func (m *memoryFlags) flags(fs *flag.FlagSet) {
	m.fs = fs
	m.envErr.SizeVar(fs, &m.maxBytes, "memory-max-bytes", "MEMSTORE_MAX_BYTES", 0,
		"the memory store's budget in bytes, or k, m or g (such as 10m), as NGINX's zone=name:10m (keys, states, sliding log entries); at it, keys are evicted (sluice_memstore_evictions_total); with Redis, the budget of -failure-mode local's store (default $MEMSTORE_MAX_BYTES, else the config's memory_max_bytes, else 256m)")
	fs.IntVar(&m.maxKeys, "memory-max-keys", 0,
		"the most keys the memory store holds, whatever their size; at it, keys are evicted (default the config's memory_max_keys, else 1000000)")
}

// given reports whether the command line or the environment sets the
// bytes.
func (m *memoryFlags) bytesGiven() bool {
	return (m.fs != nil && envflag.IsSet(m.fs, "memory-max-bytes")) || strings.TrimSpace(os.Getenv("MEMSTORE_MAX_BYTES")) != ""
}

// check refuses a malformed $MEMSTORE_MAX_BYTES and a size given as 0 or
// less.
func (m *memoryFlags) check() error {
	if len(m.envErr) > 0 {
		return errors.Join(m.envErr...)
	}
	if m.bytesGiven() && m.maxBytes <= 0 {
		return fmt.Errorf("-memory-max-bytes %d: want a positive number of bytes, such as 10m", m.maxBytes)
	}
	if m.fs != nil && envflag.IsSet(m.fs, "memory-max-keys") && m.maxKeys <= 0 {
		return fmt.Errorf("-memory-max-keys %d: want a positive number of keys", m.maxKeys)
	}
	return nil
}

// config is the memory store's Config: the flags over f's settings over
// memstore's defaults (a zero field).
func (m *memoryFlags) config(f *gateway.File) memstore.Config {
	c := memstore.Config{MaxBytes: f.MemoryMaxBytes, MaxKeys: f.MemoryMaxKeys}
	if m.bytesGiven() {
		c.MaxBytes = m.maxBytes
	}
	if m.maxKeys > 0 {
		c.MaxKeys = m.maxKeys
	}
	return c
}

// anyGiven reports whether the flags, the environment or f set a size.
func (m *memoryFlags) anyGiven(f *gateway.File) bool {
	return m.bytesGiven() || m.maxKeys > 0 || f.MemoryMaxBytes > 0 || f.MemoryMaxKeys > 0
}
