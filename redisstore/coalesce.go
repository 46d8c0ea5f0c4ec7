package redisstore

// Coalescing (Config.CoalesceWait): the decisions that concurrent callers
// make on keys of one hash slot, under one algorithm, go to Redis together
// as one EVALSHA of scripts/batch.lua, which makes each of them exactly as
// the algorithm's own script would, one after the other, in one atomic
// call. What that saves is per call, on both sides: Redis's cost of
// starting a script, rueidis's of writing a command and reading its reply.
//
// A decision whose lane (its algorithm and slot) has nothing with Redis
// and no batch open goes alone at once, in its caller's goroutine, as it
// would without coalescing. Otherwise it joins the lane's open batch (or
// opens one), which leaves when it is full (maxBatch decisions or
// maxBatchKeyBytes of keys), when nothing else of its lane is with Redis
// any more, or when CoalesceWait has passed since it opened, whichever
// comes first: no decision waits longer than CoalesceWait before it is
// sent.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
)

const (
	// maxBatch is the most decisions in one script call.
	maxBatch = 64
	// maxBatchKeyBytes closes a batch once its keys hold this many bytes,
	// so that a batch's memory and its script's work stay bounded whatever
	// the keys' lengths.
	maxBatchKeyBytes = 16 << 10
	// keptWorkers is the most goroutines a store keeps waiting for batches
	// to send; more batches at once get a goroutine each, which ends with
	// its batch.
	keptWorkers = 16
	// closeWait is how long close waits for Redis to answer the batches
	// on their way before it gives up on them (their decisions fail): as
	// long as rueidis's Close waits for a silent connection, so that a
	// Redis that hangs holds a store's Close a second longer with
	// coalescing, not for the connection's reply timeout (Config.Timeout).
	closeWait = time.Second
)

// errClosed is the error of a decision made after Close.
var errClosed = errors.New("redisstore: the store is closed")

// batchScripts holds the batch script of each script of algorithms, in
// its order: scripts/batch.lua around the algorithm's script.
var batchScripts = func() []*rueidis.Lua {
	out := make([]*rueidis.Lua, len(algorithms))
	for a := range algorithms {
		out[a] = rueidis.NewLuaScript(batchScript(sluice.Algorithm(a)))
	}
	return out
}()

// batchScript returns the text of a's batch script: batch.lua with
// prelude.lua's helpers (above its marker line --DECISION--) defined once,
// before the loop, and the rest of prelude.lua then a's script as the body
// of decide, run per decision.
func batchScript(a sluice.Algorithm) string {
	helpers, decision, ok := strings.Cut(mustRead("prelude.lua"), "\n--DECISION--\n")
	if !ok {
		panic("redisstore: prelude.lua has no --DECISION-- line") // a build defect, caught by every test
	}
	body := decision + "\n" + mustRead(scriptFile(a))
	s := strings.Replace(mustRead("batch.lua"), "\n--PRELUDE--\n", "\n"+helpers+"\n", 1)
	return strings.Replace(s, "\n--DECIDE--\n", "\n"+body+"\n", 1)
}

// coalescer gathers a store's concurrent decisions into batches. Its zero
// value is not usable: see newCoalescer.
type coalescer struct {
	wait    time.Duration
	cluster bool // keys of one batch must then share a hash slot
	// call sends a batch and sets each of its live entries' outcome:
	// callRedis, or a fake in tests of the waiting.
	call func(b *batch)
	// client makes the decisions that go alone; nil in tests of the
	// waiting, which set fakeAlone instead (given the decision's key, so
	// that no argument of do escapes to the heap).
	client    rueidis.Client
	fakeAlone func(ctx context.Context, key string) (sluice.Result, error)
	// calls is the context of the batches' calls to Redis (no caller's:
	// see callRedis), which close ends closeWait after it begins.
	calls    context.Context
	endCalls context.CancelFunc

	mu      sync.Mutex
	lanes   map[uint32]*lane // by slot and algorithm
	closed  bool
	workers int // kept workers started
	work    chan *batch
	quit    chan struct{}
	wg      sync.WaitGroup // batches not done, kept workers running
	pool    sync.Pool      // of *batch
}

