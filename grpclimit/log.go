package grpclimit

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"sync/atomic"
	"time"
)

// logGate lets one log line through a second and counts the rest, so that
// a failing limiter under load cannot flood the log.
type logGate struct {
	next       atomic.Int64 // the Unix nanosecond from which a line may pass
	suppressed atomic.Int64
}

// allow reports whether a line may be logged at now.
func (g *logGate) allow(now int64) bool {
	next := g.next.Load()
	if now < next || !g.next.CompareAndSwap(next, now+int64(time.Second)) {
		g.suppressed.Add(1)
		return false
	}
	return true
}

// keySeed salts the hashes of keys in logs, so that a log line cannot be
// matched with a guessed key (an address, say) across processes.
type keySeed [16]byte

func newKeySeed() keySeed {
	var s keySeed
	_, _ = rand.Read(s[:])
	return s
}

// hash returns a short keyed hash of key, for logs: keys hold client
// addresses and credentials' digests, never logged as they are.
func (s *keySeed) hash(key string) string {
	h := sha256.New()
	h.Write(s[:])
	h.Write([]byte(key))
	return hex.EncodeToString(h.Sum(nil)[:6])
}

// logEvent logs msg with the key's hash, at most once a second.
func (c *config) logEvent(level slog.Level, msg, key string, attrs ...slog.Attr) {
	if !c.logGate.allow(time.Now().UnixNano()) {
		return
	}
	attrs = append(attrs, slog.Int64("suppressed", c.logGate.suppressed.Swap(0)))
	if key != "" {
		attrs = append(attrs, slog.String("key_hash", c.keySeeds.hash(key)))
	}
	c.logger.LogAttrs(context.Background(), level, msg, attrs...)
}
