// Package bytesize reads and writes sizes in bytes with units, as the
// command's flags take them and its tables print them.
package bytesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size is a flag.Value of a size in bytes, written as a number with
// an optional unit: B, KiB/MiB/GiB (or Ki/Mi/Gi, as Kubernetes writes
// them; also K/M/G), KB/MB/GB (powers of 1000). "320MiB" = 335544320.
type Size int64

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30},
	{"B", 1},
}

func (b *Size) Set(s string) error {
	s = strings.TrimSpace(s)
	mult := int64(1)
	num := s
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v < 0 || v > math.MaxInt64/mult {
		return fmt.Errorf("%q: want a size such as 320MiB, 1GiB or a number of bytes", s)
	}
	*b = Size(v * mult)
	return nil
}

// String is the size in the largest binary unit that divides it.
func (b *Size) String() string {
	v := int64(*b)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v != 0 && v%u.mult == 0 {
			return strconv.FormatInt(v/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(v, 10)
}
