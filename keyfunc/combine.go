package keyfunc

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/errlist"
)

// Separator joins the parts of a [Join] key. No key made by this package
// contains it, and Join escapes it in keys made elsewhere.
const Separator = "|"

// FirstOf returns a KeyFunc that tries fns in order and returns the first
// key obtained, such as a JWT's subject (package jwtkey), then APIKey, then
// IP. A function that returns an empty key counts as failed ([ErrEmptyKey]).
//
// When all fail, the error wraps [ErrNoKey] and every function's error, so
// errors.Is still finds, say, [ErrInvalidToken]. The package's own errors
// hold no secret; a function from elsewhere must take the same care.
//
// An invalid token or key falls through to the next function, so a client
// cannot make one up to earn a key of its own: it is then keyed as if it
// had sent none. Keys from functions outside this package should carry a
// namespace of their own to stay apart from these.
//
// With no functions, or a nil one, every call fails with [algorithms.ErrInvalidOption].
func FirstOf(fns ...KeyFunc) KeyFunc {
	fns, err := checkFuncs("FirstOf", fns)
	if err != nil {
		return failing(err)
	}
	return func(r *http.Request) (string, error) {
		var errs []error // allocated only on failure
		for _, fn := range fns {
			key, err := fn(r)
			if err == nil && key != "" {
				return key, nil
			}
			if err == nil {
				err = ErrEmptyKey
			}
			errs = append(errs, err)
		}
		return "", errlist.New(ErrNoKey, errs)
	}
}

// Join returns a KeyFunc whose key is the keys of all fns joined by
// [Separator], such as Route and IP for a limit per route and client:
// "route:/search|ip:192.0.2.1". It fails if any part fails or is empty.
//
// Parts are escaped ('%' as "%25", '|' as "%7C") so that no part can
// forge a separator; keys made by this package contain neither and pass
// unchanged.
//
// With no functions, or a nil one, every call fails with [algorithms.ErrInvalidOption].
func Join(fns ...KeyFunc) KeyFunc {
	fns, err := checkFuncs("Join", fns)
	if err != nil {
		return failing(err)
	}
	return func(r *http.Request) (string, error) {
		var b strings.Builder
		for i, fn := range fns {
			key, err := fn(r)
			if err == nil && key == "" {
				err = ErrEmptyKey
			}
			if err != nil {
				return "", fmt.Errorf("keyfunc: Join part %d: %w", i, err)
			}
			if i > 0 {
				b.WriteString(Separator)
			}
			writeEscaped(&b, key)
		}
		return b.String(), nil
	}
}

func checkFuncs(name string, fns []KeyFunc) ([]KeyFunc, error) {
	if len(fns) == 0 {
		return nil, fmt.Errorf("%w: %s needs at least one function", algorithms.ErrInvalidOption, name)
	}
	for i, fn := range fns {
		if fn == nil {
			return nil, fmt.Errorf("%w: %s: function %d is nil", algorithms.ErrInvalidOption, name, i)
		}
	}
	// A copy, so that a caller reusing its slice cannot change us later.
	return append([]KeyFunc(nil), fns...), nil
}

func writeEscaped(b *strings.Builder, s string) {
	if !strings.ContainsAny(s, "%|") {
		b.WriteString(s)
		return
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '%':
			b.WriteString("%25")
		case '|':
			b.WriteString("%7C")
		default:
			b.WriteByte(s[i])
		}
	}
}
