package redistest

import "testing"

func FuzzZZParseInfo(f *testing.F) {
	f.Add("a:b")
	f.Fuzz(func(t *testing.T, s string) { _ = parseInfo(s) })
}

func FuzzZZOther(f *testing.F) {
	f.Add("a:b")
	f.Fuzz(func(t *testing.T, s string) { _ = parseInfo(s + ":") })
}

func BenchmarkZZParseInfo(b *testing.B) {
	for b.Loop() {
		_ = parseInfo("cluster_state:ok\r\n")
	}
}