// lane is the batches of one algorithm on one hash slot, of the
// decisions whose key is seeded from another layout's or of those whose
// key is not (see seedKind).
type lane struct {
	open *batch // the batch decisions join; nil when none
	busy int    // calls sent and not answered yet, batches and lone decisions
}

// entry is one decision in a batch.
type entry struct {
	ctx        context.Context
	key0, key1 int // its key: batch.keyBuf[key0:key1]
	key2       int // its predecessor's key, batch.keyBuf[key1:key2], if the batch's script has one
	arg0, arg1 int // its arguments: batch.argBuf[arg0:arg1]
	res        sluice.Result
	err        error
	ready      chan struct{} // one token once res and err are set; reused
}

// batch is up to maxBatch decisions sent as one script call.
type batch struct {
	lane    *lane
	alg     sluice.Algorithm
	noSeed  bool // its decisions' keys are not seeded: no predecessor's key
	stride  int  // arguments per decision
	n       int  // entries used
	entries [maxBatch]entry
	keyBuf  []byte
	argBuf  []string
	keys    []string      // of the live entries, built when sent
	argv    []string      // the script's arguments, built when sent
	live    []int         // the entries sent, in the order of keys
	start   chan struct{} // a token: leave now (full, or the lane idle)
	refs    atomic.Int32  // the sender and each entry's caller
	replied bool          // Redis answered: its memory may be reused
}

// newCoalescer returns a coalescer that sends its batches over client.
func newCoalescer(client rueidis.Client, wait time.Duration) *coalescer {
	cluster := client.Mode() == rueidis.ClientModeCluster
	c := newCoalescerCall(wait, cluster, nil)
	c.call = func(b *batch) { callRedis(c.calls, client, b) }
	c.client = client
	return c
}

// newCoalescerCall returns a coalescer that sends its batches with call.
func newCoalescerCall(wait time.Duration, cluster bool, call func(b *batch)) *coalescer {
	calls, endCalls := context.WithCancel(context.Background())
	return &coalescer{
		wait:     wait,
		cluster:  cluster,
		call:     call,
		calls:    calls,
		endCalls: endCalls,
		lanes:    make(map[uint32]*lane),
		work:     make(chan *batch),
		quit:     make(chan struct{}),
	}
}

// close makes later decisions fail and waits until every batch is answered
// and every worker gone, for up to closeWait. Then it gives up on the
// calls still with Redis (their decisions fail, errClosed) and returns:
// a call that rueidis is reading without a deadline ends when the
// client closes (rueidis's Close ends a silent connection after a
// second), its worker with it.
func (c *coalescer) close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.quit)
	}
	c.mu.Unlock()
	done := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(done)
	}()
	giveUp := time.NewTimer(closeWait)
	defer giveUp.Stop()
	select {
	case <-done:
	case <-giveUp.C:
	}
	c.endCalls()
}

// do makes one decision of algorithm alg with args on the key that is the
// concatenation of parts, in a batch. A caller whose ctx ends first gets
// its error; its decision is still made if its batch had left by then, and
// dropped if not.
func (c *coalescer) do(ctx context.Context, alg sluice.Algorithm, args []string, parts ...string) (sluice.Result, error) {
	var slot uint16
	if c.cluster {
		slot = keySlot(parts)
	}
	// A decision whose key the script may not seed from another layout's
	// (see seedKind) has one key, not two: it goes in a lane of its own,
	// so that every decision of a batch has as many keys (batch.lua).
	noSeed := predecessor(alg) != "" && seedKind(predecessor(alg), parts) == ""
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return sluice.Result{}, errClosed
	}
	l := c.lane(slot, alg, noSeed)
	if l.open == nil && l.busy == 0 {
		l.busy++
		c.mu.Unlock()
		r, err := c.alone(ctx, alg, args, parts)
		c.answered(l)
		return r, err
	}
	b, first := l.open, false
	if b == nil || b.stride != len(args) {
		b, first = c.newBatch(l, alg, len(args)), true
		b.noSeed = noSeed
		l.open = b
	}
	e := b.add(ctx, args, parts)
	full := b.n == maxBatch || len(b.keyBuf) >= maxBatchKeyBytes
	if full {
		l.open = nil
	}
	c.mu.Unlock()
	if full {
		b.leave()
	}
	if first {
		c.dispatch(b)
	}
	select {
	case <-e.ready:
		r, err := e.res, e.err
		c.release(b)
		return r, err
	case <-ctx.Done():
		c.release(b)
		return sluice.Result{}, fmt.Errorf("redisstore: %w", ctx.Err())
	}
}

