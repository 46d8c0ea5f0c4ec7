package service

// The memory of one decision. Most of the CPU a ShouldRateLimit call over
// gRPC costs on both ends of the connection is in gRPC and its allocations
// (the figure: see BENCHMARKS.md, section "Figures moved from code comments");
// the service's own share is kept small by allocating little:
//
//   - the plans, outcomes and entries of a request live in a scratch taken
//     from a pool and given back, cleared, when the response is built
//     (evaluate, for the forward-auth endpoint, keeps its own);
//   - the response and the messages it points to are allocated together,
//     in one block for a request of one descriptor;
//   - what a rule always yields (its RateLimit-Policy value, its metrics'
//     counters) is derived once per rule of the current Rules and cached
//     with them, so that SetRules drops it.

import (
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/rlheader"
)

// scratch is the working memory of one request: a plan and an outcome per
// descriptor, and the entries of all its descriptors.
type scratch struct {
	plans   []plan
	outs    []outcome
	entries []config.Entry
}

// Scratches larger than these are left to the garbage collector rather
// than pooled, so that one huge request does not pin its memory.
const (
	maxPooledDescriptors = 64
	maxPooledEntries     = 256
)

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// getScratch returns a cleared scratch from the pool.
func getScratch() *scratch { return scratchPool.Get().(*scratch) }

// release clears sc, so that it retains no request, and pools it.
func (sc *scratch) release() {
	if cap(sc.plans) > maxPooledDescriptors || cap(sc.entries) > maxPooledEntries {
		return
	}
	if len(sc.plans) == 1 && len(sc.entries) == 1 {
		// The common request, one descriptor of one entry, cleared by
		// assignment: clear of a slice with pointers is a call that
		// checks for the write barrier and zeroes through a second call,
		// three times; assignment zeroes in line (about 120 of a
		// decision's instructions: BENCHMARKS.md, "Cost per decision").
		sc.plans[0], sc.outs[0], sc.entries[0] = plan{}, outcome{}, config.Entry{}
	} else {
		clear(sc.plans)
		clear(sc.outs)
		clear(sc.entries)
	}
	sc.plans, sc.outs, sc.entries = sc.plans[:0], sc.outs[:0], sc.entries[:0]
	scratchPool.Put(sc)
}

// take returns n zero plans and n zero outcomes, and room for entries
// entries of descriptors.
func (sc *scratch) take(n, entries int) ([]plan, []outcome, []config.Entry) {
	if cap(sc.plans) < n {
		sc.plans, sc.outs = make([]plan, n), make([]outcome, n)
	}
	if cap(sc.entries) < entries {
		sc.entries = make([]config.Entry, entries)
	}
	sc.plans, sc.outs, sc.entries = sc.plans[:n], sc.outs[:n], sc.entries[:entries]
	return sc.plans, sc.outs, sc.entries
}

// statusParts are one descriptor's status and the messages it points to,
// allocated together.
type statusParts struct {
	st  pb.RateLimitResponse_DescriptorStatus
	lim pb.RateLimitResponse_RateLimit
	dur durationpb.Duration
}

// oneStatusResponse is the response to a request of one descriptor, the
// common case, in one allocation with room for the descriptor's store key
// (keyRoom bytes; a longer key is allocated apart). The key's bytes are
// written once, before it is a string, and a store that keeps a key
// beyond its call keeps a copy (memstore, relief), so the block goes when
// the response does.
type oneStatusResponse struct {
	resp  pb.RateLimitResponse
	stp   [1]*pb.RateLimitResponse_DescriptorStatus
	parts [1]statusParts
	key   [keyRoom]byte
}

// keyRoom is the longest store key oneStatusResponse holds: what fills
// its size class (416 bytes), enough for keys such as
// "edge_remote_address_203.0.113.7".
const keyRoom = 40

// newResponse returns an OK response with room for n statuses, the memory
// of those statuses, and, for one status, room for its store key (else
// nil); resp.Statuses is to be filled in.
func newResponse(n int) (*pb.RateLimitResponse, []statusParts, []byte) {
	if n == 1 {
		b := new(oneStatusResponse)
		b.resp.OverallCode = pb.RateLimitResponse_OK
		b.resp.Statuses = b.stp[:]
		return &b.resp, b.parts[:], b.key[:0]
	}
	resp := &pb.RateLimitResponse{
		OverallCode: pb.RateLimitResponse_OK,
		Statuses:    make([]*pb.RateLimitResponse_DescriptorStatus, n),
	}
	return resp, make([]statusParts, n), nil
}

