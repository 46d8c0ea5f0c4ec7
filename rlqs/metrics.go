package rlqs

import (
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/promreg"
)

// MaxBucketSeries is the most buckets the metrics list; the rest are
// counted in sluice_rlqs_buckets_unlisted.
const MaxBucketSeries = 1000

// bucketStats is what this replica knows of each bucket: per client, the
// demand it reported and the rate it was assigned.
type bucketStats struct {
	mu      sync.Mutex
	buckets map[string]*bucketStat

	cache map[string]*fetch // the store's demands per bucket (see demands)

	usage, assigned, clients, unlisted *prometheus.Desc

	mem                                   *budget
	memUsed, memMax, streams, refusedDesc *prometheus.Desc
}

// fetch is one read of a bucket's demands from the store; done closes
// when m and err are set.
type fetch struct {
	at   time.Time
	done chan struct{}
	m    map[string]float64
	err  error
}

// maxDemandAge is how long a replica reuses a bucket's demands read from
// the store: the reports of a bucket's clients within it share one read.
const maxDemandAge = 500 * time.Millisecond

// recountAge is the age of a replica's last read of a bucket beyond which
// a stream's tick reads it again to see clients come and go on other
// replicas: at most one read per bucket and replica every second.
const recountAge = 1 * time.Second

// demands returns the bucket's demands read less than maxAge before now
// (maxDemandAge for a report, recountAge for a tick), unless force, or
// reads them with read: one read at a time per bucket, which the callers
// that come meanwhile wait for. fresh reports whether the map was read for
// this call or while it waited. The map must not be modified.
func (s *bucketStats) demands(key string, now time.Time, maxAge time.Duration, force bool, read func() (map[string]float64, error)) (m map[string]float64, fresh bool, err error) {
	s.mu.Lock()
	f := s.cache[key]
	if f != nil {
		select {
		case <-f.done:
			if force || f.err != nil || now.Sub(f.at) >= maxAge || now.Before(f.at) {
				f = nil
			}
		default: // in flight: wait for it
			s.mu.Unlock()
			<-f.done
			return f.m, true, f.err
		}
	}
	if f != nil {
		s.mu.Unlock()
		return f.m, false, nil
	}
	f = &fetch{at: now, done: make(chan struct{})}
	s.cache[key] = f
	s.mu.Unlock()
	f.m, f.err = read()
	close(f.done)
	return f.m, true, f.err
}

type bucketStat struct {
	domain  string
	clients map[string][2]float64 // demand, assigned
	all     int                   // clients in the store, all replicas
	sum     float64               // their demands summed, at the last read
	gen     uint64                // bumped when all or sum changes
	nudge   map[string]chan<- struct{}
}

func newBucketStats(mem *budget) *bucketStats {
	l := []string{"domain", "bucket"}
	return &bucketStats{
		mem:         mem,
		memUsed:     prometheus.NewDesc("sluice_rlqs_memory_bytes", "Bytes of the RLQS memory budget in use: the streams and their buckets, as accounted (see docs/rlqs.md).", nil, nil),
		memMax:      prometheus.NewDesc("sluice_rlqs_memory_max_bytes", "The RLQS memory budget (-rlqs-max-bytes).", nil, nil),
		streams:     prometheus.NewDesc("sluice_rlqs_streams", "RLQS streams open.", nil, nil),
		refusedDesc: prometheus.NewDesc("sluice_rlqs_refused_total", "Streams and buckets refused at the memory budget or a stream cap (what: stream or bucket).", []string{"what"}, nil),
		buckets:     make(map[string]*bucketStat),
		cache:       make(map[string]*fetch),
		usage:       prometheus.NewDesc("sluice_rlqs_bucket_reported_requests_per_second", "Requests per second (allowed and denied) that this replica's clients last reported for the bucket.", l, nil),
		assigned:    prometheus.NewDesc("sluice_rlqs_bucket_assigned_requests_per_second", "Requests per second that this replica last assigned to its clients of the bucket, summed.", l, nil),
		clients:     prometheus.NewDesc("sluice_rlqs_bucket_clients", "Clients of the bucket in the store, all replicas, at this replica's last assignment.", l, nil),
		unlisted:    prometheus.NewDesc("sluice_rlqs_buckets_unlisted", "Buckets beyond the first 1000, not listed by bucket.", nil, nil),
	}
}

func (s *bucketStats) register(reg prometheus.Registerer) error {
	_, err := promreg.Register[prometheus.Collector](reg, s)
	return err
}

