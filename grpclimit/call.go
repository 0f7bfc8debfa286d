package grpclimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// maxForwardedLen bounds the forwarding metadata (x-forwarded-for and
// forwarded, all values together) of a call, in bytes: a call with more is
// refused with InvalidArgument before its key is derived. keyfunc reads at
// most this much of a chain anyway; real chains are well under a kilobyte.
const maxForwardedLen = 8 << 10

// errForwardedTooLong refuses a call whose forwarding metadata is past
// maxForwardedLen.
var errForwardedTooLong = errors.New("grpclimit: forwarding metadata too long")

// CallRequest returns the stand-in HTTP request that key functions
// (keyfunc.KeyFunc) and predicates such as keyfunc.ClientIPIn's see for a
// call to fullMethod on a server:
//
//   - RemoteAddr is the peer's address ("203.0.113.7:41000"; "" when the
//     context has no peer), which keyfunc.IP keys by, and behind which it
//     reads x-forwarded-for only from keyfunc.TrustProxies' peers;
//   - Header holds the incoming metadata under canonical names ("x-api-key"
//     as "X-Api-Key"), leaving out binary ("-bin") keys and pseudo-headers;
//   - Pattern and URL.Path are the full method name ("/pkg.Service/Method"),
//     Method is POST and Host the :authority;
//   - its context is ctx.
//
// The header values are the metadata's own slices: a key function must not
// change them.
func CallRequest(ctx context.Context, fullMethod string) *http.Request {
	md, _ := metadata.FromIncomingContext(ctx)
	r := &http.Request{
		Method:     http.MethodPost,
		URL:        &url.URL{Path: fullMethod},
		Proto:      "HTTP/2.0",
		ProtoMajor: 2,
		Header:     make(http.Header, len(md)),
		RequestURI: fullMethod,
		Pattern:    fullMethod,
	}
	for k, v := range md {
		switch {
		case k == ":authority" && len(v) > 0:
			r.Host = v[0]
		case strings.HasPrefix(k, ":") || strings.HasSuffix(k, "-bin"):
		default:
			r.Header[textproto.CanonicalMIMEHeaderKey(k)] = v
		}
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		r.RemoteAddr = p.Addr.String()
	}
	return r.WithContext(ctx)
}

// forwardedTooLong reports whether r's forwarding headers, all values
// together, are longer than maxForwardedLen.
func forwardedTooLong(r *http.Request) bool {
	n := 0
	for _, name := range [...]string{"X-Forwarded-For", "Forwarded"} {
		for _, v := range r.Header[name] {
			n += len(v)
		}
	}
	return n > maxForwardedLen
}

// maxMethodLen bounds the full method name kept verbatim in a Method key.
const maxMethodLen = 256

// Method keys a call by its full method name: "rpc:/pkg.Service/Method".
// A name longer than 256 bytes or holding bytes outside printable ASCII, or
// '|', '%' or '#', is hashed ("rpc:#" and 32 hex digits): a server with an
// unknown-service handler sees names clients make up. Join it with another
// key function for a limit per method and client, or use it alone for a
// limit per method shared by every client (with WithMethodScope(false),
// which would otherwise add the name twice). Method never fails.
func Method(r *http.Request) (string, error) {
	m := r.Pattern
	ok := len(m) <= maxMethodLen
	for i := 0; ok && i < len(m); i++ {
		ch := m[i]
		ok = ch > 0x20 && ch < 0x7f && ch != '|' && ch != '%' && ch != '#'
	}
	if ok {
		return "rpc:" + m, nil
	}
	sum := sha256.Sum256([]byte(m))
	return "rpc:#" + hex.EncodeToString(sum[:16]), nil
}
