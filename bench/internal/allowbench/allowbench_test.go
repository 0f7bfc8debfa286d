package allowbench

import "testing"

// BenchmarkAllow compares the memory store's Allow, under each algorithm,
// with golang.org/x/time/rate behind a mutex-guarded map, in one run.
func BenchmarkAllow(b *testing.B) {
	for _, s := range Subjects(Keys) {
		b.Run(s.Name, s.Bench)
	}
}