// alone makes one decision in a call of its own, with the caller's ctx.
func (c *coalescer) alone(ctx context.Context, alg sluice.Algorithm, args []string, parts []string) (sluice.Result, error) {
	if c.client == nil {
		return c.fakeAlone(ctx, strings.Join(parts, ""))
	}
	return decode(execOnKeys(ctx, c.client, scripts[alg], args, predecessor(alg), parts...))
}

// answered counts a call of lane l as answered, and lets the lane's open
// batch leave if nothing else of the lane is with Redis now.
func (c *coalescer) answered(l *lane) {
	c.mu.Lock()
	l.busy--
	if l.busy == 0 && l.open != nil {
		l.open.leave()
	}
	c.mu.Unlock()
}

// lane returns the lane of slot and alg, of the decisions whose key is
// seeded or, if noSeed, of those whose key is not, made if need be. c.mu
// is held.
func (c *coalescer) lane(slot uint16, alg sluice.Algorithm, noSeed bool) *lane {
	id := uint32(slot)<<9 | uint32(alg)
	if noSeed {
		id |= 1 << 8
	}
	l := c.lanes[id]
	if l == nil {
		l = &lane{}
		c.lanes[id] = l // at most 16384 slots × the algorithms × 2
	}
	return l
}

// newBatch returns an empty batch of lane l, counted in c.wg until it is
// answered. c.mu is held.
func (c *coalescer) newBatch(l *lane, alg sluice.Algorithm, stride int) *batch {
	b, _ := c.pool.Get().(*batch)
	if b == nil {
		b = &batch{start: make(chan struct{}, 1)}
		for i := range b.entries {
			b.entries[i].ready = make(chan struct{}, 1)
		}
	}
	b.lane, b.alg, b.stride = l, alg, stride
	b.refs.Store(1) // the sender's
	c.wg.Add(1)
	return b
}

// add appends a decision to b and returns its entry. c.mu is held.
func (b *batch) add(ctx context.Context, args []string, parts []string) *entry {
	e := &b.entries[b.n]
	b.n++
	b.refs.Add(1)
	e.ctx = ctx
	e.key0 = len(b.keyBuf)
	for _, p := range parts {
		b.keyBuf = append(b.keyBuf, p...)
	}
	e.key1 = len(b.keyBuf)
	if k := predecessor(b.alg); k != "" && !b.noSeed {
		b.keyBuf = appendKeyOf(b.keyBuf, k, parts)
	}
	e.key2 = len(b.keyBuf)
	e.arg0 = len(b.argBuf)
	b.argBuf = append(b.argBuf, args...)
	e.arg1 = len(b.argBuf)
	return e
}

// leave tells b's sender to send it without waiting any longer.
func (b *batch) leave() {
	select {
	case b.start <- struct{}{}:
	default: // told already
	}
}

// dispatch hands b to an idle worker, or to a new goroutine: a kept
// worker while there are fewer than keptWorkers, else one for b alone.
func (c *coalescer) dispatch(b *batch) {
	select {
	case c.work <- b:
		return
	default:
	}
	c.mu.Lock()
	keep := !c.closed && c.workers < keptWorkers
	if keep {
		c.workers++
		c.wg.Add(1)
	}
	c.mu.Unlock()
	go c.worker(b, keep)
}

