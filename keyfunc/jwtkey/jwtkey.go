package jwtkey

import (
	"bytes"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/errlist"
	"github.com/redlimit/redlimit/internal/keytext"
	"github.com/redlimit/redlimit/keyfunc"
)

// Bounds on what a bearer token may make us do.
const (
	// maxTokenLen is the longest bearer token parsed, in bytes.
	maxTokenLen = 8 << 10
	// maxSubjectLen is the longest subject kept verbatim in a key; longer
	// subjects are hashed.
	maxSubjectLen = 256
)

// defaultMethods is the algorithm allow-list Subject applies unless told
// otherwise: the most used algorithm of each family.
var defaultMethods = []string{"HS256", "RS256", "ES256", "EdDSA"}

// errAlgNone explains the rejection of an unsigned token.
var errAlgNone = errors.New(`alg "none" is never accepted`)

// Subject returns a [keyfunc.KeyFunc] that keys a request by the subject of the
// JWT in its "Authorization: Bearer" header: "sub:" followed by the sub
// claim. Only a verified token yields a key; any other is an error and
// never an identity, because an unverified subject is whatever the client
// wants it to be.
//
// keyFunc supplies the verification key, as for jwt.Parse. opts are
// passed to jwt.NewParser after these defaults:
//
//   - jwt.WithValidMethods with HS256, RS256, ES256 and EdDSA, which the
//     caller's own jwt.WithValidMethods replaces: better to name exactly
//     the algorithm you issue;
//   - jwt.WithExpirationRequired(): a token without exp is rejected.
//
// exp and nbf are always checked; add jwt.WithIssuer, jwt.WithAudience and
// jwt.WithLeeway as needed. An HMAC token is verified only with a []byte
// key that is not PEM key material (else an error wrapping
// jwt.ErrInvalidKeyType), and the asymmetric methods take only their own
// key types, so a key function that hands out a public key's bytes cannot
// be used to sign HS256 tokens with it (algorithm confusion). With several
// issuers, key by [IssuerSubject]. Whatever the options, alg "none" is rejected,
// and options that would accept it (an empty jwt.WithValidMethods) or skip
// claims validation (jwt.WithoutClaimsValidation) are invalid.
//
// A missing header or another scheme (such as Basic) is an error wrapping
// [keyfunc.ErrNoToken]. A token longer than 8 KiB, one that fails to
// verify, one without a subject, or two Authorization headers give an
// error wrapping [keyfunc.ErrInvalidToken] and the jwt error that applies (such as
// jwt.ErrTokenExpired). Error texts never hold the token or text taken
// from it; an error from keyFunc is wrapped as it is.
//
// A subject longer than 256 bytes, or holding bytes other than
// letters, digits and "-._~@+=:/", is hashed: "sub:#" followed by 32 hex
// digits.
//
// If the options are invalid, every call fails with [algorithms.ErrInvalidOption];
// use [NewSubject] to learn that at start-up.
func Subject(keyFunc jwt.Keyfunc, opts ...jwt.ParserOption) keyfunc.KeyFunc {
	kf, err := NewSubject(keyFunc, opts...)
	if err != nil {
		return failing(err)
	}
	return kf
}

// NewSubject is [Subject] with its options checked up front: it
// returns an error wrapping [algorithms.ErrInvalidOption] instead of a KeyFunc that
// always fails.
func NewSubject(keyFunc jwt.Keyfunc, opts ...jwt.ParserOption) (keyfunc.KeyFunc, error) {
	return newJWT("jwtkey.Subject", subjectKey, keyFunc, opts)
}

// IssuerSubject is [Subject] keyed by issuer and subject together,
// for services that accept tokens of several issuers (tenants), where
// "alice" of one is not "alice" of another: "iss:<issuer>,sub:<subject>",
// or "isub:#" and 32 hex digits of a hash when either is long or holds
// bytes other than letters, digits and "-._~@+=:/". A verified token
// without an issuer is an error wrapping [keyfunc.ErrInvalidToken].
func IssuerSubject(keyFunc jwt.Keyfunc, opts ...jwt.ParserOption) keyfunc.KeyFunc {
	kf, err := NewIssuerSubject(keyFunc, opts...)
	if err != nil {
		return failing(err)
	}
	return kf
}

