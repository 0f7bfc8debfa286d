package middleware

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/breaker"
	"github.com/redlimit/redlimit/keyfunc"
)

// config is the middleware's state, fixed when New returns.
type config struct {
	limiter          algorithms.Limiter
	keyFunc          keyfunc.KeyFunc
	cost             func(*http.Request) int
	limiterFunc      func(*http.Request, string) algorithms.Limiter
	timeout          time.Duration
	policy           ErrorPolicy
	fallback         algorithms.Limiter
	breakFor         time.Duration
	routeScope       bool
	routePattern     func(*http.Request) string
	unavailableRetry time.Duration
	logger           *slog.Logger
	legacy           bool
	ietf             bool
	resetMode        ResetMode
	policyName       string
	denied           func(http.ResponseWriter, *http.Request, algorithms.Result)
	keyError         func(http.ResponseWriter, *http.Request, error)
	now              func() time.Time
	realClock        bool // now is time.Now: one reading serves both clocks

	countCredentialFailures bool
	credentialKey           keyfunc.KeyFunc
	observer                Observer
	shadow                  bool
	shadowLog               logGate
	skip                    func(*http.Request) bool
	skipNil                 bool          // WithSkip(nil) was given
	timeoutSet              bool          // WithTimeout was given
	delay                   time.Duration // WithDelay's, 0 without
	delaySet                bool          // WithDelay was given
	maxWaiting              int
	waiting                 atomic.Int64 // requests waiting out a delay
	chargeIf                func(status int) bool
	chargeIfSet             bool // WithChargeIf was given
	costAfter               bool // WithCostAfter was given
	leases                  bool // NewConcurrency's: the headers describe leases

	// Precomputed at New, so the hot path only appends numbers.
	sfName           []byte // the policy name as an sf-string, quoted
	tooMany          problem
	unavailable      problem
	badKey           problem
	unauthorized     problem
	badCost          problem
	costTooLarge     problem
	logGate          logGate
	logSecret        [32]byte         // keys the key hashes in logs
	breaker          *breaker.Breaker // nil when WithBreakFor(0)
	mainPolicies     *policySet       // how New's limiter's limits appear in responses
	fallbackPolicies *policySet       // and the fallback's
	policyCache      sync.Map         // algorithms.Limiter -> *policySet, for WithLimiterFunc's limiters
	policyCached     atomic.Int64     // entries added to policyCache
}

// init checks the options, fills in defaults and precomputes responses.
func (c *config) init() error {
	switch {
	case isNil(c.limiter):
		return errors.New("nil limiter")
	case c.fallback != nil && isNil(c.fallback):
		return errors.New("nil fallback limiter")
	}
	if err := c.prepare(); err != nil {
		return err
	}
	if err := c.checkDelay(); err != nil {
		return err
	}
	if err := c.checkSettle(); err != nil {
		return err
	}
	c.mainPolicies = c.newPolicySet(c.limiter)
	if c.fallback != nil {
		c.fallbackPolicies = c.newPolicySet(c.fallback)
	}
	return nil
}

