package memstore

import (
	"context"
	"errors"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
)

// New refuses an invalid option with an error wrapping
// algorithms.ErrInvalidOption, and returns no store.
func TestNewRefusesInvalidOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"nil option", []Option{nil}},
		{"nil clock", []Option{WithClock(nil)}},
		{"zero sweep interval", []Option{WithSweepInterval(0)}},
		{"max keys under 1024", []Option{WithMaxKeys(1023)}},
		{"a valid option, then a nil one", []Option{WithMaxKeys(4096), nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.opts...)
			if !errors.Is(err, algorithms.ErrInvalidOption) || s != nil {
				t.Fatalf("New: %v, %v; want no store and an error wrapping %v", s, err, algorithms.ErrInvalidOption)
			}
		})
	}
}

// A memory store starts no goroutine, so Close has nothing to stop: it
// returns nil whatever its context, as often as it is called, and the
// store's limiters go on deciding.
func TestCloseIsCheap(t *testing.T) {
	s := must(New())
	l, err := algorithms.New(s, algorithms.FixedWindow, algorithms.PerMinute(1))
	if err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for i, ctx := range []context.Context{context.Background(), canceled, canceled} {
		if err := s.Close(ctx); err != nil {
			t.Errorf("Close %d: %v", i, err)
		}
	}
	ctx := context.Background()
	for i, want := range []bool{true, false} {
		if res, err := l.Allow(ctx, "k", 1); err != nil || res.Allowed != want {
			t.Errorf("Allow %d after Close: %+v, %v; want allowed %v", i, res, err, want)
		}
	}
	var zero *Store
	if err := zero.Close(ctx); err != nil {
		t.Errorf("Close of a nil store: %v", err)
	}
}