// NewIssuerSubject is [IssuerSubject] with its options checked up
// front, as [NewSubject] is.
func NewIssuerSubject(keyFunc jwt.Keyfunc, opts ...jwt.ParserOption) (keyfunc.KeyFunc, error) {
	return newJWT("jwtkey.IssuerSubject", issuerSubjectKey, keyFunc, opts)
}

// subjectKey is Subject's key of verified claims.
func subjectKey(c *jwt.RegisteredClaims) (string, error) {
	return keytext.Namespaced("sub:", c.Subject, maxSubjectLen, isIdentByte), nil
}

// issuerSubjectKey is IssuerSubject's key of verified claims. Neither
// part of the readable form can hold ',', so the two never run together.
func issuerSubjectKey(c *jwt.RegisteredClaims) (string, error) {
	if c.Issuer == "" {
		return "", fmt.Errorf("%w: no issuer", keyfunc.ErrInvalidToken)
	}
	if len(c.Issuer)+len(c.Subject) <= maxSubjectLen && keytext.AllSafe(c.Issuer, isIdentByte) && keytext.AllSafe(c.Subject, isIdentByte) {
		return "iss:" + c.Issuer + ",sub:" + c.Subject, nil
	}
	return keytext.Namespaced("isub:", c.Issuer+"\x00"+c.Subject, 0, isIdentByte), nil
}

// newJWT builds the token key functions: name names it in errors, and key
// turns verified claims into the key.
func newJWT(name string, key func(*jwt.RegisteredClaims) (string, error), keyFunc jwt.Keyfunc, opts []jwt.ParserOption) (keyfunc.KeyFunc, error) {
	if keyFunc == nil {
		return nil, fmt.Errorf("%w: %s: nil jwt.Keyfunc", algorithms.ErrInvalidOption, name)
	}
	all := []jwt.ParserOption{
		jwt.WithValidMethods(defaultMethods),
		jwt.WithExpirationRequired(),
	}
	for _, o := range opts {
		if o != nil { // jwt.NewParser would call a nil option and panic
			all = append(all, o)
		}
	}
	if err := probeParserOptions(all); err != nil {
		return nil, err
	}
	parser := jwt.NewParser(all...)
	return func(r *http.Request) (string, error) {
		token, err := bearerToken(r)
		if err != nil {
			return "", err
		}
		var claims jwt.RegisteredClaims
		var keyErr error // the reason keyFunc gave, or errAlgNone
		t, err := parser.ParseWithClaims(token, &claims, func(t *jwt.Token) (any, error) {
			if t.Method == nil || t.Method.Alg() == jwt.SigningMethodNone.Alg() {
				keyErr = errAlgNone
				return nil, keyErr
			}
			var key any
			key, keyErr = keyFunc(t)
			if keyErr == nil {
				keyErr = checkKeyType(t.Method, key)
			}
			return key, keyErr
		})
		switch {
		case err != nil:
			return "", tokenError(err, keyErr)
		case !t.Valid || claims.ExpiresAt == nil: // belt and braces
			return "", fmt.Errorf("%w: not verified", keyfunc.ErrInvalidToken)
		case claims.Subject == "":
			return "", fmt.Errorf("%w: no subject", keyfunc.ErrInvalidToken)
		}
		return key(&claims)
	}, nil
}

// errKeyForHMAC refuses an HMAC token whose key is not a plain secret.
var errKeyForHMAC = fmt.Errorf("%w: an HMAC token's key must be a secret []byte, not PEM key material", jwt.ErrInvalidKeyType)

// checkKeyType refuses a key of another family than the token's algorithm
// claims: the asymmetric methods check their key types themselves, but any
// []byte passes for HMAC, so a key function that hands out a public key's
// PEM for whatever the token names would let a client sign an HS256 token
// with that public key (algorithm confusion).
func checkKeyType(m jwt.SigningMethod, key any) error {
	if _, ok := m.(*jwt.SigningMethodHMAC); !ok {
		return nil
	}
	b, ok := key.([]byte)
	if !ok {
		return errKeyForHMAC
	}
	if block, _ := pem.Decode(b); block != nil || bytes.Contains(b, []byte("-----BEGIN")) {
		return errKeyForHMAC
	}
	return nil
}

