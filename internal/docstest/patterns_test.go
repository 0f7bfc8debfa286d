package docstest

import (
	"fmt"
	"testing"
)

// The patterns find the names prose writes, and nothing else that looks
// like them.
func TestRefPatterns(t *testing.T) {
	pattern := qualifiedPattern([]string{"middleware", "redisstore", "metrics"})
	known := map[string]string{"middleware": "m"}
	tests := []struct {
		line string
		want string // the refs found, qualified then doc links
	}{
		{"switch to FailLocal (redisstore.WithFailureMode)", "[redisstore.WithFailureMode]"},
		{"`middleware.Decision.Outcome` and metrics.New.", "[middleware.Decision.Outcome metrics.New]"},
		{"  \\nDo: redisstore.New(client)", "[redisstore.New]"},
		{"github.com/redlimit/redlimit/middleware.New is a path", "[]"},
		{"see middleware.go and redisstore.md, or x.middleware.New", "[]"},
		{"redisstore.Store.close is lower case: redisstore.Store", "[redisstore.Store redisstore.Store]"},
		{"an error wrapping [ErrInvalid], see [Store.Close].", "[ErrInvalid Store.Close]"},
		{"a link [middleware.New] is qualified, [middleware] a package", "[middleware.New]"},
		{"s[N] indexes, [x] is lower case, [Name](url) is Markdown", "[]"},
	}
	for _, tt := range tests {
		got := qualifiedRefs(pattern, tt.line, 1)
		got = append(got, docLinkRefs(tt.line, 1, known)...)
		var names []string
		for _, r := range got {
			names = append(names, r.String())
		}
		if s := fmt.Sprint(names); s != tt.want {
			t.Errorf("%q: found %s, want %s", tt.line, s, tt.want)
		}
	}
}

// Doc comments' code blocks are Go when they parse as statements that
// do something, or as declarations; tables, YAML and shell are not.
func TestSampleKind(t *testing.T) {
	tests := []struct {
		code string
		want string
	}{
		{"mw, err := middleware.New(limiter)\n", "statements"},
		{"c, err := httpratecounter.New(client)\n   \nif err := c.Err(); err != nil {     }\n", "statements"},
		{"func TestConformance(t *testing.T) {\n\tstoretest.Run(t, nil)\n}\n", "declarations"},
		{"redis:\n  url_env: REDIS_URL\n", ""},
		{"go run ./example -config example/redlimit.yaml\n", ""},
		{"GET  /policies   the policies and their routes\n", ""},
		{"x\n", ""},
	}
	for _, tt := range tests {
		if got := sampleKind(tt.code); got != tt.want {
			t.Errorf("%q: %q, want %q", tt.code, got, tt.want)
		}
	}
}
