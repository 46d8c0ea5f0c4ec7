package rlqs

import (
	"context"
	"net"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Defaults of Config's bounds.
const (
	// DefaultMaxBytes is Config.MaxBytes's default: 64 MiB, about 6,000
	// buckets of the largest ids (8 pairs of 256-byte keys and values) or
	// 40,000 of small ones.
	DefaultMaxBytes = 64 << 20
	// DefaultMaxStreams is Config.MaxStreams's default.
	DefaultMaxStreams = 4096
	// DefaultMaxStreamsPerConn is Config.MaxStreamsPerConn's default: an
	// Envoy opens one stream per rate_limit_quota filter config.
	DefaultMaxStreamsPerConn = 16
)

// What the budget counts, in bytes, fitted to the heap measured
// (BenchmarkMemoryPerBucket; BENCHMARKS.md) from above: a stream's fixed
// part (its state, its two goroutines' stacks, gRPC's buffers of its
// messages); a bucket's (its state and strategy) and each pair's of its id
// (the bytes of its key and value, and the map's entry); the bucket's
// canonical name (the stream's map key), and with a rule, the rule's part
// (the records of the store, the metrics and the demand cache) and the
// store's name of the bucket. Names count a quarter more than their
// length, for the allocator's size classes.
const (
	streamBytes = 24 << 10
	bucketBytes = 1 << 10
	pairBytes   = 64
	ruleBytes   = 2 << 10
)

// bucketCost returns the bytes the budget counts for a bucket of pairs
// whose canonical name is id and whose store name is key ("": no rule).
func bucketCost(pairs map[string]string, id, key string) int64 {
	n := int64(bucketBytes + len(id) + len(id)/4)
	for k, v := range pairs {
		n += pairBytes + int64(len(k)+len(v))
	}
	if key != "" {
		n += int64(ruleBytes + len(key) + len(key)/4)
	}
	return n
}

// budget bounds the memory of all streams and buckets (bytes accounted
// with bucketCost and streamBytes) and the number of streams, in all and
// per connection.
type budget struct {
	max                   int64
	maxStreams, maxOnConn int
	used                  atomic.Int64

	mu      sync.Mutex
	streams int
	onConn  map[string]int // streams per connection, by connKey

	refusedStreams, refusedBuckets atomic.Int64
}

func newBudget(maxBytes int64, maxStreams, maxOnConn int) *budget {
	return &budget{max: maxBytes, maxStreams: maxStreams, maxOnConn: maxOnConn, onConn: make(map[string]int)}
}

// take counts n more bytes if they fit in the budget.
func (b *budget) take(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// release counts n bytes less.
func (b *budget) release(n int64) { b.used.Add(-n) }

// openStream admits a stream of the connection conn ("": not counted per
// connection), or returns the ResourceExhausted status that refuses it.
// An admitted stream calls closeStream when it ends.
func (b *budget) openStream(conn string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var err error
	switch {
	case b.streams >= b.maxStreams:
		err = status.Errorf(codes.ResourceExhausted, "rlqs: %d streams open, the most the server allows; stream refused, retry later", b.streams)
	case conn != "" && b.onConn[conn] >= b.maxOnConn:
		err = status.Errorf(codes.ResourceExhausted, "rlqs: %d streams open on this connection, the most one connection may have; stream refused", b.onConn[conn])
	case !b.take(streamBytes):
		err = status.Errorf(codes.ResourceExhausted, "rlqs: the server's memory budget for streams and buckets (%d bytes) is in use; stream refused, retry later", b.max)
	}
	if err != nil {
		b.refusedStreams.Add(1)
		return err
	}
	b.streams++
	if conn != "" {
		b.onConn[conn]++
	}
	return nil
}

// closeStream ends a stream admitted by openStream.
func (b *budget) closeStream(conn string) {
	b.release(streamBytes)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.streams--
	if conn != "" {
		if b.onConn[conn]--; b.onConn[conn] <= 0 {
			delete(b.onConn, conn)
		}
	}
}

// connKey names the gRPC connection of a stream: its TCP peer's address
// and port (and the local address: one per connection while it is open),
// or "" for a stream without a TCP peer (a Unix socket, a test's pipe),
// which the per-connection cap does not count.
func connKey(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	if _, tcp := p.Addr.(*net.TCPAddr); !tcp {
		return ""
	}
	if p.LocalAddr != nil {
		return p.Addr.String() + ">" + p.LocalAddr.String()
	}
	return p.Addr.String()
}