// set records a client's demand and assigned rate, and the number of
// clients in the store and their demands summed (-1: not known, as from a
// reused read); it returns
// the bucket's generation, which changes with that number.
// A change of the client's demand by more than 5% also changes the
// generation. A change of the number, or of the sum by more than 5%,
// nudges the bucket's other clients on this replica (a non-blocking send
// on their nudge channels) to divide again.
func (s *bucketStats) set(domain, key, client string, nudge chan<- struct{}, demand, assigned float64, all int, sum float64) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bucket(domain, key)
	prev, had := b.clients[client]
	b.clients[client] = [2]float64{demand, assigned}
	b.nudge[client] = nudge
	if had && !closeRates(prev[0], demand) && (all < 0 || b.all == all) {
		b.gen++ // the others divide again at their next tick
	}
	if all >= 0 {
		b.observe(all, sum, client)
	}
	return b.gen
}

// count records the bucket's number of clients and their demands summed
// as a read of the store found them: a change of the number, or of the sum
// by more than 5% (a client's demand moved on another replica), changes
// the generation and nudges the bucket's clients on this replica.
func (s *bucketStats) count(key string, all int, sum float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.buckets[key]; b != nil {
		b.observe(all, sum, "")
	}
}

// observe records what a read of the store found (see count); a change
// nudges the bucket's clients on this replica but except. The caller
// holds the stats' lock.
func (b *bucketStat) observe(all int, sum float64, except string) {
	if b.all == all && closeRates(b.sum, sum) {
		return
	}
	b.sum = sum
	b.recount(all, except)
}

// bucket returns the bucket of key, made for domain if it is new. The
// caller holds s.mu.
func (s *bucketStats) bucket(domain, key string) *bucketStat {
	b := s.buckets[key]
	if b == nil {
		b = &bucketStat{domain: domain, clients: make(map[string][2]float64), nudge: make(map[string]chan<- struct{})}
		s.buckets[key] = b
	}
	return b
}

// recount records a new number of clients in the store: another generation,
// and a non-blocking nudge to each client on this replica but the one named
// by except ("" nudges them all), so that they divide again.
func (b *bucketStat) recount(all int, except string) {
	b.all = all
	b.gen++
	for c, ch := range b.nudge {
		if except != "" && c == except {
			continue
		}
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// watch registers a client's nudge channel on the bucket before it reads
// the store, and returns the bucket's generation then: a change after it,
// by any client, shows as another generation.
func (s *bucketStats) watch(domain, key, client string, nudge chan<- struct{}) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bucket(domain, key)
	if _, ok := b.clients[client]; !ok {
		b.clients[client] = [2]float64{}
	}
	b.nudge[client] = nudge
	return b.gen
}

// local returns the number of the bucket's clients on this replica.
func (s *bucketStats) local(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.buckets[key]; b != nil {
		return len(b.clients)
	}
	return 0
}

// generation returns the bucket's generation (see set).
func (s *bucketStats) generation(key string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.buckets[key]; b != nil {
		return b.gen
	}
	return 0
}

// remove forgets a client of a bucket.
func (s *bucketStats) remove(key, client string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.buckets[key]; b != nil {
		delete(b.clients, client)
		delete(b.nudge, client)
		if len(b.clients) == 0 {
			delete(s.buckets, key)
		}
	}
	delete(s.cache, key) // the next report reads the store
}

// Describe implements prometheus.Collector.
func (s *bucketStats) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.usage
	ch <- s.assigned
	ch <- s.clients
	ch <- s.unlisted
	ch <- s.memUsed
	ch <- s.memMax
	ch <- s.streams
	ch <- s.refusedDesc
}

// Collect implements prometheus.Collector.
func (s *bucketStats) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for key, b := range s.buckets {
		if n == MaxBucketSeries {
			break
		}
		n++
		var use, got float64
		for _, v := range b.clients {
			use += v[0]
			got += v[1]
		}
		name := strings.TrimPrefix(key, b.domain)
		ch <- prometheus.MustNewConstMetric(s.usage, prometheus.GaugeValue, use, b.domain, name)
		ch <- prometheus.MustNewConstMetric(s.assigned, prometheus.GaugeValue, got, b.domain, name)
		ch <- prometheus.MustNewConstMetric(s.clients, prometheus.GaugeValue, float64(b.all), b.domain, name)
	}
	ch <- prometheus.MustNewConstMetric(s.unlisted, prometheus.GaugeValue, float64(len(s.buckets)-n))
	ch <- prometheus.MustNewConstMetric(s.memUsed, prometheus.GaugeValue, float64(s.mem.used.Load()))
	ch <- prometheus.MustNewConstMetric(s.memMax, prometheus.GaugeValue, float64(s.mem.max))
	s.mem.mu.Lock()
	open := s.mem.streams
	s.mem.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(s.streams, prometheus.GaugeValue, float64(open))
	ch <- prometheus.MustNewConstMetric(s.refusedDesc, prometheus.CounterValue, float64(s.mem.refusedStreams.Load()), "stream")
	ch <- prometheus.MustNewConstMetric(s.refusedDesc, prometheus.CounterValue, float64(s.mem.refusedBuckets.Load()), "bucket")
}
