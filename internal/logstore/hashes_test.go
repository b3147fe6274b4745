package logstore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// prehashed is a batch of n bodies of about 500 bytes as a copier hands
// it to Append: with the bodies' chain hashes made beforehand.
func prehashed(n int) AppendRequest {
	req := AppendRequest{SessionID: "s", Events: make([]schema.Envelope, n), Bodies: make([][]byte, n), Hashes: make([]string, n)}
	for i := range n {
		req.Events[i] = schema.Envelope{SchemaVersion: schema.Version, SessionID: "s", Seq: uint64(i + 1), EventID: fmt.Sprintf("fork:0123456789abcdef:%d", i+1), Type: schema.TypeSessionCreated}
		req.Bodies[i] = []byte(fmt.Sprintf(`{"seq":%d,"text":%q}`, i+1, strings.Repeat("x", 480)))
		req.Hashes[i] = ChainHash(req.Bodies[i])
	}
	return req
}

// BenchmarkMessagesPrehashed is what a batch of 1,000 copied events costs
// Append before it sends them, with the chain hashes given (Hashes: the
// forker makes them while the batch before commits) and without (Append
// hashes every body between the last batch's answer and this send).
func BenchmarkMessagesPrehashed(b *testing.B) {
	s := &Store{cfg: Config{MaxEventBytes: 1 << 20}}
	req := prehashed(1000)
	b.Run("hashes-given", func(b *testing.B) {
		for range b.N {
			if _, err := s.messages(&req, "sub", ""); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hashed-by-append", func(b *testing.B) {
		r := req
		r.Hashes = nil
		for range b.N {
			if _, err := s.messages(&r, "sub", ""); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Given hashes build the same messages as hashing the bodies, and a
// count that does not match the bodies is refused.
func TestMessagesPrehashed(t *testing.T) {
	s := &Store{cfg: Config{MaxEventBytes: 1 << 20}}
	req := prehashed(3)
	got, err := s.messages(&req, "sub", "")
	if err != nil {
		t.Fatal(err)
	}
	plain := req
	plain.Hashes = nil
	want, err := s.messages(&plain, "sub", "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if fmt.Sprint(got[i].Header) != fmt.Sprint(want[i].Header) || string(got[i].Data) != string(want[i].Data) {
			t.Fatalf("message %d: %v, want %v", i, got[i].Header, want[i].Header)
		}
	}
	short := req
	short.Hashes = req.Hashes[:2]
	if _, err := s.messages(&short, "sub", ""); schema.CodeOf(err) != schema.CodeBadRequest {
		t.Fatalf("2 hashes for 3 bodies: %v, want bad_request", err)
	}
}
