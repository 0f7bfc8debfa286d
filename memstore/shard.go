package memstore

import (
	"hash/maphash"
	"sync"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/ratemath"
)

// A shard keeps one table per limit that has entries in it. A table keeps
// its entries by value in a dense slice, indexed by key: no pointer per
// entry, an O(1) random sample for eviction, a cursor for sweeping that
// survives between requests, and a rebuild that costs only the live entries.

// memoryShard is one lock's worth of state.
type memoryShard struct {
	mu     sync.Mutex
	tables map[uint32]*table // by limit id; nil when none
	list   []*table          // the same tables, for sampling and sweeping
	count  int               // entries in all tables
	peak   int               // most tables since the tables map was last rebuilt

	// The sweep pass: examining list[ti].ents[ei] next.
	sweeping  bool
	forced    bool // the pass was started by a full shard, not by the interval
	ti, ei    int
	nextSweep int64 // µs; when the next pass starts

	forgot forgotten // what entries forgotten before they were fresh had left

	_ [64]byte // keeps neighbouring shards' locks off one cache line
}

// table holds one limit's entries in one shard.
type table struct {
	spec  uint32
	alg   algorithms.Algorithm
	p     ratemath.Params
	seed  maphash.Seed // the store's, to hash the keys of entries that move
	index index        // key -> position in ents
	ents  []slot
	prev  []int64            // beside ents: sliding window counter, the previous window's count; leaky bucket, once a reservation has left one, the excess reserved
	logs  []ratemath.TimeLog // sliding window log: the times, beside ents
	peak  int                // most entries since the maps were last made
	pos   int                // position in the shard's list
}

// slot is a stored entry: the key and entry.a and entry.b. Entry.c and the
// log live beside it, in the tables of the algorithms that use them, so the
// others do not pay for them.
type slot struct {
	key  string
	a, b int64
}

// Rebuilding a table's maps when it has fallen to a quarter of its peak
// keeps the memory held at most about four times what is live, and the
// rebuild's cost below a quarter of what was freed.
const (
	shrinkRatio = 4
	shrinkMin   = 256 // smaller maps are not worth rebuilding
)

// tagOf is the part of key's hash that tables index by; the shard is chosen
// by the low bits.
func tagOf(h uint64) uint32 { return uint32(h >> 32) }

func (t *table) tag(key string) uint32 { return tagOf(maphash.String(t.seed, key)) }

// load returns entry j as decide takes it.
func (t *table) load(j int) ratemath.Entry {
	e := ratemath.Entry{A: t.ents[j].a, B: t.ents[j].b, Live: true}
	if t.prev != nil {
		e.C = t.prev[j]
	}
	if t.logs != nil {
		e.Log = t.logs[j]
	}
	return e
}

// store writes e back as entry j.
func (t *table) store(j int, e *ratemath.Entry) {
	t.ents[j].a, t.ents[j].b = e.A, e.B
	if t.prev != nil {
		t.prev[j] = e.C
	} else if e.C != 0 {
		// The first excess a leaky bucket's reservation leaves: its table
		// keeps the excesses from now on, and others never pay for them.
		t.prev = make([]int64, len(t.ents), cap(t.ents))
		t.prev[j] = e.C
	}
	if t.logs != nil {
		t.logs[j].Store(&e.Log)
	}
}

func (t *table) expiry(j int) int64 {
	e := t.load(j)
	return e.Expiry(t.alg, t.p)
}

// table returns the table of spec, or nil. Most shards hold a table or two,
// which a scan finds sooner than the map.
func (sh *memoryShard) table(spec uint32) *table {
	if len(sh.list) <= 4 {
		for _, t := range sh.list {
			if t.spec == spec {
				return t
			}
		}
		return nil
	}
	return sh.tables[spec]
}

// lookup returns the entry of one limit for key and its position, or, with
// -1, the state a key without one starts from at now (see forgotten). The
// caller holds sh.mu.
func (sh *memoryShard) lookup(spec uint32, alg algorithms.Algorithm, p ratemath.Params, key string, tag uint32, now int64) (ratemath.Entry, int) {
	if t := sh.table(spec); t != nil {
		if j := t.index.lookup(tag, key, t.ents); j >= 0 {
			return t.load(j), j
		}
	}
	var e ratemath.Entry
	sh.forgot.start(&e, tag, spec, alg, p, now)
	return e, -1
}

