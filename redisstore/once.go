package redisstore

import (
	"crypto/rand"
	"encoding/base64"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// A script call whose reply is lost may have run: go-redis then sends it
// again (a Client up to MaxRetries times, a ClusterClient up to
// MaxRedirects times whatever MaxRetries says), and a second run would count
// its requests twice. So each deciding call carries an id of its own, and
// the script keeps the call's reply in Redis, under a key named by the id
// in the slot of the call's other keys, for onceTTL: a run that finds it
// returns it instead of deciding again. Peeks consume nothing and carry no
// id.

// The first time go-redis writes a call, its id is new: no reply can be
// kept under it yet, so the script looks for one only when the call is
// written again (a resend after a lost reply, a NOSCRIPT or a redirection),
// which onceArg tells it. Skipping that GET saves Redis a command on nearly
// every call.

// onceArg is a deciding call's last argument: its reply's lifetime in ms,
// written as is the first time go-redis writes the call, and negated every
// time after, when the call may have run already (go-redis writes an
// argument that is an encoding.BinaryMarshaler with MarshalBinary each
// time it writes the command). Invariant: a write after the first is never
// taken for the first, so a call that may have run always looks for its
// kept reply (TestLostReplyCountsOnce, TestLostPipelineCountsOnce,
// TestOnceArg).
type onceArg struct {
	first, again []byte // "<ms>", "-<ms>"
	written      atomic.Bool
}

// newOnceArg returns the argument of a reply kept for ms milliseconds.
func newOnceArg(ms string) *onceArg {
	a := &onceArg{}
	a.set(ms)
	return a
}

// set makes a the argument of a reply kept for ms milliseconds, not yet
// written.
func (a *onceArg) set(ms string) {
	if string(a.first) != ms || len(a.again) == 0 || a.again[0] != '-' {
		a.first, a.again = []byte(ms), []byte("-"+ms)
	}
	a.written.Store(false)
}

// setRecord makes a the id argument of a one-request call whose record
// stays in its state (see recordsInState): the id, and "!" after it from
// the second write on. Not yet written.
func (a *onceArg) setRecord(ids *callIDs, id uint64) {
	a.first = ids.appendID(a.first[:0], id)
	a.again = append(append(a.again[:0], a.first...), '!')
	a.written.Store(false)
}

// MarshalBinary implements encoding.BinaryMarshaler for go-redis's writer.
func (a *onceArg) MarshalBinary() ([]byte, error) {
	if a.written.Swap(true) {
		return a.again, nil
	}
	return a.first, nil
}

// String shows the lifetime in logs and hooks that print the command.
func (a *onceArg) String() string { return string(a.first) }

// recordsInState reports whether alg's one-request script keeps a call's
// record after the key's state (every algorithm but the sliding window
// log, whose state is a sorted set), rather than under a key of its own.
// It costs the call a few bytes of the SET it sends anyway, where the key
// of its own costs a SET of its own (about 3 µs of Redis's time). A call
// sent again finds its record unless another call changed the key
// meanwhile (another instance's, or a refund): it then counts again, on
// the strict side.
func recordsInState(alg algorithms.Algorithm) bool { return alg != algorithms.SlidingWindowLog }

// onceInfix names the key that keeps a call's reply, after the hash tag.
const onceInfix = "}:once:"

// callIDs hands out the ids of one store's script calls: a random prefix,
// so that no two stores (in one process or many) share an id, and a count.
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
func (c *callIDs) id() uint64 { return c.next.Add(1) }

// appendID appends the text of call id to b: "<prefix>.<count>".
func (c *callIDs) appendID(b []byte, id uint64) []byte {
	b = append(b, c.prefix...)
	b = append(b, '.')
	return strconv.AppendUint(b, id, 36)
}

// onceTTL is how long a call's reply is kept: twice the longest a call may
// be sent again after it was first sent (its decisions' deadline, timeout,
// then callTimeout), since go-redis sends no retry once the call's context
// has ended. Kept briefly, the replies of a busy store take little room:
// about 100 bytes each, for the calls that consumed something. (A timeout
// beyond an hour counts as an hour here, which keeps the arithmetic far
// from overflow.)
func onceTTL(timeout time.Duration) time.Duration {
	timeout = min(timeout, time.Hour)
	d := 2 * (timeout + max(10*timeout, time.Second))
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}
