package writer

import (
	"encoding/json"
	"math"
	"testing"
)

// The success reply is made in one allocation, however long its numbers,
// with or without a hash, and reads back as the reply it renders.
func TestEncodeOKOneAllocation(t *testing.T) {
	for _, r := range []AppendReply{
		{SessionID: "s-1", FirstSeq: 1, LastSeq: 1, StreamSeq: 1},
		{SessionID: "a-session-id-of-some-length_123", FirstSeq: 1234, LastSeq: 1234, StreamSeq: 987654, Hash: "0123456789abcdef0123456789abcdef"},
		{SessionID: "s", FirstSeq: math.MaxUint64, LastSeq: math.MaxUint64, StreamSeq: math.MaxUint64, Duplicate: true, Hash: "0123456789abcdef0123456789abcdef"},
	} {
		if n := testing.AllocsPerRun(10, func() { encodeOK(r) }); n != 1 {
			t.Errorf("%+v: %v allocations, want 1", r, n)
		}
		var back AppendReply
		if err := json.Unmarshal(encodeOK(r), &back); err != nil || back != r {
			t.Errorf("%s reads back as %+v, %v", encodeOK(r), back, err)
		}
	}
}