// insert adds the entry of key under spec, making room when the shard holds
// capacity entries. The caller holds sh.mu.
func (sh *memoryShard) insert(seed maphash.Seed, spec uint32, alg algorithms.Algorithm, p ratemath.Params, key string, tag uint32, e *ratemath.Entry, now int64, capacity int) {
	if sh.count >= capacity {
		sh.makeRoom(now, capacity)
	}
	t := sh.table(spec)
	if t == nil {
		t = &table{spec: spec, alg: alg, p: p, seed: seed}
		if sh.tables == nil {
			sh.tables = map[uint32]*table{}
		}
		sh.tables[spec] = t
		t.pos = len(sh.list)
		sh.list = append(sh.list, t)
		sh.peak = max(sh.peak, len(sh.list))
	}
	t.index.add(tag, key, len(t.ents), t.ents)
	t.ents = append(t.ents, slot{key: key})
	switch {
	case alg == algorithms.SlidingWindowCounter, t.prev != nil:
		t.prev = append(t.prev, 0)
	case alg == algorithms.SlidingWindowLog:
		t.logs = append(t.logs, ratemath.TimeLog{})
	}
	t.store(len(t.ents)-1, e)
	t.peak = max(t.peak, len(t.ents))
	sh.count++
}

// remove drops entry j of t, moving the last entry into its place, and drops
// t when it is left empty. It reports whether t was dropped. The caller
// holds sh.mu.
func (sh *memoryShard) remove(t *table, j int) (dropped bool) {
	last := len(t.ents) - 1
	t.index.remove(t.tag(t.ents[j].key), t.ents[j].key, t.ents)
	if j != last {
		moved := t.ents[last].key
		t.index.move(t.tag(moved), moved, j, t.ents)
		t.ents[j] = t.ents[last]
		if t.prev != nil {
			t.prev[j] = t.prev[last]
		}
		if t.logs != nil {
			t.logs[j] = t.logs[last]
		}
	}
	t.ents[last] = slot{} // let the key go
	t.ents = t.ents[:last]
	if t.prev != nil {
		t.prev = t.prev[:last]
	}
	if t.logs != nil {
		t.logs[last] = ratemath.TimeLog{}
		t.logs = t.logs[:last]
	}
	sh.count--
	if last > 0 {
		return false
	}
	sh.dropTable(t)
	return true
}

// dropTable forgets an empty table, so a limit leaves nothing behind in a
// shard where it has no entries.
func (sh *memoryShard) dropTable(t *table) {
	delete(sh.tables, t.spec)
	end := len(sh.list) - 1
	sh.list[t.pos] = sh.list[end]
	sh.list[t.pos].pos = t.pos
	sh.list[end] = nil
	sh.list = sh.list[:end]
	switch {
	case len(sh.list) == 0:
		sh.tables, sh.list, sh.peak = nil, nil, 0
	case sh.peak >= 32 && len(sh.list) < sh.peak/shrinkRatio:
		// Many limits went quiet: the tables map would keep their room.
		tables := make(map[uint32]*table, len(sh.list))
		for _, t := range sh.list {
			tables[t.spec] = t
		}
		sh.tables, sh.list, sh.peak = tables, append([]*table(nil), sh.list...), len(sh.list)
	}
}

// shrinkDue reports whether t's maps hold far more room than it has entries.
func (t *table) shrinkDue() bool {
	return t.peak >= shrinkMin && len(t.ents) < t.peak/shrinkRatio
}

// shrink copies t's live entries into maps of their size, for Go maps and
// slices never give back the room they grew to. It costs O(live entries).
func (t *table) shrink() {
	n := len(t.ents)
	t.ents = append(make([]slot, 0, n), t.ents...)
	t.index.fit()
	if t.prev != nil {
		t.prev = append(make([]int64, 0, n), t.prev...)
	}
	if t.logs != nil {
		t.logs = append(make([]ratemath.TimeLog, 0, n), t.logs...)
	}
	t.peak = n
}
