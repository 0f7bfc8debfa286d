package redisstore

import (
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The rhythm of a denial cache's subscription: a PING every pingEvery while
// it holds a denial that may still answer, so that its pongs show within
// denialCacheBound that every announcement has arrived; a connection that
// answered none for silentAfter is replaced. A failed subscription is
// retried after a pause that doubles up to retryMax.
const (
	pingEvery   = denialCacheBound / 4
	silentAfter = time.Second
	// closedEvery is how often a subscription asks whether its client
	// was closed: go-redis's Close does not always close a
	// subscription's connection, whose Receive would then wait forever.
	closedEvery = time.Second
	retryMin    = 10 * time.Millisecond
	retryMax    = time.Second
)

// denialsChannel is the channel on which the scripts announce, for a store
// with prefix, the keys whose refunds gave something back and whose state
// was reset (lua/driver.lua, lua/reset.lua): the payload is the hex SHA-1
// of the key's hash tag, never the key.
func denialsChannel(prefix string) string { return prefix + ":denials" }

// denialSync follows a store's announcements: a subscription made when the
// store first remembers a denial, that makes the cache forget the denials
// of each key announced. It also tells the cache how far to trust a denial
// (syncState): from its confirmation on, the subscription hears every
// announcement, and a pong to a PING sent at t says that those made before
// t have been applied. It ends when the store is closed (Store.Close)
// or when the client is.
type denialSync struct {
	d       *denials
	client  redis.UniversalClient
	channel string
	logger  *slog.Logger

	mu      sync.Mutex
	started atomic.Bool
	closed  bool
	cancel  context.CancelFunc
	crew    *crew // the store's goroutines, which Close waits for

	ps    atomic.Pointer[redis.PubSub] // the current subscription
	state atomic.Pointer[syncState]    // nil: not subscribed
	busy  atomic.Int64                 // UnixNano on the store's clock until which a denial may answer
	heard atomic.Int64                 // UnixNano (wall) of the last reply on the subscription

	pingMu sync.Mutex
	pings  [8]sentPing // the last PINGs, by sequence number
}

type syncState struct {
	since time.Time // when the subscription was confirmed
	heard time.Time // every announcement made before it has been applied
}

type sentPing struct {
	seq uint64
	at  time.Time
}

// follow makes d forget the denials that the store's announcements name;
// clock is the store's; its goroutines are the crew's.
func (d *denials) follow(client redis.UniversalClient, prefix string, clock func() time.Time, logger *slog.Logger, c *crew) {
	if d == nil {
		return
	}
	d.clock = clock
	d.sync = &denialSync{d: d, client: client, channel: denialsChannel(prefix), logger: logger, crew: c}
}

// current returns what the subscription vouches for, or nil.
func (s *denialSync) current() *syncState {
	if s == nil {
		return nil
	}
	return s.state.Load()
}

// busyUntil notes that a denial may answer until t.
func (s *denialSync) busyUntil(t time.Time) {
	if s == nil {
		return
	}
	for n := t.UnixNano(); ; {
		old := s.busy.Load()
		if old >= n || s.busy.CompareAndSwap(old, n) {
			return
		}
	}
}

// start subscribes, once, unless the store is closed.
func (s *denialSync) start() {
	if s == nil || s.started.Load() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.started.Load() {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.heard.Store(time.Now().UnixNano())
	if !s.crew.spawn(func() { s.receive(ctx, cancel) }) {
		cancel()
		return // the store is closing
	}
	s.crew.spawn(func() { s.ping(ctx) }) // refused, it is closing: receive ends too
	s.started.Store(true)
}

// close ends the subscription; the store's crew waits for its goroutines
// (the subscription's Close unblocks its Receive).
func (s *denialSync) close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.closed = true
	cancel := s.cancel
	s.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	if ps := s.ps.Load(); ps != nil {
		_ = ps.Close() // unblocks Receive
	}
	s.state.Store(nil)
}

// receive subscribes, and subscribes again whenever the subscription
// fails, until ctx ends or the client is closed; then it cancels ctx, which
// ends ping too.
func (s *denialSync) receive(ctx context.Context, cancel context.CancelFunc) {
	defer cancel()
	pause := retryMin
	for ctx.Err() == nil {
		ps := s.client.Subscribe(ctx, s.channel)
		s.ps.Store(ps)
		if ctx.Err() != nil {
			_ = ps.Close()
			return
		}
		err := s.listen(ctx, ps)
		wasUp := s.state.Swap(nil) != nil
		_ = ps.Close()
		if ctx.Err() != nil || errors.Is(err, redis.ErrClosed) && !s.replaced(ps) {
			return // the store or the client was closed
		}
		if wasUp {
			// Once per outage (retries fail quietly), and not for a
			// connection closed here, as the client's Close does first.
			pause = retryMin
		}
		if wasUp && !errors.Is(err, net.ErrClosed) {
			s.logger.LogAttrs(ctx, slog.LevelWarn, "redlimit: denial cache subscription lost; until it is back, a cached denial answers for "+denialCacheBound.String()+" after its request",
				slog.String("channel", s.channel), slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, retryMax)
	}
}

// clientClosed reports whether the client was closed: a closed client
// answers ErrClosed at once, an open one sends a PING.
func (s *denialSync) clientClosed(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, closedEvery)
	defer cancel()
	return errors.Is(s.client.Ping(ctx).Err(), redis.ErrClosed)
}

// stop ends the subscription from within, its client closed: receive
// returns once its context ends and the subscription is closed.
func (s *denialSync) stop() {
	s.mu.Lock()
	cancel := s.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if ps := s.ps.Load(); ps != nil {
		_ = ps.Close()
	}
}

// replaced reports whether ps was closed by ping as silent, rather than by
// the client's closing.
func (s *denialSync) replaced(ps *redis.PubSub) bool { return s.ps.Load() != ps }

// listen applies what ps receives until it fails. go-redis connects again
// on its own after some failures and subscribes anew, which arrives here
// as a fresh confirmation; any error resets the state, so nothing said
// on a lost connection is trusted.
func (s *denialSync) listen(ctx context.Context, ps *redis.PubSub) error {
	for {
		msg, err := ps.Receive(ctx)
		if err != nil {
			return err
		}
		s.heard.Store(time.Now().UnixNano())
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				s.state.Store(&syncState{since: s.d.clock()})
			}
		case *redis.Message:
			var digest keyDigest
			if hex.DecodedLen(len(m.Payload)) == len(digest) {
				if _, err := hex.Decode(digest[:], []byte(m.Payload)); err == nil {
					s.d.forgetDigest(digest)
				}
			}
		case *redis.Pong:
			s.pong(m.Payload)
		}
	}
}