// bearerToken takes the token out of "Authorization: Bearer <token>",
// looking at a bounded number of bytes however long the header is.
func bearerToken(r *http.Request) (string, error) {
	values := r.Header["Authorization"]
	if len(values) == 0 {
		return "", keyfunc.ErrNoToken
	}
	if len(values) > 1 {
		return "", errTokenRepeated
	}
	const scheme = "Bearer "
	v := values[0]
	if len(v) < len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) {
		return "", errNotBearer
	}
	v = v[len(scheme):]
	if len(v) > maxTokenLen+16 { // a little slack for extra spaces
		return "", errTokenTooLong
	}
	v = strings.TrimLeft(v, " ")
	switch {
	case v == "":
		return "", errTokenEmpty
	case len(v) > maxTokenLen:
		return "", errTokenTooLong
	}
	return v, nil
}

// bearerToken's errors hold nothing from the request, so they are made once.
var (
	errTokenRepeated = fmt.Errorf("%w: Authorization header sent more than once", keyfunc.ErrInvalidToken)
	errNotBearer     = fmt.Errorf("%w: Authorization is not a Bearer scheme", keyfunc.ErrNoToken)
	errTokenTooLong  = fmt.Errorf("%w: longer than %d bytes", keyfunc.ErrInvalidToken, maxTokenLen)
	errTokenEmpty    = fmt.Errorf("%w: empty Bearer token", keyfunc.ErrInvalidToken)
)

// jwtErrors are the jwt sentinels a rejected token is reported with. jwt's
// own error texts can quote the token's header (its alg), so only these
// fixed texts are passed on.
var jwtErrors = []error{
	jwt.ErrTokenMalformed,
	jwt.ErrTokenUnverifiable,
	jwt.ErrTokenSignatureInvalid,
	jwt.ErrTokenRequiredClaimMissing,
	jwt.ErrTokenExpired,
	jwt.ErrTokenNotValidYet,
	jwt.ErrTokenUsedBeforeIssued,
	jwt.ErrTokenInvalidIssuer,
	jwt.ErrTokenInvalidAudience,
	jwt.ErrTokenInvalidSubject,
	jwt.ErrTokenInvalidId,
	jwt.ErrTokenInvalidClaims,
	jwt.ErrInvalidKey,
	jwt.ErrInvalidKeyType,
	jwt.ErrHashUnavailable,
}

func tokenError(err, keyErr error) error {
	var causes []error
	for _, s := range jwtErrors {
		if errors.Is(err, s) {
			causes = append(causes, s)
		}
	}
	if keyErr != nil {
		causes = append(causes, keyErr)
	}
	return errlist.New(keyfunc.ErrInvalidToken, causes)
}

// probeKey signs the probe tokens; they never leave this process.
var probeKey = []byte("jwtkey: parser option probe key")

// probeParserOptions makes sure the options keep the promises of
// Subject. The parser's settings cannot be read, so it is tried on two
// tokens that must fail: an unsigned one (the allow-list must stop it
// before keyFunc is even called) and an expired one, correctly signed (the
// claims must be validated).
func probeParserOptions(opts []jwt.ParserOption) error {
	unsigned, err := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.RegisteredClaims{
		Subject:   "probe",
		ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)),
	}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		return fmt.Errorf("jwtkey: Subject probe: %w", err)
	}
	reached := false
	_, _ = jwt.NewParser(opts...).ParseWithClaims(unsigned, &jwt.RegisteredClaims{}, func(*jwt.Token) (any, error) {
		reached = true
		return nil, errAlgNone
	})
	if reached {
		return fmt.Errorf(`%w: jwtkey.Subject: the algorithm allow-list admits "none" (is jwt.WithValidMethods empty?)`, algorithms.ErrInvalidOption)
	}

	expired, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Subject:   "probe",
		ExpiresAt: jwt.NewNumericDate(time.Unix(1, 0)),
	}).SignedString(probeKey)
	if err != nil {
		return fmt.Errorf("jwtkey: Subject probe: %w", err)
	}
	// Allow HS256 for this probe only: the caller's list may not have it.
	p := jwt.NewParser(append(opts[:len(opts):len(opts)], jwt.WithValidMethods([]string{"HS256"}))...)
	if _, err := p.ParseWithClaims(expired, &jwt.RegisteredClaims{}, func(*jwt.Token) (any, error) {
		return probeKey, nil
	}); err == nil {
		return fmt.Errorf("%w: jwtkey.Subject: a token expired in 1970 was accepted (jwt.WithoutClaimsValidation, or a clock or leeway far off?)", algorithms.ErrInvalidOption)
	}
	return nil
}
