package memstore

import "time"

const ms = time.Millisecond

// start is the tests' fixed start time.
var start = time.Unix(1_800_000_000, 0)