// pong moves the state's heard to the time the PING seq was sent.
func (s *denialSync) pong(payload string) {
	seq, err := strconv.ParseUint(payload, 10, 64)
	if err != nil {
		return
	}
	s.pingMu.Lock()
	p := s.pings[seq%uint64(len(s.pings))]
	s.pingMu.Unlock()
	st := s.state.Load()
	if p.seq != seq || st == nil || !p.at.After(st.heard) {
		return
	}
	s.state.Store(&syncState{since: st.since, heard: p.at})
}

// ping sends a PING every pingEvery while a denial may answer, and
// replaces a subscription that has been silent for silentAfter (a
// connection lost without a word, which go-redis would not notice).
func (s *denialSync) ping(ctx context.Context) {
	t := time.NewTicker(pingEvery)
	defer t.Stop()
	var seq uint64
	lastAsked, closedOnce := time.Now(), false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if time.Since(lastAsked) >= closedEvery {
			lastAsked = time.Now()
			// Twice, a tick apart: a Cluster client may answer ErrClosed
			// once from a node it has just let go of.
			if s.clientClosed(ctx) {
				if closedOnce {
					s.stop()
					return
				}
				closedOnce = true
				lastAsked = lastAsked.Add(-closedEvery)
			} else {
				closedOnce = false
			}
		}
		ps := s.ps.Load()
		if ps == nil || s.d.clock().UnixNano() >= s.busy.Load() {
			// Idle: silence is not a symptom until PINGs go unanswered.
			s.heard.Store(time.Now().UnixNano())
			continue
		}
		if time.Since(time.Unix(0, s.heard.Load())) > silentAfter {
			s.heard.Store(time.Now().UnixNano())
			s.ps.CompareAndSwap(ps, nil)
			_ = ps.Close() // receive subscribes again
			continue
		}
		seq++
		s.pingMu.Lock()
		s.pings[seq%uint64(len(s.pings))] = sentPing{seq: seq, at: s.d.clock()}
		s.pingMu.Unlock()
		_ = ps.Ping(ctx, strconv.FormatUint(seq, 10)) // a failure reaches receive
	}
}

// forgets keeps, for forgetsKept, when each key's denials were last
// forgotten, so that a denial whose request was sent before is not
// remembered: its reply may have crossed the refund or reset.
type forgets struct {
	mu    sync.Mutex
	at    map[keyDigest]time.Time
	queue []forgot // by time, for expiry
	head  int
	floor time.Time // every key counts as forgotten then (after an overflow)
}

type forgot struct {
	digest keyDigest
	at     time.Time
}

// forgetsKept is how long a forgetting is kept; a denial whose request is
// older is not remembered (its reply is too late to be of use anyway).
// maxForgets bounds the memory: beyond it, every key counts as forgotten.
const (
	forgetsKept = 2 * time.Second
	maxForgets  = 1 << 16
)

func (f *forgets) add(digest keyDigest, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.expire(now)
	if len(f.at) >= maxForgets {
		f.floor, f.queue, f.head = now, f.queue[:0], 0
		clear(f.at)
		return
	}
	if f.at == nil {
		f.at = make(map[keyDigest]time.Time)
	}
	f.at[digest] = now
	f.queue = append(f.queue, forgot{digest, now})
}

// expire drops the forgettings older than forgetsKept. The caller holds
// f.mu.
func (f *forgets) expire(now time.Time) {
	for f.head < len(f.queue) && now.Sub(f.queue[f.head].at) > forgetsKept {
		q := f.queue[f.head]
		if t, ok := f.at[q.digest]; ok && !t.After(q.at) {
			delete(f.at, q.digest)
		}
		f.head++
	}
	if f.head > 64 && f.head > len(f.queue)/2 {
		n := copy(f.queue, f.queue[f.head:])
		f.queue, f.head = f.queue[:n], 0
	}
}

// allows reports whether a denial of the key digest names, for a request
// sent at, may be remembered at now: no forgetting since at (an equal time
// counts as since: a frozen test clock cannot order them).
func (f *forgets) allows(digest keyDigest, at, now time.Time) bool {
	if now.Sub(at) >= forgetsKept {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !at.After(f.floor) && !f.floor.IsZero() {
		return false
	}
	t, ok := f.at[digest]
	return !ok || at.After(t)
}

// close ends the subscription, if any.
func (d *denials) close() {
	if d != nil {
		d.sync.close()
	}
}
