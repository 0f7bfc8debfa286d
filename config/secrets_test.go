package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What Build reads from outside the file (passwords from the environment,
// TLS files) is refused at each field's own line, every problem at once,
// in the form of Parse's errors: "file:line: field: problem".
func TestBuildSecretsErrorsAtTheirLines(t *testing.T) {
	t.Setenv("RL_SET", "hunter2")
	t.Setenv("RL_UNSET", "")
	p := newPKI(t)
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.pem")
	tests := []struct {
		name    string
		section string
		want    []string // every line of the error, in order
	}{
		{"password and every TLS file",
			"redis:\n  addr: a:6379\n  password_env: RL_UNSET\n  tls:\n    ca_file: " + missing +
				"\n    cert_file: " + missing + "\n    key_file: " + missing + "\n",
			[]string{
				"t.yaml:3: redis.password_env: the environment variable RL_UNSET is unset or empty",
				"t.yaml:5: redis.tls.ca_file: open " + missing + ": no such file or directory",
				"t.yaml:6: redis.tls.cert_file: open " + missing + ": no such file or directory",
				"t.yaml:7: redis.tls.key_file: open " + missing + ": no such file or directory",
			}},
		{"sentinel's and master's passwords",
			"redis:\n  sentinel:\n    master_name: m\n    addrs: [\"a:26379\"]\n    password_env: RL_UNSET\n  password_env: RL_UNSET\n",
			[]string{
				"t.yaml:5: redis.sentinel.password_env: the environment variable RL_UNSET is unset or empty",
				"t.yaml:6: redis.password_env: the environment variable RL_UNSET is unset or empty",
			}},
		{"a CA file without a certificate, a key of another certificate",
			"redis:\n  addr: a:6379\n  password_env: RL_SET\n  tls: {ca_file: " + notPEM +
				", cert_file: " + p.clientCert + ", key_file: " + p.serverKey + "}\n",
			[]string{
				"t.yaml:4: redis.tls.ca_file: " + notPEM + ": no PEM certificate in it",
				"t.yaml:4: redis.tls.cert_file: with key_file: tls: private key does not match public key",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.section+okPolicy), "t.yaml")
			if err != nil {
				t.Fatal(err)
			}
			rt, err := c.Build(WithLogger(quiet()))
			if err == nil {
				rt.Close(closeCtx())
				t.Fatal("built, want errors")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%v does not wrap ErrInvalid", err)
			}
			if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("error\n%v\nwant\n%s", err, strings.Join(tt.want, "\n"))
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error repeats a password: %v", err)
			}
		})
	}
}

// A Config made in code has no lines: its errors name the redis section's.
func TestBuildSecretsErrorsInCode(t *testing.T) {
	t.Setenv("RL_UNSET", "")
	c, err := Parse([]byte("redis:\n  addr: a:6379\n"+okPolicy), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c.lines = nil
	c.Redis.PasswordEnv = "RL_UNSET"
	_, err = c.Build(WithLogger(quiet()))
	if want := "t.yaml:2: redis.password_env: the environment variable RL_UNSET is unset or empty"; err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}
