package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// secrets reads what the store takes from outside the file, when the
// configuration is built: the passwords, from the environment variables r
// names (named, each must be set, since a missing secret is a deployment's
// mistake), and r's TLS files, which must read. Every problem is reported,
// each at its field's own line ("redlimit.yaml:4: redis.password_env:
// ..."), joined in the order of their lines; each wraps ErrInvalid.
func secrets(c *Config, r *Redis, s *storeSettings) error {
	var errs []error
	read := func(field, env string, dst *string) {
		if env == "" {
			return
		}
		if *dst = os.Getenv(env); *dst == "" {
			errs = append(errs, fieldErr(c, field, "the environment variable %s is unset or empty", env))
		}
	}
	if s.kind == storeSentinel {
		read("sentinel.password_env", r.Sentinel.PasswordEnv, &s.sentPassword)
	}
	read("password_env", r.PasswordEnv, &s.password)
	if r.TLS != nil {
		_, _, problems := loadTLS(*r.TLS)
		for _, p := range problems {
			errs = append(errs, fieldErr(c, "tls."+p.field, "%v", p.err))
		}
	}
	sortByLine(errs)
	return errors.Join(errs...)
}

// fieldErr is an error at field of c's redis section, on the field's own
// line; on the section's for a Config made in code, which has no lines.
func fieldErr(c *Config, field, format string, args ...any) error {
	path := join(c.Redis.at.path, field)
	line, ok := c.lines[path]
	if !ok {
		line = c.Redis.at.line
	}
	return errAt(c, position{line, path}, format, args...)
}

// fileProblem is why the file a TLS field names cannot serve.
type fileProblem struct {
	field string // ca_file, cert_file or key_file
	err   error
}

// loadTLS reads t's files: the pool of the CA file, nil without one, and
// the client's certificate, nil without one. It tries every file and
// returns every problem, in the order of the fields.
func loadTLS(t TLS) (*x509.CertPool, *tls.Certificate, []fileProblem) {
	var (
		pool     *x509.CertPool
		problems []fileProblem
	)
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		switch {
		case err != nil:
			problems = append(problems, fileProblem{"ca_file", err})
		default:
			pool = x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				problems = append(problems, fileProblem{"ca_file", fmt.Errorf("%s: %w", t.CAFile, errNoCertificate)})
			}
		}
	}
	if t.CertFile == "" && t.KeyFile == "" {
		return pool, nil, problems
	}
	certPEM, certErr := os.ReadFile(t.CertFile)
	if certErr != nil {
		problems = append(problems, fileProblem{"cert_file", certErr})
	}
	keyPEM, keyErr := os.ReadFile(t.KeyFile)
	if keyErr != nil {
		problems = append(problems, fileProblem{"key_file", keyErr})
	}
	if certErr != nil || keyErr != nil {
		return pool, nil, problems
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return pool, nil, append(problems, fileProblem{"cert_file", fmt.Errorf("with key_file: %w", err)})
	}
	return pool, &cert, problems
}

// errNoCertificate is a CA file without a PEM certificate.
var errNoCertificate = errors.New("no PEM certificate in it")
