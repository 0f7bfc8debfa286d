package operator

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/middleware"
	"github.com/redlimit/redlimit/redisstore"
)

// api is a chi API with one policy, "api", on two routes, keyed by client
// IP, and the operator handler for it.
type api struct {
	router http.Handler
	ops    http.Handler
}

func newAPI(t *testing.T, store algorithms.Store) api {
	t.Helper()
	lim, err := algorithms.New(store, algorithms.FixedWindow, algorithms.PerMinute(2))
	if err != nil {
		t.Fatal(err)
	}
	mw, err := middleware.New(lim, middleware.WithKeyFunc(keyfunc.IP()), middleware.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ok := func(http.ResponseWriter, *http.Request) {}
	r := chi.NewRouter()
	r.With(mw).Get("/a", ok)
	r.With(mw).Get("/b/{id}", ok)
	ops, err := New([]Policy{{Name: "api", Limiter: lim, Routes: []string{"/a", "/b/{id}"}}})
	if err != nil {
		t.Fatal(err)
	}
	return api{router: r, ops: ops}
}

// call sends a request from client (an address) to path through api.
func (a api) call(path, client string) int { return a.send(path, client).Code }

// send is call returning the whole answer.
func (a api) send(path, client string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.RemoteAddr = client + ":1234"
	rec := httptest.NewRecorder()
	a.router.ServeHTTP(rec, r)
	return rec
}

// operate sends an operator's request and returns the recorder.
func operate(h http.Handler, method, path string, query url.Values) *httptest.ResponseRecorder {
	target := path
	if query != nil {
		target += "?" + query.Encode()
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

func stores(t *testing.T) map[string]func(prefix string) algorithms.Store {
	single := redis.NewClient(&redis.Options{Addr: redistest.Standalone(t), MaxRetries: -1})
	t.Cleanup(func() { _ = single.Close() })
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.Cluster(t), MaxRetries: -1})
	t.Cleanup(func() { _ = cluster.Close() })
	return map[string]func(string) algorithms.Store{
		"memory":  func(string) algorithms.Store { return must(memstore.New()) },
		"redis":   func(p string) algorithms.Store { return must(redisstore.New(single, redisstore.WithPrefix(p))) },
		"cluster": func(p string) algorithms.Store { return must(redisstore.New(cluster, redisstore.WithPrefix(p))) },
	}
}

// A client exhausted through the middleware is seen by a peek and passes
// at once after a reset through the handler: on one route, then on all
// the policy's routes. Another client keeps its count.
func TestResetThroughHandler(t *testing.T) {
	const alice, bob = "203.0.113.7", "203.0.113.8"
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			a := newAPI(t, store(t.Name()))
			for _, c := range []string{alice, alice, bob, bob} {
				for _, p := range []string{"/a", "/b/1"} {
					if code := a.call(p, c); code != http.StatusOK {
						t.Fatalf("%s from %s: %d before the quota is spent", p, c, code)
					}
				}
			}
			peek := operate(a.ops, http.MethodGet, "/policies/api", url.Values{"identity": {"ip:" + alice}, "route": {"/a"}})
			var got peekResult
			if err := json.Unmarshal(peek.Body.Bytes(), &got); peek.Code != http.StatusOK || err != nil {
				t.Fatalf("peek: %d %s (%v)", peek.Code, peek.Body, err)
			}
			if got.Allowed || got.Limit != 2 || got.Remaining != 0 || got.RetryAfter <= 0 || got.RetryAfter > 60 ||
				got.Policy != "api" || got.Route != "/a" {
				t.Errorf("peek of a spent client: %+v", got)
			}
			steps := []struct {
				reset url.Values // nil: no reset before the request
				path  string
				from  string
				want  int
			}{
				{nil, "/a", alice, http.StatusTooManyRequests},
				{url.Values{"identity": {"ip:" + alice}, "route": {"/a"}}, "/a", alice, http.StatusOK},
				{nil, "/b/2", alice, http.StatusTooManyRequests}, // the other route was not reset
				{nil, "/a", bob, http.StatusTooManyRequests},     // nor the other client
				{url.Values{"identity": {"ip:" + alice}}, "/b/2", alice, http.StatusOK},
				{nil, "/b/3", bob, http.StatusTooManyRequests},
			}
			for i, s := range steps {
				if s.reset != nil {
					method := []string{http.MethodPost, http.MethodDelete}[i%2]
					if rec := operate(a.ops, method, "/policies/api", s.reset); rec.Code != http.StatusOK {
						t.Fatalf("step %d: reset answered %d %s", i, rec.Code, rec.Body)
					}
				}
				if rec := a.send(s.path, s.from); rec.Code != s.want {
					t.Errorf("step %d: %s from %s: %d, want %d (headers %v, body %s)", i, s.path, s.from, rec.Code, s.want,
						rec.Header(), rec.Body)
				}
			}
			peek = operate(a.ops, http.MethodGet, "/policies/api", url.Values{"identity": {"ip:" + alice}, "route": {"/b/{id}"}})
			// One request since the reset: the next would pass and leave 0.
			if err := json.Unmarshal(peek.Body.Bytes(), &got); err != nil || !got.Allowed || got.Remaining != 0 || got.RetryAfter != 0 {
				t.Errorf("peek after a reset and one request: %d %s", peek.Code, peek.Body)
			}
		})
	}
}

func TestListPolicies(t *testing.T) {
	lim, err := algorithms.New(must(memstore.New()), algorithms.FixedWindow, algorithms.PerMinute(2))
	if err != nil {
		t.Fatal(err)
	}
	h, err := New([]Policy{{Name: "z", Limiter: lim}, {Name: "a", Limiter: lim, Routes: []string{"GET /x"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/policies", "/policies/", "/"} {
		rec := operate(h, http.MethodGet, path, nil)
		want := `{"policies":[{"name":"a","routes":["GET /x"]},{"name":"z","routes":[]}]}`
		if rec.Code != http.StatusOK || rec.Body.String() != want || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("GET %s: %d %s %s, want %s", path, rec.Code, rec.Header().Get("Content-Type"), rec.Body, want)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	lim, err := algorithms.New(must(memstore.New()), algorithms.FixedWindow, algorithms.PerMinute(2))
	if err != nil {
		t.Fatal(err)
	}
	for name, ps := range map[string][]Policy{
		"empty name":  {{Limiter: lim}},
		"slash":       {{Name: "a/b", Limiter: lim}},
		"no limiter":  {{Name: "a"}},
		"twice":       {{Name: "a", Limiter: lim}, {Name: "a", Limiter: lim}},
		"route twice": {{Name: "a", Limiter: lim, Routes: []string{"/x", "/x"}}},
		"empty route": {{Name: "a", Limiter: lim, Routes: []string{""}}},
		"unprintable": {{Name: "a\x00", Limiter: lim}},
	} {
		if _, err := New(ps); err == nil {
			t.Errorf("%s: New accepted %+v", name, ps)
		}
	}
}
