package config

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redlimit/redlimit/internal/redisurl/redisurltest"
)

// eachError calls f with err and every error it wraps, through both forms
// of Unwrap.
func eachError(err error, f func(error)) {
	if err == nil {
		return
	}
	f(err)
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		eachError(u.Unwrap(), f)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			eachError(e, f)
		}
	}
}

// noTime leaves the time out of log lines, whose digits are not the URL's.
var noTime = &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 {
		return slog.Attr{}
	}
	return a
}}

// A Redis URL that go-redis would refuse (or read as another URL) is
// refused by Parse (url), Build (url_env) and a reload (url_env), with what
// is wrong and where, and no error, wrapped error or log line repeats the
// password, three characters of it, the user or the host.
func TestRedisURLNeverRepeated(t *testing.T) {
	const env = "RL_TEST_LEAK_URL"
	withEnv := "redis:\n  url_env: " + env + "\n" + okPolicy
	dir := t.TempDir()
	path := filepath.Join(dir, "reload.yaml")
	if err := os.WriteFile(path, []byte(withEnv), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range redisurltest.Malformed {
		t.Run(tt.Name, func(t *testing.T) {
			t.Setenv(env, tt.URL)
			check := func(how, text, want string) {
				t.Helper()
				if !strings.Contains(text, want) || !strings.Contains(text, tt.Want) {
					t.Errorf("%s: %q lacks %q or %q", how, text, want, tt.Want)
				}
				if l := tt.Leak(text); l != "" {
					t.Errorf("%s: %q repeats %q", how, text, l)
				}
			}
			checkErr := func(how string, err error, want string) {
				t.Helper()
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("%s: error %v, want one wrapping ErrInvalid", how, err)
				}
				check(how, err.Error(), want)
				eachError(err, func(e error) {
					if l := tt.Leak(e.Error()); l != "" {
						t.Errorf("%s: wrapped error %q repeats %q", how, e, l)
					}
				})
			}

			_, err := Parse([]byte("redis:\n  url: '"+tt.URL+"'\n"+okPolicy), "t.yaml")
			checkErr("Parse", err, "t.yaml:2: redis.url: not a valid Redis URL")

			c := mustParse(t, withEnv)
			rt, err := c.Build(WithLogger(quiet()))
			if err == nil {
				rt.Close(closeCtx())
			}
			checkErr("Build", err, "served.yaml: redis.url_env ("+env+"): not a valid Redis URL")

			var log bytes.Buffer
			rt = mustBuild(t, mustParse(t, okPolicy), WithLogger(slog.New(slog.NewTextHandler(&log, noTime))))
			checkErr("ReloadFile", rt.ReloadFile(path), "reload.yaml: redis.url_env ("+env+"): not a valid Redis URL")
			check("the reload's log", log.String(), "configuration not reloaded")
			if rt.Store() != "memory (this process only)" {
				t.Errorf("after the refused reload the store is %s", rt.Store())
			}
		})
	}
}