// prepare checks the options every middleware uses, fills in their
// defaults and precomputes responses.
func (c *config) prepare() error {
	switch {
	case c.timeout <= 0:
		return fmt.Errorf("timeout %s is not positive", c.timeout)
	case c.breakFor < 0:
		return fmt.Errorf("breaker time %s is negative", c.breakFor)
	case c.policy != PassOnError && c.policy != RefuseOnError:
		return fmt.Errorf("unknown failure policy %d", c.policy)
	case c.resetMode != ResetEpoch && c.resetMode != ResetDelta:
		return fmt.Errorf("unknown reset mode %d", c.resetMode)
	case c.skipNil:
		return errors.New("WithSkip: nil function")
	case c.routePattern == nil:
		return errors.New("WithRoutePattern: nil function")
	case c.now == nil:
		return errors.New("nil clock")
	case c.observer != nil && isNil(c.observer):
		return fmt.Errorf("nil %T observer", c.observer)
	}
	name, err := sfString(c.policyName)
	if err != nil {
		return err
	}
	c.sfName = name
	c.realClock = reflect.ValueOf(c.now).Pointer() == reflect.ValueOf(time.Now).Pointer()
	if _, err := rand.Read(c.logSecret[:]); err != nil {
		return fmt.Errorf("no randomness for the log key: %w", err)
	}
	if c.keyFunc == nil {
		c.keyFunc = keyfunc.IP()
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if c.keyError == nil {
		c.keyError = c.writeKeyError
	}
	if c.credentialKey == nil {
		c.credentialKey = keyfunc.IP()
	}
	if c.breakFor > 0 {
		c.breaker = breaker.New(breaker.Config{OpenFor: c.breakFor}, c.logBreaker)
	}

	c.tooMany = newTooMany(c.policyName)
	c.unavailable = newProblem(http.StatusServiceUnavailable, "",
		"The rate limiter is unavailable; retry after the number of seconds in Retry-After.", nil)
	c.unavailable.retryAfter = strconv.FormatInt(ceilSeconds(c.unavailableRetry, 1), 10)
	c.badKey = newProblem(http.StatusBadRequest, "",
		"The request could not be attributed to a client for rate limiting.", nil)
	c.unauthorized = newProblem(http.StatusUnauthorized, "",
		"The request lacks a valid credential to count it against a rate limit.", nil)
	c.badCost = newProblem(http.StatusBadRequest, "",
		"The request's cost against the rate limit is not valid.", nil)
	c.costTooLarge = newProblem(http.StatusRequestEntityTooLarge, "",
		"The request's cost exceeds the whole rate-limit quota, so it can never pass.", nil)
	return nil
}

// maxPolicyName bounds the policy name, which is copied into every response.
const maxPolicyName = 64

// sfString returns s as an RFC 9651 sf-string: quoted, with " and \
// escaped. It refuses what an sf-string cannot hold (anything outside
// printable ASCII) and names that are empty or too long.
func sfString(s string) ([]byte, error) {
	if s == "" || len(s) > maxPolicyName {
		return nil, fmt.Errorf("policy name must be 1 to %d characters, got %d", maxPolicyName, len(s))
	}
	b := make([]byte, 0, len(s)+4)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch < 0x20 || ch > 0x7e {
			return nil, fmt.Errorf("policy name %q has a character outside printable ASCII", s)
		}
		if ch == '"' || ch == '\\' {
			b = append(b, '\\')
		}
		b = append(b, ch)
	}
	return append(b, '"'), nil
}

// apply applies opts in order, refusing a nil one.
func (c *config) apply(opts []Option) error {
	for i, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: option %d is nil", algorithms.ErrInvalidOption, i)
		}
		o(c)
	}
	return nil
}

// newConfig returns the defaults, before options.
func newConfig() *config {
	return &config{
		timeout:          DefaultTimeout,
		policy:           RefuseOnError,
		breakFor:         DefaultBreakFor,
		routeScope:       true,
		routePattern:     requestPattern,
		unavailableRetry: time.Second,
		legacy:           true,
		ietf:             true,
		policyName:       DefaultPolicyName,
		now:              time.Now,
		maxWaiting:       DefaultMaxDelayed,

		countCredentialFailures: true,
	}
}

// isNil reports whether l is nil, or a nil pointer (or map, func, ...) in a
// Limiter (or a ConcurrencyLimiter, an Observer): calling it would panic.
func isNil(l any) bool {
	if l == nil {
		return true
	}
	switch v := reflect.ValueOf(l); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// mustHandle panics when next is nil (or a nil HandlerFunc): wrapping it
// is a programming error, caught on the first request at the latest, and
// the function that wraps has no error to return. http.ServeMux.Handle
// panics alike.
func mustHandle(next http.Handler) {
	if next == nil || isNil(next) && reflect.TypeOf(next).Kind() == reflect.Func {
		panic("middleware: nil handler")
	}
}
