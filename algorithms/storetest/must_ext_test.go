package storetest_test

// must returns v, and panics with err when a store's New fails: the tests
// build stores from options they know to be valid.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
