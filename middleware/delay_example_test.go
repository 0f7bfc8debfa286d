package middleware_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/middleware"
)

// Shaping instead of refusing: a leaky bucket of 4 a second, burst 1, with
// requests held up to 500ms for their turn. Of four requests at once, the
// first passes at once, two wait 250 and 500ms, the last gets 429.
func ExampleWithDelay() {
	store, err := memstore.New()
	if err != nil {
		log.Fatal(err)
	}
	limiter, err := algorithms.New(store, algorithms.LeakyBucket,
		algorithms.PerSecond(4).WithBurst(1))
	if err != nil {
		log.Fatal(err)
	}
	limit, err := middleware.New(limiter, middleware.WithDelay(500*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	h := limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))

	codes := make([]int, 4)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = "192.0.2.1:1234"
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			codes[i] = w.Code
		}()
	}
	wg.Wait()
	passed, refused := 0, 0
	for _, c := range codes {
		switch c {
		case http.StatusOK:
			passed++
		case http.StatusTooManyRequests:
			refused++
		}
	}
	fmt.Println(passed, "passed,", refused, "refused")
	// Output:
	// 3 passed, 1 refused
}
