package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
)

// defaultUnavailableAfter is an Unavailable answer's retry delay unless
// WithUnavailableRetryAfter says otherwise, as the HTTP middleware's 503.
const defaultUnavailableAfter = time.Second

// maxPolicyName bounds a policy name, as the HTTP middleware does.
const maxPolicyName = 64

// config is the interceptors' configuration, fixed by newConfig.
type config struct {
	keyFunc          keyfunc.KeyFunc
	cost             func(ctx context.Context, fullMethod string, req any) int
	skip             func(ctx context.Context, fullMethod string) bool
	skipSet          bool
	scope            bool
	shadow           bool
	failure          middleware.ErrorPolicy
	observer         middleware.Observer
	policyName       string
	legacy, ietf     bool
	timeout          time.Duration
	timeoutSet       bool
	unavailableAfter time.Duration
	messages         algorithms.Limiter
	messagesSet      bool
	logger           *slog.Logger
	now              func() time.Time
	nowSet           bool
	methodOrder      []methodLimiter

	main     *policy            // the limiter given to the constructor
	methods  map[string]*policy // WithMethodLimiter's
	msgs     *policy            // WithMessageLimiter's, or nil
	logGate  logGate
	keySeeds keySeed
}

// methodLimiter is one WithMethodLimiter, as given.
type methodLimiter struct {
	method, policy string
	limiter        algorithms.Limiter
}

// newConfig applies opts over the defaults and refuses what no call could
// be served with.
func newConfig(limiter algorithms.Limiter, opts []Option) (*config, error) {
	c := &config{
		scope:            true,
		failure:          middleware.RefuseOnError,
		policyName:       middleware.DefaultPolicyName,
		legacy:           true,
		ietf:             true,
		timeout:          middleware.DefaultTimeout,
		unavailableAfter: defaultUnavailableAfter,
	}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: option %d is nil", algorithms.ErrInvalidOption, i)
		}
		o(c)
	}
	if err := c.check(limiter); err != nil {
		return nil, fmt.Errorf("%w: %v", algorithms.ErrInvalidOption, err)
	}
	if c.keyFunc == nil {
		c.keyFunc = keyfunc.IP()
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.keySeeds = newKeySeed()
	c.describe(limiter)
	return c, nil
}

// check refuses the settings that no call could be served with.
func (c *config) check(limiter algorithms.Limiter) error {
	switch {
	case isNil(limiter):
		return errors.New("the limiter is nil")
	case c.skipSet && c.skip == nil:
		return errors.New("WithSkip(nil)")
	case c.failure != middleware.PassOnError && c.failure != middleware.RefuseOnError:
		return fmt.Errorf("unknown failure policy %d", int(c.failure))
	case c.observer != nil && isNil(c.observer):
		return errors.New("WithObserver: a nil pointer")
	case c.timeout <= 0:
		return fmt.Errorf("WithTimeout(%s): the timeout must be positive", c.timeout)
	case c.unavailableAfter <= 0:
		return fmt.Errorf("WithUnavailableRetryAfter(%s): the delay must be positive", c.unavailableAfter)
	case c.messagesSet && isNil(c.messages):
		return errors.New("WithMessageLimiter(nil)")
	case c.nowSet && c.now == nil:
		return errors.New("WithClock(nil)")
	}
	if err := checkPolicyName(c.policyName); err != nil {
		return err
	}
	for _, m := range c.methodOrder {
		switch {
		case !strings.HasPrefix(m.method, "/"):
			return fmt.Errorf("WithMethodLimiter(%q): a full method name starts with '/'", m.method)
		case isNil(m.limiter):
			return fmt.Errorf("WithMethodLimiter(%q): the limiter is nil", m.method)
		}
		if err := checkPolicyName(m.policy); err != nil {
			return fmt.Errorf("WithMethodLimiter(%q): %w", m.method, err)
		}
	}
	return nil
}

// describe makes the policies of the limiters.
func (c *config) describe(limiter algorithms.Limiter) {
	c.main = newPolicy(limiter, c.policyName)
	c.methods = make(map[string]*policy, len(c.methodOrder))
	for _, m := range c.methodOrder {
		c.methods[m.method] = newPolicy(m.limiter, m.policy)
	}
	if c.messages != nil {
		c.msgs = newPolicy(c.messages, c.policyName+"-messages")
	}
}

// checkPolicyName accepts 1 to 64 printable ASCII characters, which a
// Structured Field string holds.
func checkPolicyName(name string) error {
	if name == "" || len(name) > maxPolicyName {
		return fmt.Errorf("policy name must be 1 to %d characters, got %d", maxPolicyName, len(name))
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x20 || name[i] > 0x7e {
			return fmt.Errorf("policy name %q has a character outside printable ASCII", name)
		}
	}
	return nil
}

// policyFor returns the policy that limits fullMethod.
func (c *config) policyFor(fullMethod string) *policy {
	if p, ok := c.methods[fullMethod]; ok {
		return p
	}
	return c.main
}

// isNil reports whether v is nil or a nil pointer (or map, func...) in an
// interface.
// canReserve reports whether l is a RateLimiter of an algorithm that can
// reserve (Algorithm.CanReserve); l is not nil.
func canReserve(l algorithms.Limiter) bool {
	r, ok := l.(algorithms.RateLimiter)
	return ok && r.Algorithm().CanReserve()
}

func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
