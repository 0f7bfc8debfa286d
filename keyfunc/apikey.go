package keyfunc

import (
	"fmt"
	"net/http"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/keytext"
)

// maxAPIKeyLen is the longest API key accepted, in bytes. Real keys are
// far shorter; the bound keeps hashing cheap whatever a client sends.
const maxAPIKeyLen = 256

// APIKey returns a KeyFunc that keys a request by the API key in the named
// header: "key:" followed by [HashAPIKey] of the key. The raw key never
// appears in the key or in an error, so it cannot leak into Redis, logs or
// response headers.
//
// A missing or empty header is an error wrapping [ErrNoAPIKey]. A key
// longer than 256 bytes, or a header sent more than once (which of
// two keys would count?), is an error wrapping [ErrInvalidAPIKey].
//
// Without [KnownAPIKey], APIKey does not check that the key is valid, and
// a client that makes up a new key for every request gets a new bucket for
// every request: put it after the handler that authenticates keys, or give
// it KnownAPIKey, which turns an unknown key into an error wrapping
// [ErrInvalidAPIKey] (so [FirstOf] goes on to the next function, such as
// [IP]). An empty header name or KnownAPIKey(nil) makes every call fail with
// [algorithms.ErrInvalidOption]; a nil option is ignored.
func APIKey(header string, opts ...APIKeyOption) KeyFunc {
	if header == "" {
		return failing(fmt.Errorf("%w: APIKey: empty header name", algorithms.ErrInvalidOption))
	}
	var cfg apiKeyConfig
	for _, o := range opts {
		if o != nil { // a nil option configures nothing, as for IP and JWTSubject
			o(&cfg)
		}
	}
	if cfg.err != nil {
		return failing(cfg.err)
	}
	// Index the map directly with the canonical name: Header.Get would
	// canonicalize, and perhaps allocate, on every request.
	name := http.CanonicalHeaderKey(header)
	return func(r *http.Request) (string, error) {
		values := r.Header[name]
		switch {
		case len(values) == 0 || values[0] == "":
			return "", ErrNoAPIKey
		case len(values) > 1:
			return "", errAPIKeyRepeated
		case len(values[0]) > maxAPIKeyLen:
			return "", errAPIKeyTooLong
		case cfg.known != nil && !cfg.known(values[0]):
			return "", errAPIKeyUnknown
		}
		var buf [4 + 2*keytext.HashBytes]byte
		b := append(buf[:0], "key:"...)
		return string(keytext.AppendHash(b, values[0])), nil
	}
}

// APIKey's errors hold nothing from the request, so they are made once.
var (
	errAPIKeyRepeated = fmt.Errorf("%w: header sent more than once", ErrInvalidAPIKey)
	errAPIKeyTooLong  = fmt.Errorf("%w: longer than %d bytes", ErrInvalidAPIKey, maxAPIKeyLen)
	errAPIKeyUnknown  = fmt.Errorf("%w: not a known key", ErrInvalidAPIKey)
)

// APIKeyOption configures [APIKey].
type APIKeyOption func(*apiKeyConfig)

type apiKeyConfig struct {
	known func(raw string) bool
	err   error
}

// KnownAPIKey makes [APIKey] accept only keys for which known returns true,
// so made-up keys cannot buy fresh limits. known gets the raw key (to look
// up or compare as the application stores keys) after the length bound has
// been checked; it runs on every request, so it should be fast, and it must
// not log the key. A nil known is a misconfiguration, not "every key":
// the KeyFunc then fails every request with [algorithms.ErrInvalidOption].
func KnownAPIKey(known func(raw string) bool) APIKeyOption {
	return func(c *apiKeyConfig) {
		if known == nil {
			c.err = fmt.Errorf("%w: KnownAPIKey: nil function", algorithms.ErrInvalidOption)
			return
		}
		c.known = known
	}
}

// HashAPIKey returns the hash that [APIKey] puts in its keys: the first
// 16 bytes of the key's SHA-256, in 32 lower-case hex digits. Compare a
// stored key's hash with it, for example to pick a tier, without keeping
// the raw key around: APIKey's result for raw is "key:"+HashAPIKey(raw).
func HashAPIKey(raw string) string {
	var buf [2 * keytext.HashBytes]byte
	return string(keytext.AppendHash(buf[:0], raw))
}
