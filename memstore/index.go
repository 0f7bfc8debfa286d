package memstore

// index finds a key's position in a table's entries. It is a hash table with
// linear probing whose slots are 8 bytes: the upper 32 bits of the key's
// hash and the position plus one (0 is an empty slot). The key itself is
// not stored again (the entry holds it), so an entry costs 11 to 21 bytes
// here where a Go map[string]int takes 30 to 60. Deletion shifts the
// following slots back rather than leaving tombstones, so probes stay short
// however many keys come and go. Growing rehashes at once: a table is never
// larger than a shard, so that costs well under a millisecond.
type index struct {
	slots []uint64 // length 0 or a power of two, at most 3/4 full
	n     int
}

// find returns the slot holding key, or the empty slot where it would go.
func (x *index) find(tag uint32, key string, ents []slot) (i int, found bool) {
	mask := len(x.slots) - 1
	for i = int(tag) & mask; ; i = (i + 1) & mask {
		s := x.slots[i]
		if s == 0 {
			return i, false
		}
		if uint32(s>>32) == tag && ents[uint32(s)-1].key == key {
			return i, true
		}
	}
}

// lookup returns the position of key, or -1.
func (x *index) lookup(tag uint32, key string, ents []slot) int {
	if x.n == 0 {
		return -1
	}
	if i, ok := x.find(tag, key, ents); ok {
		return int(uint32(x.slots[i])) - 1
	}
	return -1
}

// add files a key that is not in the index at pos.
func (x *index) add(tag uint32, key string, pos int, ents []slot) {
	if (x.n+1)*4 > len(x.slots)*3 {
		x.resize(max(8, 2*len(x.slots)))
	}
	i, _ := x.find(tag, key, ents)
	x.slots[i] = uint64(tag)<<32 | uint64(pos+1)
	x.n++
}

// move refiles key, which is in the index, at pos.
func (x *index) move(tag uint32, key string, pos int, ents []slot) {
	i, _ := x.find(tag, key, ents)
	x.slots[i] = uint64(tag)<<32 | uint64(pos+1)
}

// remove takes key, which is in the index, out of it, shifting back the
// slots after it that probed past it.
func (x *index) remove(tag uint32, key string, ents []slot) {
	i, _ := x.find(tag, key, ents)
	mask := len(x.slots) - 1
	for j := (i + 1) & mask; x.slots[j] != 0; j = (j + 1) & mask {
		home := int(uint32(x.slots[j]>>32)) & mask
		// The slot at j may move to i when i is between its home and j.
		if (j-home)&mask >= (j-i)&mask {
			x.slots[i] = x.slots[j]
			i = j
		}
	}
	x.slots[i] = 0
	x.n--
}

// resize rehashes into size slots, from the stored tags.
func (x *index) resize(size int) {
	old := x.slots
	x.slots = make([]uint64, size)
	mask := size - 1
	for _, s := range old {
		if s == 0 {
			continue
		}
		i := int(uint32(s>>32)) & mask
		for x.slots[i] != 0 {
			i = (i + 1) & mask
		}
		x.slots[i] = s
	}
}

// fit shrinks the index to be at most half full, for a table that lost most
// of its entries.
func (x *index) fit() {
	size := 8
	for size < 2*x.n {
		size *= 2
	}
	if size < len(x.slots) {
		x.resize(size)
	}
}
