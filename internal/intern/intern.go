// Package intern keeps a bounded table of recently made short strings, so
// that a rate-limit key built per request in a stack buffer is had without
// an allocation when the same client asked recently: the key function and
// the route scope of the middleware make the same few strings over and
// over.
//
// Invariant: String(b) returns a string equal to b, always. A slot is
// published whole with one atomic store and never written again, so a
// reader sees an old string or a new one, never a torn one; a string that
// is evicted stays valid for whoever holds it. TestStringEqualsInput and
// TestConcurrent (under -race) prove it.
package intern

import (
	"hash/maphash"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"unsafe"
)

const (
	// ways is how many slots a string may sit in: a few, so that two hot
	// strings whose hashes collide do not evict each other.
	ways = 4
	// sets times ways slots: 32,768 strings, 512 KiB of sets, enough for
	// some 20,000 clients in turn to find theirs nearly always.
	sets = 8192
	// MaxLen is the longest string kept; a longer one is copied each time.
	// It bounds the strings' memory at about 3.5 MiB whatever clients send.
	MaxLen = 96
)

// Table is a set-associative cache of strings. Its zero value is not
// usable: see New.
type Table struct {
	seed maphash.Seed
	sets [sets]set
}

// set is one cache line: the slots a string may sit in. Each slot points to
// a buffer of 1+n bytes, n then the string's n bytes, written before the
// pointer is published and never again. A slot's tag, some bits of its
// string's hash, spares a lookup reading the buffers of other strings; it
// is only a hint (a reader may see a tag and a pointer of different
// strings), and the bytes are always compared.
type set struct {
	tags [ways]atomic.Uint32
	ptrs [ways]atomic.Pointer[byte]
	_    [64 - ways*4 - ways*8]byte
}

// New returns an empty table.
func New() *Table {
	return &Table{seed: maphash.MakeSeed()}
}

// shared is the process's table, made on first use.
var shared = sync.OnceValue(New)

// String is Table.String on the process's table, which the key functions
// and the middleware share: equal keys are equal strings wherever made.
func String(b []byte) string { return shared().String(b) }

// String returns a string equal to b: the table's copy when it holds one,
// else a new copy that it keeps, evicting another if the set is full. The
// hash is seeded per table, so a client cannot aim its strings at another
// client's set; one that floods the table only makes misses, each costing
// the allocation that a plain string(b) would.
func (t *Table) String(b []byte) string {
	n := len(b)
	if n == 0 || n > MaxLen {
		return string(b)
	}
	h := maphash.Bytes(t.seed, b)
	st, tag := &t.sets[h%sets], uint32(h>>32)
	free := -1
	for i := range ways {
		if st.tags[i].Load() != tag {
			if free < 0 && st.ptrs[i].Load() == nil {
				free = i
			}
			continue
		}
		if p := st.ptrs[i].Load(); p != nil && int(*p) == n {
			if s := unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(p), 1)), n); s == string(b) {
				return s
			}
		}
	}
	buf := make([]byte, 1+n)
	buf[0] = byte(n)
	copy(buf[1:], b)
	if free < 0 {
		free = int(rand.Uint32() % ways)
	}
	st.ptrs[free].Store(&buf[0])
	st.tags[free].Store(tag)
	return unsafe.String(&buf[1], n)
}
