package httpratecounter_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-chi/httprate"

	"github.com/redlimit/redlimit/keyfunc"
)

// interopRequest builds a GET request from remote.
func interopRequest(remote string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = remote
	return r
}

// TestHTTPRateInterop shows key functions passing both ways between the
// keyfunc package and httprate.
func TestHTTPRateInterop(t *testing.T) {
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

	// keyfunc -> httprate: a keyfunc.KeyFunc converts, a plain function needs
	// nothing. (httprate.Limit, which takes WithKeyFuncs, is deprecated in
	// favour of LimitBy; NewRateLimiter still takes WithKeyFuncs.)
	limited := httprate.LimitBy(1, time.Minute, httprate.JoinKeys(httprate.KeyFunc(keyfunc.IP()), keyfunc.Method))(ok)
	withOption := httprate.NewRateLimiter(1, time.Minute,
		httprate.WithKeyFuncs(httprate.KeyFunc(keyfunc.IP()), keyfunc.Method),
	).Handler(ok)
	for name, h := range map[string]http.Handler{"LimitBy": limited, "WithKeyFuncs": withOption} {
		code := func(remote string) int {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, interopRequest(remote))
			return w.Code
		}
		if c := code("203.0.113.7:1"); c != http.StatusOK {
			t.Errorf("%s: first request: %d, want 200", name, c)
		}
		if c := code("203.0.113.7:2"); c != http.StatusTooManyRequests {
			t.Errorf("%s: second request from one IP: %d, want 429", name, c)
		}
		if c := code("203.0.113.8:1"); c != http.StatusOK {
			t.Errorf("%s: request from another IP: %d, want 200", name, c)
		}
	}

	// httprate -> keyfunc: a plain httprate function and an httprate.KeyFunc value.
	var endpoint keyfunc.KeyFunc = httprate.KeyByEndpoint
	var fixed httprate.KeyFunc = httprate.Key("tenant:acme")
	got, err := keyfunc.Join(endpoint, keyfunc.KeyFunc(fixed), keyfunc.IP())(interopRequest("203.0.113.7:1"))
	if want := "/|tenant:acme|ip:203.0.113.7"; err != nil || got != want {
		t.Errorf("Join(httprate funcs) = %q, %v; want %q", got, err, want)
	}
}
