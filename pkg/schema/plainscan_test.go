package schema

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// plainSpanSlow is plainSpan a byte at a time.
func plainSpanSlow(b []byte, i int) int {
	for i < len(b) && stringBytes[b[i]] {
		i++
	}
	return i
}

// TestPlainSpan: every byte value, at every place of a word and of the
// tail after the words, ends the plain run exactly where the byte table
// says.
func TestPlainSpan(t *testing.T) {
	for c := range 256 {
		for at := range 19 {
			b := bytes.Repeat([]byte("abcdefgh-_.:/ ?~}"), 2)[:19]
			b[at] = byte(c)
			for from := 0; from <= at; from++ {
				if got, want := plainSpan(b, from), plainSpanSlow(b, from); got != want {
					t.Fatalf("byte %#x at %d, from %d: %d, want %d", c, at, from, got, want)
				}
			}
			if got, want := plainString(string(b)), plainSpanSlow(b, 0) == len(b); got != want {
				t.Fatalf("plainString with byte %#x at %d: %v", c, at, got)
			}
		}
	}
}

func FuzzPlainSpan(f *testing.F) {
	f.Add([]byte(`{"content":"benchmark message of a typical small size <b>"}`))
	f.Add([]byte("ok\x7f\x80\xe2\x80\xa8 \\\"&<>\x1f\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for i := 0; i <= len(b); i++ {
			if got, want := plainSpan(b, i), plainSpanSlow(b, i); got != want {
				t.Fatalf("%q from %d: %d, want %d", b, i, got, want)
			}
		}
	})
}

// TestAppendJSONString: json.Marshal's bytes, plain or not.
func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "cc-1", "client-1-1796000000000000000-12", `a"b`, "a<b>&c", "tab\there", "é", "\u2028", "\xff", "del\x7f", `back\slash`} {
		want, _ := json.Marshal(s)
		if got := AppendJSONString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("%q: %s, want x%s", s, got, want)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	f.Add("client-1-1796000000000000000-12")
	f.Add("a<b>&\"\\\x7f\u2028")
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: %s, want %s", s, got, want)
		}
	})
}

// appendTimeUTC writes what time.RFC3339Nano does, for the times it
// takes; the others (a zone, a year past 9999 or before 0) it leaves.
func TestAppendTimeUTC(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 4, 10, 0, 0, 123456789, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 100, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 120000000, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(0, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Unix(0, 0).UTC(),
	} {
		got, ok := appendTimeUTC([]byte("x"), tm)
		if want := tm.AppendFormat([]byte("x"), time.RFC3339Nano); !ok || !bytes.Equal(got, want) {
			t.Errorf("%v: %s %v, want %s", tm, got, ok, want)
		}
	}
	for _, tm := range []time.Time{
		time.Date(2026, 12, 4, 10, 0, 0, 0, time.FixedZone("UTC", 0)),
		time.Date(2026, 12, 4, 10, 0, 0, 0, time.FixedZone("x", 3600)),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		if got, ok := appendTimeUTC([]byte("x"), tm); ok || string(got) != "x" {
			t.Errorf("%v: %s %v", tm, got, ok)
		}
	}
}

func FuzzAppendTimeUTC(f *testing.F) {
	f.Add(int64(1764842400), int64(123456789))
	f.Add(int64(-62135596800), int64(0))
	f.Fuzz(func(t *testing.T, sec, ns int64) {
		tm := time.Unix(sec, ns).UTC()
		got, ok := appendTimeUTC(nil, tm)
		if want := tm.AppendFormat(nil, time.RFC3339Nano); ok && !bytes.Equal(got, want) {
			t.Fatalf("%v: %s, want %s", tm, got, want)
		}
		if y := tm.Year(); ok != (y >= 0 && y <= 9999) {
			t.Fatalf("%v: ok %v", tm, ok)
		}
	})
}