// worker sends b, then, if kept, every batch handed to it until close.
func (c *coalescer) worker(b *batch, keep bool) {
	t := time.NewTimer(c.wait)
	t.Stop()
	c.send(b, t)
	if !keep {
		return
	}
	defer c.wg.Done()
	for {
		select {
		case b := <-c.work:
			c.send(b, t)
		case <-c.quit:
			return
		}
	}
}

// send waits until b may leave, sends it and hands each caller its
// outcome. t is the worker's timer, stopped or expired and drained.
func (c *coalescer) send(b *batch, t *time.Timer) {
	select {
	case <-b.start:
	default:
		t.Reset(c.wait)
		select {
		case <-b.start:
			t.Stop()
		case <-t.C:
		}
	}
	c.mu.Lock()
	l := b.lane
	if l.open == b {
		l.open = nil
	}
	l.busy++
	c.mu.Unlock()

	b.prepare()
	if len(b.live) > 0 {
		c.call(b)
	} else {
		b.replied = true // nothing was sent
	}

	c.answered(l)
	for i := range b.n {
		b.entries[i].ready <- struct{}{}
	}
	c.wg.Done()
	c.release(b)
}

// prepare builds b's keys and arguments from the entries whose callers
// are still waiting, and fails the others.
func (b *batch) prepare() {
	b.keys, b.live = b.keys[:0], b.live[:0]
	b.argv = append(b.argv[:0], strconv.Itoa(b.stride))
	for i := range b.n {
		e := &b.entries[i]
		if err := e.ctx.Err(); err != nil {
			e.err = fmt.Errorf("redisstore: %w", err) // not sent: not counted
			continue
		}
		b.keys = append(b.keys, b.key(e.key0, e.key1))
		if e.key2 > e.key1 {
			b.keys = append(b.keys, b.key(e.key1, e.key2))
		}
		b.argv = append(b.argv, b.argBuf[e.arg0:e.arg1]...)
		b.live = append(b.live, i)
	}
}

// key returns keyBuf[from:to] as a string, without copying it.
func (b *batch) key(from, to int) string {
	k := b.keyBuf[from:to]
	return unsafe.String(unsafe.SliceData(k), len(k))
}

// callRedis sends b's live entries as one call of its algorithm's batch
// script and sets each one's outcome from the reply (or, refused with
// TRYAGAIN, makes each alone: see eachAlone). The call's context
// is not any caller's, ctx: one caller that gives up does not fail the
// others. It ends when Redis answers, the connection's timeout passes or
// ctx ends (the store closing).
func callRedis(ctx context.Context, client rueidis.Client, b *batch) {
	resp := batchScripts[b.alg].Exec(ctx, client, b.keys, b.argv)
	if tryAgain(resp) {
		b.eachAlone(ctx, client)
		return
	}
	b.replied = replied(resp)
	msgs, err := resp.ToArray()
	switch {
	case err != nil && resp.Error() == nil:
		err = fmt.Errorf("%w: %v", ErrReply, err)
	case err != nil && ctx.Err() != nil:
		err = fmt.Errorf("%w: Redis did not answer within %v", errClosed, closeWait)
	case err != nil:
		err = fmt.Errorf("redisstore: %w", err)
	}
	b.answer(msgs, err)
}

