package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/redistest"
)

// pki is a test certificate authority and the server and client
// certificates it signed, as PEM files in a temporary folder.
type pki struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	write := func(name, kind string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, usage x509.ExtKeyUsage, certName, keyName string) (string, string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "redis.test"},
			DNSNames: []string{"redis.test"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, _ := x509.MarshalECPrivateKey(key)
		return write(certName, "CERTIFICATE", der), write(keyName, "EC PRIVATE KEY", keyDER)
	}
	p := pki{ca: write("ca.pem", "CERTIFICATE", caDER)}
	p.serverCert, p.serverKey = leaf(2, x509.ExtKeyUsageServerAuth, "server.pem", "server.key")
	p.clientCert, p.clientKey = leaf(3, x509.ExtKeyUsageClientAuth, "client.pem", "client.key")
	return p
}

// The TLS section's files are read when the store is made.
func TestTLSConfig(t *testing.T) {
	p := newPKI(t)
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		s          storeSettings
		serverName string
		certs      int
		err        string
	}{
		{"off", storeSettings{kind: storeAddr}, "", 0, ""},
		{"system authorities", storeSettings{kind: storeAddr, tlsOn: true}, "", 0, ""},
		{"all files", storeSettings{kind: storeAddr, tlsOn: true, tls: TLS{CAFile: p.ca, CertFile: p.clientCert, KeyFile: p.clientKey, ServerName: "redis.test"}},
			"redis.test", 1, ""},
		{"no CA file", storeSettings{kind: storeAddr, tlsOn: true, tls: TLS{CAFile: p.ca + ".missing"}}, "", 0, "ca_file: open "},
		{"not PEM", storeSettings{kind: storeAddr, tlsOn: true, tls: TLS{CAFile: notPEM}}, "", 0, "no PEM certificate in it"},
		{"key of another certificate", storeSettings{kind: storeAddr, tlsOn: true, tls: TLS{CertFile: p.clientCert, KeyFile: p.serverKey}},
			"", 0, "cert_file: with key_file: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc, err := tlsConfig(tt.s)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			switch {
			case err != nil:
				t.Fatal(err)
			case !tt.s.tlsOn:
				if tc != nil {
					t.Fatalf("TLS on: %+v", tc)
				}
				return
			case tc.InsecureSkipVerify || tc.MinVersion < 0x0303:
				t.Fatalf("weak: %+v", tc)
			case tc.ServerName != tt.serverName || len(tc.Certificates) != tt.certs || (tt.s.tls.CAFile != "") != (tc.RootCAs != nil):
				t.Fatalf("server name %q, %d certificates, roots %v", tc.ServerName, len(tc.Certificates), tc.RootCAs != nil)
			}
		})
	}
}

// A server that requires TLS with client certificates is reached with the
// file's CA, certificate and key; without the client certificate nothing
// reaches it.
func TestServeRedisTLS(t *testing.T) {
	p := newPKI(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tlsPort := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	srv := redistest.StartServerWith(t, "--tls-port", tlsPort, "--tls-cert-file", p.serverCert, "--tls-key-file", p.serverKey,
		"--tls-ca-cert-file", p.ca, "--tls-auth-clients", "yes")
	plain := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer plain.Close()
	base := "redis:\n  addr: 127.0.0.1:" + tlsPort + "\n  prefix: %s\n  timeout: 1s\n  failure_mode: closed\n  tls:\n    ca_file: " + p.ca + "\n    server_name: redis.test\n"
	for _, tt := range []struct {
		name, prefix, extra string
		want                []int
	}{
		{"without a client certificate", "nocert", "", ints(503, 503)},
		{"with the client certificate", "tls", "    cert_file: " + p.clientCert + "\n    key_file: " + p.clientKey + "\n", ints(200, 200, 200, 429)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rt, h := mount(t, strings.Replace(base, "%s", tt.prefix, 1)+tt.extra+served, buildOpts(quiet())...)
			if want := "Redis at 127.0.0.1:" + tlsPort + " db 0 over TLS"; rt.Store() != want {
				t.Fatalf("Store() %q, want %q", rt.Store(), want)
			}
			if got := codes(h, len(tt.want), "GET", "/items", "192.0.2.1:1"); !equal(got, tt.want) {
				t.Fatalf("%v, want %v", got, tt.want)
			}
			if n := countKeys(t, plain, tt.prefix); (n > 0) != (tt.want[0] == 200) {
				t.Fatalf("%d keys under %s", n, tt.prefix)
			}
		})
	}
}
