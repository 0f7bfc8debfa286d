// Package redisurl parses Redis URLs as go-redis does, with errors that
// never repeat any part of the URL.
//
// go-redis's ParseURL and net/url quote what they could not parse: the
// URL, its path, a query parameter or its value. A password holding an
// unescaped '/', '?' or '#' spills into exactly those parts, so its tail
// would reach error messages and logs. Parse says instead what kind of
// thing is wrong, and wraps only [ErrInvalid].
package redisurl

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrInvalid is what every error of [Parse] wraps.
var ErrInvalid = errors.New("not a valid Redis URL")

// hint ends every error: why the URL is not shown, and the usual cause.
const hint = "; the URL is not repeated here, since it may hold a password, " +
	"in which '/', '?', '#', '%' and '@' must be escaped as %2F, %3F, %23, %25 and %40"

// Parse returns go-redis's options for the redis://, rediss:// or unix://
// URL s. A URL go-redis would refuse, or one holding a '#' (which go-redis
// would ignore with all that follows it, such as the rest of a password),
// is an error wrapping [ErrInvalid] that names the part at fault, never
// its text.
func Parse(s string) (*redis.Options, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, invalid("userinfo, host or path could not be parsed")
	}
	if strings.Contains(s, "#") {
		return nil, invalid("it holds a '#', which would end it there")
	}
	o, err := redis.ParseURL(s)
	if err == nil {
		return o, nil
	}
	switch {
	case u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "unix":
		return nil, invalid("the scheme is not redis, rediss or unix")
	case u.Scheme == "unix" && strings.TrimSpace(u.Path) == "":
		return nil, invalid("the socket path is empty")
	case u.Scheme != "unix" && !isDBPath(u.Path):
		return nil, invalid("the path is not a database number")
	}
	return nil, invalid("a query parameter is unknown or its value is not valid")
}

// invalid is the error for what is wrong.
func invalid(what string) error {
	return fmt.Errorf("%w (%s%s)", ErrInvalid, what, hint)
}

// isDBPath reports whether go-redis reads path as a database: empty, or
// one number between slashes.
func isDBPath(path string) bool {
	f := strings.FieldsFunc(path, func(r rune) bool { return r == '/' })
	if len(f) == 0 {
		return true
	}
	_, err := strconv.Atoi(f[0])
	return len(f) == 1 && err == nil
}
