package jwtkey

import (
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func BenchmarkSubject(b *testing.B) {
	token := sign(b, jwt.SigningMethodHS256, hmacSecret, claimsFor("alice", time.Hour))
	kf, r := Subject(hmacKey), bearer(token)
	if _, err := kf(r); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := kf(r); err != nil {
			b.Fatal(err)
		}
	}
}
