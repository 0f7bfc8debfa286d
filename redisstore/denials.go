package redisstore

import (
	"crypto/sha1"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// denialCacheBound is the longest a Redis store's denial cache refuses a
// request that Redis would admit, after a Refund or a Reset made through
// any store on the same Redis and prefix (on Cluster, plus the delay of
// the cluster bus that carries the announcement between nodes).
const denialCacheBound = 100 * time.Millisecond

// denials remembers the denials Redis issued, so that a flood on one key is
// answered in this process until the denial's RetryAfter has passed instead
// of costing Redis a script call per request.
//
// Its one invariant: it never refuses a request that Redis would admit for
// longer than denialCacheBound (TestDenialCacheFollowsRefunds proves it
// across two stores, with the subscription connection killed too).
//
// A remembered denial for cost c answers only requests of cost c or more:
// those cannot pass before c could, since room only grows with time and
// other requests only take it away; and it ends at the time the request was
// sent plus RetryAfter, Redis's own moment to admit it. Only a Refund or a
// Reset makes room sooner. Through this store they forget the key's
// denials at once; through any store, Redis announces them on the prefix's
// channel (see denialSync), and the message makes every subscribed store
// forget them. A denial is trusted for denialCacheBound after its request
// was sent, and after that only while the subscription has shown, within
// the bound, that it delivers every announcement made since the request
// (see trusted); a denial that is not trusted is asked of Redis again.
// When Redis cannot decide, a denial it issued is still repeated (see
// held): the local twin, which does not know of it, must not admit in
// Redis's stead.
//
// Capacity: WithDenialCache entries (100,000 by default), whatever the
// number of keys clients send: each shard holds at most its share, and a
// full shard drops expired entries first, else an arbitrary one.
// Forgetting a denial only means asking Redis again; while Redis cannot
// answer, the key's twin starts from Redis's last answers (lastSaid: the
// denial too), or from forgottenAllowance when those were forgotten as
// well, so a forgotten denial admits at most L + n over the period
// (TestScaleForgottenAnswers, 160,000 denied identities).
// denialShards is a power of two, so a hash picks a shard with a mask.
const denialShards = 64

type denials struct {
	seed     maphash.Seed
	perShard int
	shards   [denialShards]denialShard
	clock    func() time.Time // the store's
	sync     *denialSync      // nil: announcements are not followed
	recent   forgets
}

type denialShard struct {
	mu sync.Mutex
	m  map[denialKey]denial
	// byDigest finds a key's entries, under every limiter, from the digest
	// an announcement names.
	byDigest map[keyDigest]*keyEntries
	// live is len(m), read without the lock: a lookup in an empty shard,
	// the common case, takes no lock.
	live atomic.Int32
}

type denialKey struct {
	l   *redisLimiter
	key string
}

// keyDigest names a key in announcements: the SHA-1 of its hash tag, which
// the scripts compute too (redis.sha1hex), so a raw key never travels.
type keyDigest [sha1.Size]byte

func digestOf(key string) keyDigest { return sha1.Sum([]byte(hashTagSafe(key))) }

// keyEntries is one key and the limiters holding a denial of it.
type keyEntries struct {
	key string
	ls  []*redisLimiter
}

type denial struct {
	cost   int
	at     time.Time // when the denied request was sent
	until  time.Time // at + RetryAfter
	res    algorithms.Result
	digest keyDigest
}

// newDenials returns a cache of at most size entries, or nil for size 0.
func newDenials(size int) *denials {
	if size == 0 {
		return nil
	}
	return &denials{seed: maphash.MakeSeed(), perShard: max(1, size/denialShards), clock: time.Now}
}

func (d *denials) shard(key string) *denialShard {
	return &d.shards[maphash.String(d.seed, key)&(denialShards-1)]
}

// lookup returns the remembered denial for a request of cost on key at now,
// brought up to now, if there is one that covers it and is trusted: the
// decision path's question, which Redis answers otherwise.
func (d *denials) lookup(l *redisLimiter, key string, cost int, now time.Time) (algorithms.Result, bool) {
	return d.find(l, key, cost, now, true)
}

// held is lookup for a request Redis cannot decide: a denial is repeated
// until its end even when it is no longer trusted, since Redis, which
// could admit the request, is not there to.
func (d *denials) held(l *redisLimiter, key string, cost int, now time.Time) (algorithms.Result, bool) {
	return d.find(l, key, cost, now, false)
}

func (d *denials) find(l *redisLimiter, key string, cost int, now time.Time, trust bool) (algorithms.Result, bool) {
	if d == nil {
		return algorithms.Result{}, false
	}
	sh := d.shard(key)
	if sh.live.Load() == 0 {
		return algorithms.Result{}, false
	}
	k := denialKey{l, key}
	sh.mu.Lock()
	e, ok := sh.m[k]
	if ok && !now.Before(e.until) {
		sh.del(k, e.digest)
		ok = false
	}
	sh.mu.Unlock()
	if !ok || cost < e.cost || trust && !d.trusted(e.at, now) {
		return algorithms.Result{}, false
	}
	res := e.res
	res.RetryAfter = e.until.Sub(now)
	res.ResetAfter = max(res.ResetAfter-now.Sub(e.at), res.RetryAfter)
	res.Decider = algorithms.DecidedByCache
	return res, true
}

// trusted reports whether a denial whose request was sent at may answer at
// now: within the bound of at, or when the subscription, up since before
// at, has delivered every announcement made up to less than the bound ago.
// Either way a refund or reset it has not heard of was made less than
// denialCacheBound ago.
func (d *denials) trusted(at, now time.Time) bool {
	if now.Sub(at) < denialCacheBound {
		return true
	}
	st := d.sync.current()
	return st != nil && !at.Before(st.since) && now.Sub(st.heard) < denialCacheBound
}

// remember stores Redis's denial of a request of cost on key sent at,
// unless the key's denials were forgotten after at (the denial may predate
// the refund or reset that made them go).
func (d *denials) remember(l *redisLimiter, key string, cost int, at time.Time, res algorithms.Result) {
	if d == nil || res.Allowed || res.RetryAfter <= 0 {
		return
	}
	digest := digestOf(key)
	if !d.recent.allows(digest, at, d.clock()) {
		return
	}
	d.sync.start()
	sh := d.shard(key)
	k := denialKey{l, key}
	e := denial{cost: cost, at: at, until: at.Add(res.RetryAfter), res: res, digest: digest}
	d.sync.busyUntil(e.until)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m == nil {
		sh.m = make(map[denialKey]denial)
		sh.byDigest = make(map[keyDigest]*keyEntries)
	}
	if old, ok := sh.m[k]; ok {
		// The newer denial knows Redis's newer state, and its request was
		// sent after any subscription's start; keep the older only when it
		// covers more (a smaller cost) and is still live and trusted.
		if old.cost < cost && old.until.After(at) && d.trusted(old.at, at) {
			return
		}
		sh.m[k] = e
		return
	} else if len(sh.m) >= d.perShard {
		sh.evict(at)
	}
	sh.put(k, e)
}

// put adds a new entry and indexes it. The caller holds sh.mu.
func (sh *denialShard) put(k denialKey, e denial) {
	sh.m[k] = e
	sh.live.Store(int32(len(sh.m)))
	ke := sh.byDigest[e.digest]
	if ke == nil {
		ke = &keyEntries{key: k.key}
		sh.byDigest[e.digest] = ke
	}
	ke.ls = append(ke.ls, k.l)
}

// del removes an entry and its index. The caller holds sh.mu.
func (sh *denialShard) del(k denialKey, digest keyDigest) {
	delete(sh.m, k)
	sh.live.Store(int32(len(sh.m)))
	ke := sh.byDigest[digest]
	if ke == nil {
		return
	}
	for i, l := range ke.ls {
		if l == k.l {
			ke.ls[i] = ke.ls[len(ke.ls)-1]
			ke.ls = ke.ls[:len(ke.ls)-1]
			break
		}
	}
	if len(ke.ls) == 0 {
		delete(sh.byDigest, digest)
	}
}

// evict makes room for one entry: expired entries go first, among the few
// looked at; otherwise the first one map iteration offers, which Go picks
// at random. The caller holds sh.mu.
func (sh *denialShard) evict(now time.Time) {
	const look = 8
	var victim denialKey
	var digest keyDigest
	n := 0
	for k, e := range sh.m {
		if !now.Before(e.until) {
			sh.del(k, e.digest)
			return
		}
		if n == 0 {
			victim, digest = k, e.digest
		}
		if n++; n == look {
			break
		}
	}
	sh.del(victim, digest)
}

// forget drops the remembered denials of key under every limiter, after a
// refund or reset through this store.
func (d *denials) forget(key string) {
	if d == nil {
		return
	}
	digest := digestOf(key)
	d.recent.add(digest, d.clock())
	d.shard(key).forget(digest)
}

// forgetDigest drops the remembered denials of the key digest names, after
// an announcement: the digest does not tell which shard holds them.
func (d *denials) forgetDigest(digest keyDigest) {
	d.recent.add(digest, d.clock())
	for i := range d.shards {
		d.shards[i].forget(digest)
	}
}

func (sh *denialShard) forget(digest keyDigest) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ke := sh.byDigest[digest]
	if ke == nil {
		return
	}
	for _, l := range ke.ls {
		delete(sh.m, denialKey{l, ke.key})
	}
	sh.live.Store(int32(len(sh.m)))
	delete(sh.byDigest, digest)
}
