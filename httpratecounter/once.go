package httpratecounter

import (
	"crypto/rand"
	"encoding/base64"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// An increment whose reply is lost may have run: go-redis then sends it
// again (a Client up to MaxRetries times, a ClusterClient up to
// MaxRedirects times whatever MaxRetries says), and a second run would
// count the request twice. So each increment carries an id of its own, and
// the script keeps its reply under "<prefix>:{<tag>}:once:<id>", in the
// slot of the counters, for onceTTL: a run that finds it returns it
// instead of counting again. A refused increment writes nothing and keeps
// nothing. The rate limiters' scripts do the same (package algorithms).

// callIDs hands out the ids of one Counter's increments: a random prefix,
// so that no two Counters (in one process or many) share an id, and a
// count.
type callIDs struct {
	prefix string
	next   atomic.Uint64
}

// newCallIDs returns ids under a prefix of 64 random bits.
func newCallIDs() *callIDs {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return &callIDs{prefix: base64.RawURLEncoding.EncodeToString(b[:])}
}

// id returns a new call id.
func (c *callIDs) id() string { return c.prefix + strconv.FormatUint(c.next.Add(1), 36) }

// onceTTL is how long an increment's reply is kept: twice the longest a
// call may be sent again after it was first sent (go-redis sends no retry
// once the call's context, of the Counter's timeout, has ended; an attempt
// begun before may still run up to ten timeouts, or a second). A timeout
// beyond an hour counts as an hour, far from overflow.
func onceTTL(timeout time.Duration) time.Duration {
	timeout = min(timeout, time.Hour)
	d := 2 * (timeout + max(10*timeout, time.Second))
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}

// resends reports whether client may send a command again after its reply
// was lost: any client but a Client with MaxRetries -1 (a ClusterClient
// resends up to MaxRedirects times whatever MaxRetries says). A client
// that never resends needs no kept replies.
func resends(client redis.UniversalClient) bool {
	c, ok := client.(*redis.Client)
	return !ok || c.Options().MaxRetries > 0
}
