package rlqs

import (
	"context"
	"sync"
	"time"
)

// Store keeps the latest demand of every client of every bucket, so that
// Sluice replicas that serve different Envoys divide one limit between all
// of them. Implementations: MemoryStore (one process) and
// redisstore.RLQSStore (replicas sharing Redis). Its methods use only
// standard types so that a store package implements it without importing
// this one. They must be safe for concurrent use.
type Store interface {
	// Report records client's demand of bucket (requests per second) at
	// now, to count until now+ttl, as written by writer (a stream's
	// token, unique across replicas; empty for none).
	Report(ctx context.Context, bucket, client, writer string, demand float64, now time.Time, ttl time.Duration) error
	// Demands returns the demand of every client of bucket whose record
	// counts at now, and may drop the others. The server calls it at most
	// about twice a second per bucket (see Server), so that its cost, which
	// grows with the clients of the bucket, is not paid on every report.
	Demands(ctx context.Context, bucket string, now time.Time) (map[string]float64, error)
	// Forget removes client's record of bucket if writer wrote it last,
	// and leaves it when another writer has written it since (a named
	// client's newer stream, on another replica too); with writer empty,
	// or a record whose writer is not known, it removes the record
	// whoever wrote it.
	Forget(ctx context.Context, bucket, client, writer string) error
}

// MemoryStore is a Store in process memory. The zero value is ready to use.
type MemoryStore struct {
	mu      sync.Mutex
	buckets map[string]map[string]record
}

type record struct {
	demand  float64
	expires time.Time
	writer  string
}

var _ Store = (*MemoryStore)(nil)

// Report implements Store.
func (m *MemoryStore) Report(_ context.Context, bucket, client, writer string, demand float64, now time.Time, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buckets == nil {
		m.buckets = make(map[string]map[string]record)
	}
	b := m.buckets[bucket]
	if b == nil {
		b = make(map[string]record)
		m.buckets[bucket] = b
	}
	b[client] = record{demand, now.Add(ttl), writer}
	return nil
}

// Demands implements Store; it drops the expired records of bucket.
func (m *MemoryStore) Demands(_ context.Context, bucket string, now time.Time) (map[string]float64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.buckets[bucket]
	out := make(map[string]float64, len(b))
	for c, r := range b {
		if !now.Before(r.expires) {
			delete(b, c)
			continue
		}
		out[c] = r.demand
	}
	if len(b) == 0 {
		delete(m.buckets, bucket)
	}
	return out, nil
}

// Forget implements Store.
func (m *MemoryStore) Forget(_ context.Context, bucket, client, writer string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := m.buckets[bucket]; b != nil {
		if r, ok := b[client]; ok && writer != "" && r.writer != "" && r.writer != writer {
			return nil // written since by another stream, which holds it now
		}
		delete(b, client)
		if len(b) == 0 {
			delete(m.buckets, bucket)
		}
	}
	return nil
}
