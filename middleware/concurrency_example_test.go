package middleware_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/memstore"
	"github.com/redlimit/redlimit/middleware"
)

// At most one export per client at a time, behind a rate limit: a second
// export while the first runs gets 429.
func ExampleNewConcurrency() {
	store, err := memstore.New() // or a Redis store, shared by every instance
	if err != nil {
		log.Fatal(err)
	}
	perMinute, _ := algorithms.New(store, algorithms.TokenBucket, algorithms.PerMinute(20))
	oneAtATime, _ := algorithms.NewConcurrency(store, 1, 5*time.Minute) // lease: longer than any export

	started, finish := make(chan struct{}), make(chan struct{})
	export := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-finish
	})
	rate, err := middleware.New(perMinute)
	if err != nil {
		log.Fatal(err)
	}
	concurrency, err := middleware.NewConcurrency(oneAtATime)
	if err != nil {
		log.Fatal(err)
	}
	h := rate(concurrency(export))

	first := make(chan int)
	go func() {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/export", nil)
		r.RemoteAddr = "203.0.113.9:1234"
		h.ServeHTTP(w, r)
		first <- w.Code
	}()
	<-started

	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/export", nil)
	r.RemoteAddr = "203.0.113.9:1234"
	h.ServeHTTP(w, r)
	fmt.Println(w.Code, w.Header().Get("Retry-After"))
	fmt.Println(w.Header().Values("RateLimit-Policy")[1])
	fmt.Println(w.Header().Values("RateLimit")[1])

	close(finish)
	fmt.Println(<-first)
	// Output:
	// 429 1
	// "concurrency";q=1;qu="concurrent-requests"
	// "concurrency";r=0;t=1
	// 200
}
