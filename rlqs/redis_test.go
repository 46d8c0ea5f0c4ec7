package rlqs_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/rlqs"
)

// redisRLQS returns an RLQSStore on a dedicated redis-server.
func redisRLQS(t *testing.T) *redisstore.RLQSStore {
	t.Helper()
	srv := redistest.StartServer(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.Do(t.Context(), c.B().Ping().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	return redisstore.NewRLQSStore(c, "rlqstest")
}

var _ rlqs.Store = (*redisstore.RLQSStore)(nil)

// outside runs a Store's calls on goroutines started outside the synctest
// bubble, over channels made outside it, so that the Redis client's own
// goroutines stay out of the bubble; fake time stands still while a call
// waits for Redis.
type outside struct {
	st   rlqs.Store
	idle chan *worker
}

type worker struct {
	job   chan func()
	reply chan struct{}
}

func newOutside(t *testing.T, st rlqs.Store, n int) *outside {
	o := &outside{st: st, idle: make(chan *worker, n)}
	for range n {
		w := &worker{job: make(chan func()), reply: make(chan struct{})}
		go func() {
			for f := range w.job {
				f()
				w.reply <- struct{}{}
			}
		}()
		o.idle <- w
	}
	t.Cleanup(func() {
		for range n {
			close((<-o.idle).job)
		}
	})
	return o
}

func (o *outside) run(f func()) {
	w := <-o.idle
	w.job <- f
	<-w.reply
	o.idle <- w
}

func (o *outside) Report(ctx context.Context, bucket, client, writer string, demand float64, now time.Time, ttl time.Duration) (err error) {
	o.run(func() { err = o.st.Report(context.WithoutCancel(ctx), bucket, client, writer, demand, now, ttl) })
	return err
}

func (o *outside) Demands(ctx context.Context, bucket string, now time.Time) (m map[string]float64, err error) {
	o.run(func() { m, err = o.st.Demands(context.WithoutCancel(ctx), bucket, now) })
	return m, err
}

func (o *outside) Forget(ctx context.Context, bucket, client, writer string) (err error) {
	o.run(func() { err = o.st.Forget(context.WithoutCancel(ctx), bucket, client, writer) })
	return err
}

func TestTenEnvoysOnTwoReplicasSharingRedisAdmitTheGlobalLimit(t *testing.T) {
	st := newOutside(t, redisRLQS(t), 4)
	synctest.Test(t, func(t *testing.T) {
		a, b := newServer(t, st), newServer(t, st)
		simulate(t, func(i int) *rlqs.Server { return []*rlqs.Server{a, b}[i%2] })
		shutdown(t, a)
		shutdown(t, b)
	})
}

func TestStoreRecordsExpireOnTheCallersClock(t *testing.T) {
	st := redisRLQS(t)
	ctx := context.Background()
	now := time.Unix(1_000_000, 0)
	for _, st := range []rlqs.Store{st, &rlqs.MemoryStore{}} {
		if err := st.Report(ctx, "b", "old", "", 5, now, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := st.Report(ctx, "b", "new", "", 7, now.Add(9*time.Second), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		got, err := st.Demands(ctx, "b", now.Add(9*time.Second))
		if err != nil || len(got) != 2 || got["old"] != 5 || got["new"] != 7 {
			t.Fatalf("%T at 9 s: %v, %v; want both records", st, got, err)
		}
		got, _ = st.Demands(ctx, "b", now.Add(10*time.Second))
		if len(got) != 1 || got["new"] != 7 {
			t.Errorf("%T at 10 s: %v, want the old record expired", st, got)
		}
		if err := st.Forget(ctx, "b", "new", ""); err != nil {
			t.Fatal(err)
		}
		if got, _ = st.Demands(ctx, "b", now.Add(11*time.Second)); len(got) != 0 {
			t.Errorf("%T after Forget: %v, want none", st, got)
		}
	}
}

// Forget with a writer removes a record only while that writer wrote it
// last: a record written since by another (a named client's stream on
// another replica) stays; with no writer, or for a record written without
// one, it removes the record whoever wrote it. Demands never lists a
// writer as a client.
func TestStoreForgetLeavesARecordAnotherWriterWroteSince(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_000_000, 0)
	for _, st := range []rlqs.Store{redisRLQS(t), &rlqs.MemoryStore{}} {
		if err := st.Report(ctx, "b", "x", "a/1", 5, now, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := st.Report(ctx, "b", "x", "b/1", 6, now, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := st.Forget(ctx, "b", "x", "a/1"); err != nil {
			t.Fatal(err)
		}
		if got, _ := st.Demands(ctx, "b", now); len(got) != 1 || got["x"] != 6 {
			t.Errorf("%T after the old writer's Forget: %v, want x's record of 6 kept", st, got)
		}
		if err := st.Forget(ctx, "b", "x", "b/1"); err != nil {
			t.Fatal(err)
		}
		if got, _ := st.Demands(ctx, "b", now); len(got) != 0 {
			t.Errorf("%T after its writer's Forget: %v, want none", st, got)
		}
		st.Report(ctx, "b", "y", "", 1, now, 10*time.Second)
		st.Report(ctx, "b", "z", "c/1", 1, now, 10*time.Second)
		st.Forget(ctx, "b", "y", "a/1")
		st.Forget(ctx, "b", "z", "")
		if got, _ := st.Demands(ctx, "b", now); len(got) != 0 {
			t.Errorf("%T after Forget of a record without a writer and without one: %v, want none", st, got)
		}
	}
}
