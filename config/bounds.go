package config

import (
	"fmt"
	"math"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
)

// bound is the range of an integer field, both ends allowed.
type bound struct{ min, max int }

// String is the range as every error message states it.
func (b bound) String() string { return fmt.Sprintf("%d..%d", b.min, b.max) }

// bounds is the one table of the integer fields' ranges, by the field's
// name in the file: the decoder checks every integer against it and every
// message about a range quotes it, so a field never reports two ranges.
// Where the algorithms or keyfunc bound a value (rate, burst,
// ipv6_prefix), the table takes their bound rather than repeating it.
var bounds = map[string]bound{
	"rate":         {1, algorithms.MaxRate},
	"burst":        {1, algorithms.MaxRate},
	"cost":         {1, algorithms.MaxRate},      // a cost above every quota could never pass
	"ipv6_prefix":  {keyfunc.MinIPv6Prefix, 128}, // shorter would put whole networks in one bucket
	"pool_size":    {1, math.MaxInt32},
	"instances":    {1, math.MaxInt32},
	"denial_cache": {0, math.MaxInt32},
	"max_keys":     {1024, math.MaxInt32}, // memstore.WithMaxKeys's least
	"db":           {0, math.MaxInt32},
}

// boundOf returns the range of the integer field name. A name missing from
// the table is a bug in this package, which the tests find.
func boundOf(name string) bound {
	b, ok := bounds[name]
	if !ok {
		panic("config: no bound for integer field " + name)
	}
	return b
}
