package schema

import (
	"encoding/json"
	"time"
	"unsafe"
)

// plainSpan returns the index of the first byte at or after b[i] that is
// not one of stringBytes (b's length when there is none): the plain run
// of a string's contents. It looks eight bytes up at a time, with one
// branch for the eight (the byte loop has two a byte), then a byte at a
// time from the first word that is not all plain.
func plainSpan(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		w := b[i : i+8 : i+8]
		if plainTable[w[0]]&plainTable[w[1]]&plainTable[w[2]]&plainTable[w[3]]&
			plainTable[w[4]]&plainTable[w[5]]&plainTable[w[6]]&plainTable[w[7]] == 0 {
			break
		}
	}
	for i < len(b) && stringBytes[b[i]] {
		i++
	}
	return i
}

// plainTable is stringBytes as 1 and 0, to be and-ed.
var plainTable = func() (t [256]uint8) {
	for c, ok := range stringBytes {
		if ok {
			t[c] = 1
		}
	}
	return t
}()

// plainSpanString is plainSpan of s's bytes (read, not copied).
func plainSpanString(s string) int {
	return plainSpan(unsafe.Slice(unsafe.StringData(s), len(s)), 0)
}

// AppendJSONString appends s as json.Marshal writes it: as it is between
// quotes when every byte is plain (printable ASCII but for the quote, the
// backslash and the three json.Marshal escapes for HTML), else by
// json.Marshal.
func AppendJSONString(dst []byte, s string) []byte {
	if plainSpanString(s) == len(s) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	enc, _ := json.Marshal(s) // a string always encodes
	return append(dst, enc...)
}

// twoDigits holds "00" through "99".
const twoDigits = "00010203040506070809101112131415161718192021222324252627282930313233343536373839" +
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879" +
	"8081828384858687888990919293949596979899"

// appendTimeUTC appends t.AppendFormat(time.RFC3339Nano) for a time in
// UTC of a year from 0 through 9999 (ok false, dst unchanged, for any
// other): the digits by hand, not the general formatter's walk of the
// layout.
func appendTimeUTC(dst []byte, t time.Time) ([]byte, bool) {
	if t.Location() != time.UTC {
		return dst, false
	}
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return dst, false
	}
	hour, minute, sec := t.Clock()
	// 2006-01-02T15:04:05.999999999Z written into a buffer, appended once.
	var buf [30]byte
	for k, v := range [...]int{year / 100, year % 100, int(month), day, hour, minute, sec} {
		at := [...]int{0, 2, 5, 8, 11, 14, 17}[k]
		buf[at], buf[at+1] = twoDigits[2*v], twoDigits[2*v+1]
	}
	buf[4], buf[7], buf[10], buf[13], buf[16] = '-', '-', 'T', ':', ':'
	n := 19
	if ns := t.Nanosecond(); ns != 0 {
		buf[19] = '.'
		for k := 28; k > 19; k-- {
			buf[k] = byte('0' + ns%10)
			ns /= 10
		}
		n = 29
		for buf[n-1] == '0' {
			n--
		}
	}
	buf[n] = 'Z'
	return append(dst, buf[:n+1]...), true
}
