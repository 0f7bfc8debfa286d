package subjects

import (
	"net/http"
	"strconv"
	"time"
	"unsafe"
)

// HeadersFloorName is the header floor's row label.
const HeadersFloorName = "floor: five headers"

// HeadersFloor is the floor of the in-memory middlewares that send
// redlimit's default fields: per request it writes X-RateLimit-Limit,
// -Remaining and -Reset, RateLimit-Policy and RateLimit, with a remaining
// count formatted from a clock reading, as cheaply as they can be written
// (canonical names assigned to the header map, every value and its bytes
// in one allocation), and decides nothing. What sending those five fields
// costs any middleware.
func HeadersFloor() Subject {
	return Subject{Name: HeadersFloorName, Kind: Memory, Floor: true, Build: buildHeadersFloor}
}

// headerValues holds one response's five values and their bytes.
type headerValues struct {
	vals [5]string
	text [64]byte
}

func buildHeadersFloor(env Env, next http.Handler) (*Instance, error) {
	limit := strconv.Itoa(env.Rate)
	window := strconv.Itoa(int(env.Period / time.Second))
	policy := `"default";q=` + limit + ";w=" + window
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hv := new(headerValues)
		b := strconv.AppendInt(hv.text[:0], int64(env.Rate-1)-time.Now().UnixNano()%1000, 10)
		n := len(b)
		b = append(b, `"default";r=`...)
		b = append(b, b[:n]...)
		b = append(b, ";t="...)
		b = append(b, window...)
		s := unsafe.String(unsafe.SliceData(b), len(b)) // b is never written again
		hv.vals = [5]string{limit, s[:n], window, policy, s[n:]}
		h := w.Header()
		h["X-Ratelimit-Limit"] = hv.vals[0:1:1]
		h["X-Ratelimit-Remaining"] = hv.vals[1:2:2]
		h["X-Ratelimit-Reset"] = hv.vals[2:3:3]
		h["Ratelimit-Policy"] = hv.vals[3:4:4]
		h["Ratelimit"] = hv.vals[4:5:5]
		next.ServeHTTP(w, r)
	})
	return &Instance{Handler: h, Close: func() {}}, nil
}
