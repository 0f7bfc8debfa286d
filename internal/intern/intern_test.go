package intern

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

func TestStringEqualsInput(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   string
		kept bool // a second call returns the same bytes
	}{
		{"empty", "", false},
		{"ipv4 key", "ip:203.0.113.7", true},
		{"ipv6 key", "ip:2001:db8:1:2::/64", true},
		{"longest kept", strings.Repeat("k", MaxLen), true},
		{"too long", strings.Repeat("k", MaxLen+1), false},
		{"binary", "\x00\xff|route", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tab := New()
			b := []byte(tt.in)
			first := tab.String(b)
			// The caller's buffer is reused for the next key: the string
			// must not change with it.
			for i := range b {
				b[i] = 'x'
			}
			if first != tt.in {
				t.Fatalf("String = %q, want %q", first, tt.in)
			}
			second := tab.String([]byte(tt.in))
			if second != tt.in {
				t.Fatalf("second String = %q, want %q", second, tt.in)
			}
			if same := len(tt.in) > 0 && unsafe.StringData(first) == unsafe.StringData(second); same != tt.kept {
				t.Errorf("second call returned the kept copy: %v, want %v", same, tt.kept)
			}
		})
	}
}

func TestEvictionKeepsAnswersRight(t *testing.T) {
	// Four times as many strings as slots: sets overflow and evict, and
	// every answer, hit or miss, still equals its input, and a string
	// handed out earlier is unchanged.
	tab := New()
	const n = 4 * sets * ways
	held := make([]string, 0, n)
	for round := range 2 {
		for i := range n {
			want := "ip:10." + strconv.Itoa(i>>16) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255)
			got := tab.String([]byte(want))
			if got != want {
				t.Fatalf("round %d: String = %q, want %q", round, got, want)
			}
			if round == 0 {
				held = append(held, got)
			}
		}
	}
	for i, s := range held {
		if want := "ip:10." + strconv.Itoa(i>>16) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255); s != want {
			t.Fatalf("held string %d changed to %q, want %q", i, s, want)
		}
	}
}

func TestConcurrent(t *testing.T) {
	// For the race detector: readers and writers of the same sets.
	tab := New()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			buf := make([]byte, 0, 32)
			for i := range 20_000 {
				buf = strconv.AppendInt(append(buf[:0], "ip:"...), int64((i*7+g)%3000), 10)
				if got := tab.String(buf); got != string(buf) {
					t.Errorf("String = %q, want %q", got, buf)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestAllocs(t *testing.T) {
	tab := New()
	b := []byte("ip:198.51.100.23")
	if a := testing.AllocsPerRun(100, func() { _ = tab.String(b) }); a != 0 {
		t.Errorf("a kept string: %.1f allocations, want 0", a)
	}
	i := 0
	miss := testing.AllocsPerRun(100, func() {
		i++
		_ = tab.String(strconv.AppendInt([]byte("ip:"), int64(i), 10)[:])
	})
	// The AppendInt's buffer escapes to the test's closure; the miss itself
	// is the one copy.
	if miss > 2 {
		t.Errorf("a new string: %.1f allocations, want at most 2", miss)
	}
}

func BenchmarkString(b *testing.B) {
	tab := New()
	keys := make([][]byte, 10_000)
	for i := range keys {
		keys[i] = []byte("ip:10.0." + strconv.Itoa(i>>8) + "." + strconv.Itoa(i&255))
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			_ = tab.String(keys[i])
			if i++; i == len(keys) {
				i = 0
			}
		}
	})
}
