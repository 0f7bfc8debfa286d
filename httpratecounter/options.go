package httpratecounter

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// Defaults of a Counter.
const (
	// DefaultPrefix starts every Redis key of a Counter unless WithPrefix
	// says otherwise.
	DefaultPrefix = "httprate"
	// DefaultTimeout bounds each Redis call unless WithTimeout says
	// otherwise. httprate holds one lock per limiter across its two calls,
	// so this bound also bounds how long Redis can stall other requests.
	DefaultTimeout = 100 * time.Millisecond
)

// Errors the Counter returns to httprate, which hands them to its error
// handler (see Counter.ErrorHandler). Each wraps one of these sentinels.
var (
	// ErrUnavailable: Redis failed, or did not answer within the timeout,
	// or answered something that is not a count. The request cannot be
	// decided; it is not passed.
	ErrUnavailable = errors.New("httpratecounter: Redis could not count")
	// ErrLimitExceeded: under WithStrictLimit, the increment was refused
	// because, on Redis's clock, it would take the client over the limit.
	// Nothing was counted.
	ErrLimitExceeded = errors.New("httpratecounter: limit exceeded")
	// ErrMisconfigured: the limiter's configuration cannot work (a limit
	// below 1, a window under a millisecond or over 366 days, one Counter
	// shared by limiters of different limits, a negative increment, no
	// Config call). The error also wraps algorithms.ErrInvalidLimit for
	// the limit, the window and the sharing, algorithms.ErrInvalidCost for
	// the increment.
	ErrMisconfigured = errors.New("httpratecounter: misconfigured")
)

// Option configures a Counter.
type Option func(*options) error

type options struct {
	prefix  string
	timeout time.Duration
	strict  bool
}

// WithPrefix starts every Redis key of the Counter with prefix (default
// DefaultPrefix). Limiters that must not share counts for the same
// httprate key (two routes both keyed by IP, say) need different prefixes.
// The prefix must be non-empty and hold no '{' or '}', which would change
// the key's Cluster hash tag.
func WithPrefix(prefix string) Option {
	return func(o *options) error {
		if prefix == "" || strings.ContainsAny(prefix, "{}") {
			return fmt.Errorf("%w: prefix %q must be non-empty and hold no '{' or '}'", algorithms.ErrInvalidOption, prefix)
		}
		o.prefix = prefix
		return nil
	}
}

// WithTimeout bounds each Redis call (default DefaultTimeout), whatever the
// go-redis client's own timeouts: when Redis has not answered by then, the
// call returns an error wrapping ErrUnavailable.
func WithTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("%w: timeout %s must be positive", algorithms.ErrInvalidOption, d)
		}
		o.timeout = d
		return nil
	}
}

// WithStrictLimit makes IncrementBy check the limit again, inside Redis and
// on Redis's clock, in the same step as the increment: an increment that
// would take the client's weighted count over the limit given to httprate
// is refused with ErrLimitExceeded and counts nothing. Concurrent instances
// then never admit more than the limit together (see the package
// documentation). httprate hands that error to its error handler and then
// calls its limit handler: Counter.Options installs the handlers that make
// it a 429.
//
// The check knows only the limit httprate passed to Config: a per-request
// limit set with httprate.WithRequestLimit above it is capped at it.
func WithStrictLimit() Option {
	return func(o *options) error {
		o.strict = true
		return nil
	}
}
