package errlist

import (
	"errors"
	"testing"
)

// TestNew: one line, the head first, every error wrapped.
func TestNew(t *testing.T) {
	head, a, b := errors.New("no key"), errors.New("a failed"), errors.New("b failed")
	for _, tc := range []struct {
		errs []error
		want string
	}{
		{nil, "no key"},
		{[]error{a}, "no key: a failed"},
		{[]error{a, b}, "no key: a failed; b failed"},
	} {
		err := New(head, tc.errs)
		if err.Error() != tc.want {
			t.Errorf("%q, want %q", err.Error(), tc.want)
		}
		for _, e := range append([]error{head}, tc.errs...) {
			if !errors.Is(err, e) {
				t.Errorf("%q does not wrap %q", err, e)
			}
		}
	}
}
