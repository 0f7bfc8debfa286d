package operator

import (
	"encoding/json"
	"net/http"
)

// problem is an RFC 9457 problem type of this handler; each answer brings
// its own detail, which names nothing internal and no client.
type problem int

const (
	badRequest  = problem(http.StatusBadRequest)
	notFound    = problem(http.StatusNotFound)
	unavailable = problem(http.StatusServiceUnavailable)
)

// problems maps the statuses routesFor returns to their problems.
var problems = map[int]problem{http.StatusBadRequest: badRequest, http.StatusNotFound: notFound}

// problemBody is the JSON of a problem, in the order RFC 9457 lists members.
type problemBody struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

func (p problem) write(w http.ResponseWriter, detail string) {
	status := int(p)
	body, _ := json.Marshal(problemBody{ // strings and ints always marshal
		Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail,
	})
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// methodNotAllowed answers 405 with the methods allowed.
func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	problem(http.StatusMethodNotAllowed).write(w, "Allowed methods: "+allow+".")
}