// eachAlone makes each of b's live decisions in a call of its own. It is
// for a batch Redis refused whole, running nothing, with TRYAGAIN: a
// Cluster is migrating the batch's slot, and its old node holds some of
// the keys and not others. Alone, each call goes where its key is (rueidis
// follows the ASK), as it would without coalescing. A decision with two
// keys (its own and its predecessor's) refused with TRYAGAIN alone too
// (one of its keys on the old node, the other not) is made again on its
// own key only, unseeded, where that key is.
func (b *batch) eachAlone(ctx context.Context, client rueidis.Client) {
	b.replied = true
	per := len(b.keys) / max(len(b.live), 1) // keys per decision: 1, or 2 with a predecessor
	for j, i := range b.live {
		e := &b.entries[i]
		keys, args := b.keys[j*per:(j+1)*per], b.argBuf[e.arg0:e.arg1]
		resp := scripts[b.alg].Exec(ctx, client, keys, args)
		if len(keys) == 2 && tryAgain(resp) {
			resp = scripts[b.alg].Exec(ctx, client, keys[:1], args)
		}
		b.replied = b.replied && replied(resp)
		e.res, e.err = decode(resp)
	}
}

// answer sets the outcome of each of b's live entries from the batch
// script's reply, msgs, or from err, the call's error.
func (b *batch) answer(msgs []rueidis.RedisMessage, err error) {
	if err == nil && len(msgs) != 4*len(b.live) {
		err = fmt.Errorf("%w: an array of %d elements for %d decisions", ErrReply, len(msgs), len(b.live))
	}
	for j, i := range b.live {
		e := &b.entries[i]
		if err != nil {
			e.err = err
			continue
		}
		if rerr := msgs[4*j].Error(); rerr != nil { // this decision failed
			e.err = fmt.Errorf("redisstore: %w", rerr)
			continue
		}
		var vals [4]int64
		if vals, e.err = decodeMessages(msgs[4*j : 4*j+4]); e.err == nil {
			e.res, e.err = result(vals)
		}
	}
}

// release drops one reference to b; the last one returns b to the pool if
// Redis answered it (else rueidis may still hold its keys' memory, left to
// the garbage collector).
func (c *coalescer) release(b *batch) {
	if b.refs.Add(-1) != 0 {
		return
	}
	if !b.replied {
		return
	}
	for i := range b.n {
		e := &b.entries[i]
		select {
		case <-e.ready: // its caller gave up
		default:
		}
		*e = entry{ready: e.ready}
	}
	select {
	case <-b.start:
	default:
	}
	if cap(b.keyBuf) > 2*maxBatchKeyBytes {
		b.keyBuf = nil
	}
	clear(b.argBuf)
	clear(b.keys)
	clear(b.argv)
	b.keyBuf, b.argBuf, b.keys, b.argv = b.keyBuf[:0], b.argBuf[:0], b.keys[:0], b.argv[:0]
	b.lane, b.n, b.replied, b.noSeed = nil, 0, false, false
	c.pool.Put(b)
}

// keySlot returns the Redis Cluster hash slot of the key that is the
// concatenation of parts: the CRC16 of its hash tag (the bytes between
// its first '{' and the first '}' after it, if not empty), else of the
// whole key, modulo 16384.
func keySlot(parts []string) uint16 {
	open, end, at := -1, -1, 0
	for _, p := range parts {
		for i := 0; i < len(p) && end < 0; i++ {
			switch {
			case open < 0 && p[i] == '{':
				open = at + i
			case open >= 0 && p[i] == '}':
				end = at + i
			}
		}
		at += len(p)
	}
	from, to := 0, at
	if open >= 0 && end > open+1 {
		from, to = open+1, end
	}
	var crc uint16
	at = 0
	for _, p := range parts {
		lo, hi := max(from-at, 0), min(to-at, len(p))
		for i := lo; i < hi; i++ {
			crc = crc<<8 ^ crcTable[byte(crc>>8)^p[i]]
		}
		at += len(p)
	}
	return crc & 16383
}

// crcTable is CRC-16/XMODEM (polynomial 0x1021, initial value 0, bits
// not reflected) for each value of the byte in the top of the register.
var crcTable = func() (t [256]uint16) {
	for v := range t {
		r := uint16(v) << 8
		for range 8 {
			if r&0x8000 != 0 {
				r = r<<1 ^ 0x1021
			} else {
				r <<= 1
			}
		}
		t[v] = r
	}
	return t
}()
