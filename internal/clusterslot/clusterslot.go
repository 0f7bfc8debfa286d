// Package clusterslot knows what the Redis stores need of Cluster slots:
// the slot of a hash tag, and the slots found migrating, whose script
// calls must go without the exactly-once key to be served (see
// Migrating).
package clusterslot

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Of returns the Cluster slot of a key whose hash tag is tag: CRC16
// (XMODEM) modulo 16384, as Redis computes it.
func Of(tag string) int {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// TagOf returns the hash tag of a Redis key: what lies between its first
// '{' and the next '}' when that is not empty, else the whole key, as
// Cluster hashes it.
func TagOf(key string) string {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			return key[s+1 : s+1+e]
		}
	}
	return key
}

// Refused reports Cluster's refusals of a command whose slot migrates:
// ASK (the owner misses a key; go-redis returns it when its MaxRedirects
// end on the owner) and TRYAGAIN (the importing node misses one of
// several keys). Redis ran nothing.
func Refused(err error) bool {
	if err == nil {
		return false // and no redis.Error to allocate for errors.As
	}
	var reply redis.Error
	if !errors.As(err, &reply) {
		return false
	}
	msg := reply.Error()
	return strings.HasPrefix(msg, "ASK ") || strings.HasPrefix(msg, "TRYAGAIN ")
}

// Hold is how long the calls of a slot found migrating go without the
// exactly-once key: the first call after it carries the key again, and
// finds out, slowly (through go-redis's redirections and backoff), whether
// the slot still migrates.
const Hold = 5 * time.Second

// Migrating holds the slots found migrating, each until Hold after it was
// last found so. Its zero value is ready to use; it is safe for concurrent
// use, and takes no lock while no slot is held.
type Migrating struct {
	n     atomic.Int32 // len(until)
	mu    sync.Mutex
	until map[int]time.Time // at most the 16384 slots
}

// Holds reports whether the slot of tag was found migrating less than Hold
// before clock's now. It reads the clock only while some slot is held.
func (m *Migrating) Holds(tag string, clock func() time.Time) bool {
	if m.n.Load() == 0 {
		return false
	}
	slot := Of(tag)
	m.mu.Lock()
	defer m.mu.Unlock()
	until, ok := m.until[slot]
	if ok && !clock().Before(until) {
		delete(m.until, slot)
		m.n.Store(int32(len(m.until)))
		return false
	}
	return ok
}

// Learn reports whether err is a refusal of a migrating slot (see
// Refused), and if so holds the slot of tag until Hold after now.
func (m *Migrating) Learn(tag string, err error, now time.Time) bool {
	if !Refused(err) {
		return false
	}
	slot := Of(tag)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.until == nil {
		m.until = make(map[int]time.Time)
	}
	m.until[slot] = now.Add(Hold)
	m.n.Store(int32(len(m.until)))
	return true
}
