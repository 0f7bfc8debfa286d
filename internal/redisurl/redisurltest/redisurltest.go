// Package redisurltest holds, for tests, Redis URLs that must be refused
// and the check that no error about one repeats any part of it.
package redisurltest

import "strings"

// User and Host are the user name and host of every URL in [Malformed]:
// parts of the URL that no error may repeat either.
const (
	User = "qzv"
	Host = "cachehost"
)

// Case is a URL whose password, Secret, holds a character it should have
// escaped. Want is what an error about it says is wrong.
type Case struct {
	Name, URL, Secret, Want string
}

// Malformed are URLs that go-redis refuses (or, for '#', would read as
// another URL) and whose password a careless error would repeat.
var Malformed = []Case{
	{"'/' then a path of two parts", "redis://qzv:4471/Xk9Wm@cachehost:6379/0", "4471/Xk9Wm", "the path is not a database number"},
	{"'/' then no database", "redis://qzv:4471/Xk9Wm@cachehost", "4471/Xk9Wm", "the path is not a database number"},
	{"'/' after letters", "redis://qzv:Zq7/Xk9Wm@cachehost:6379/0", "Zq7/Xk9Wm", "userinfo, host or path could not be parsed"},
	{"'#'", "redis://qzv:4471#Xk9Wm@cachehost:6379/0", "4471#Xk9Wm", "it holds a '#'"},
	{"'#' after letters", "redis://qzv:Zq7#Xk9Wm@cachehost:6379/0", "Zq7#Xk9Wm", "userinfo, host or path could not be parsed"},
	{"'?'", "redis://qzv:4471?Xk9Wm@cachehost:6379/0", "4471?Xk9Wm", "a query parameter is unknown"},
	{"'?' then a parameter", "redis://qzv:4471?db=Xk9Wm@cachehost:6379/0", "4471?db=Xk9Wm", "a query parameter is unknown or its value is not valid"},
	{"'%zz'", "redis://qzv:Zq7%zzXk9@cachehost:6379/0", "Zq7%zzXk9", "userinfo, host or path could not be parsed"},
	{"a space", "redis://qzv:Zq7 Xk9Wm@cachehost:6379/0", "Zq7 Xk9Wm", "userinfo, host or path could not be parsed"},
	{"no scheme", "qzv:Zq7Xk9Wm@cachehost:6379/0", "Zq7Xk9Wm", "the scheme is not redis, rediss or unix"},
	{"unix without a path", "unix://qzv:Zq7Xk9Wm@", "Zq7Xk9Wm", "the socket path is empty"},
}

// Leak returns the part of c's URL that text repeats: the password or any
// three characters of it, the user or the host, case aside; "" if none.
func (c Case) Leak(text string) string {
	text = strings.ToLower(text)
	for _, whole := range []string{User, Host} {
		if strings.Contains(text, whole) {
			return whole
		}
	}
	s := strings.ToLower(c.Secret)
	for i := 0; i+3 <= len(s); i++ {
		if strings.Contains(text, s[i:i+3]) {
			return s[i : i+3]
		}
	}
	return ""
}
