// Package defaultstest checks a service's defaults: that its DefaultConfig
// and the configuration its New fills in from a zero one hold the values
// each setting had (a test states them as numbers, so a changed default
// is a changed test).
package defaultstest

import "testing"

// Field is one setting: its value in DefaultConfig, as New fills in a
// zero Config, and the value it must have.
type Field struct {
	name              string
	def, filled, want any
}

// F is the setting name, with its default, the value filled in and the
// value both must be.
func F(name string, def, filled, want any) Field { return Field{name, def, filled, want} }

// Check fails t for each field whose default or filled-in value is not
// the one it must be.
func Check(t testing.TB, fields ...Field) {
	t.Helper()
	for _, f := range fields {
		if f.def != f.want || f.filled != f.want {
			t.Errorf("%s: DefaultConfig %v (%T), filled in %v (%T), want %v (%T)", f.name, f.def, f.def, f.filled, f.filled, f.want, f.want)
		}
	}
}
