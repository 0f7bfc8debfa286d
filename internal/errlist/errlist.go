// Package errlist joins errors under a head error on one line: errors.Join
// puts each on a line of its own, which splits a log line.
package errlist

import "strings"

// list is head and its causes: "head: cause; cause", and every one of
// them for errors.Is and errors.As.
type list struct {
	head error
	errs []error
}

// New returns an error that reads "head: errs[0]; errs[1]; ..." on one
// line and wraps head and every error of errs.
func New(head error, errs []error) error {
	return &list{head: head, errs: errs}
}

func (e *list) Error() string {
	var b strings.Builder
	b.WriteString(e.head.Error())
	for i, err := range e.errs {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

func (e *list) Unwrap() []error {
	return append([]error{e.head}, e.errs...)
}