// setDuration sets d to t, as durationpb.New does.
func setDuration(d *durationpb.Duration, t time.Duration) {
	ns := t.Nanoseconds()
	secs := ns / 1e9
	d.Seconds, d.Nanos = secs, int32(ns-secs*1e9)
}

// headerBlock holds the response headers of one response, at most four
// (the legacy three and Retry-After), in one allocation.
type headerBlock struct {
	ptrs [4]*corepb.HeaderValue
	vals [4]corepb.HeaderValue
	n    int
}

func (h *headerBlock) add(key, value string) {
	v := &h.vals[h.n]
	v.Key, v.Value = key, value
	h.ptrs[h.n] = v
	h.n++
}

func (h *headerBlock) list() []*corepb.HeaderValue { return h.ptrs[:h.n:h.n] }

// ruleInfo is what a Service derives from one rule of its current Rules,
// once: the header values that do not depend on the request, and the
// rule's counters.
type ruleInfo struct {
	policyHeader string            // the RateLimit-Policy value (HeadersDraft11), every limit of a list
	limitHeader  string            // the legacy Limit value (HeadersLegacy)
	ctr          *ruleCounters     // nil without metrics, or with DetailedMetric or ValueToMetric
	fail         *failsafe.Limiter // the rule's failure mode's; nil without Config.Failure
	// meta is the rule's metadata as dynamic_metadata holds it, built
	// once with Config.DynamicMetadata; shared by the responses that
	// carry it alone, which only read it.
	meta *structpb.Value
}

// maxRuleInfos bounds the cache of one Rules: a Rules that returns a new
// *config.RateLimit on every Lookup must not grow it without end. Past
// the bound, rules are served uncached.
const maxRuleInfos = 1 << 14

// rulesBox is the current Rules and the ruleInfo of each rule it has
// returned, keyed by the rule's pointer. A decision reads the infos
// through read, a map that is never written once published (one map
// lookup by pointer, no lock); a rule not yet in it is found or added
// under mu in dirty, and read is rebuilt with dirty's rules once the
// lookups that missed it are as many as its rules, so that the rebuilds
// cost O(1) per miss and the rules of a steady configuration are all in
// read after a few decisions.
type rulesBox struct {
	r    Rules
	read atomic.Pointer[map[*config.RateLimit]*ruleInfo]

	mu     sync.Mutex
	dirty  map[*config.RateLimit]*ruleInfo // the rules not in read; under mu
	misses int                             // lookups that missed read since it was rebuilt; under mu
	n      int                             // rules in read and dirty; under mu
}

// info returns r's ruleInfo, deriving it on first use; nil when the cache
// is full.
func (s *Service) info(b *rulesBox, r *config.RateLimit) *ruleInfo {
	if m := b.read.Load(); m != nil {
		if in, ok := (*m)[r]; ok {
			return in
		}
	}
	return s.infoSlow(b, r)
}

// infoSlow is info for a rule not in b.read.
func (s *Service) infoSlow(b *rulesBox, r *config.RateLimit) *ruleInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	var read map[*config.RateLimit]*ruleInfo
	if m := b.read.Load(); m != nil {
		read = *m
	}
	if in, ok := read[r]; ok { // published while this call waited for mu
		return in
	}
	in, ok := b.dirty[r]
	if !ok {
		if b.n >= maxRuleInfos {
			return nil
		}
		in = s.newRuleInfo(r)
		if b.dirty == nil {
			b.dirty = make(map[*config.RateLimit]*ruleInfo)
		}
		b.dirty[r] = in
		b.n++
	}
	b.misses++
	if b.misses >= len(read) {
		next := make(map[*config.RateLimit]*ruleInfo, len(read)+len(b.dirty))
		maps.Copy(next, read)
		maps.Copy(next, b.dirty)
		b.read.Store(&next)
		b.dirty, b.misses = nil, 0
	}
	return in
}

// newRuleInfo derives r's ruleInfo.
func (s *Service) newRuleInfo(r *config.RateLimit) *ruleInfo {
	in := &ruleInfo{}
	switch s.headers {
	case HeadersDraft11:
		in.policyHeader = string(rlheader.AppendPolicies(nil, rulePolicies(r)...))
	case HeadersLegacy:
		in.limitHeader = strconv.FormatUint(uint64(r.RequestsPerUnit), 10)
	}
	if !r.DetailedMetric && !r.ValueToMetric {
		in.ctr = s.m.counters(r.FullKey)
	}
	if s.fb != nil {
		in.fail = s.fb.limiterFor(r)
	}
	if s.dynMeta && r.Metadata != nil {
		if st, err := structpb.NewStruct(r.Metadata); err == nil {
			in.meta = structpb.NewStructValue(st)
		}
	}
	return in
}
