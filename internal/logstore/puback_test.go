package logstore

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

func TestReadPubAck(t *testing.T) {
	cases := []struct {
		in      string
		seq     uint64
		dup     bool
		errCode jetstream.ErrorCode // 0: no API error
		invalid bool
	}{
		{in: `{"stream":"SESSIONS","seq":12}`, seq: 12},
		{in: `{"stream":"SESSIONS","seq":12,"duplicate":true}`, seq: 12, dup: true},
		{in: `{"stream":"SESSIONS","domain":"hub","seq":7,"duplicate":false}`, seq: 7},
		{in: ` { "stream" : "SESSIONS" , "seq" : 3 } `, seq: 3},
		{in: `{"stream":"S\u0045SSIONS","seq":4}`, seq: 4}, // escaped: the slow path
		{in: `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 5"},"stream":"SESSIONS","seq":0}`, errCode: 10071},
		{in: `{"error":{"code":503,"err_code":10008,"description":"JetStream system temporarily unavailable"}}`, errCode: 10008},
		{in: `{"seq":3}`, invalid: true},
		{in: `{"stream":"","seq":3}`, invalid: true},
		{in: `not json`, invalid: true},
		{in: ``, invalid: true},
	}
	for _, c := range cases {
		seq, dup, err := readPubAck([]byte(c.in))
		var apiErr *jetstream.APIError
		switch {
		case c.invalid:
			if !errors.Is(err, jetstream.ErrInvalidJSAck) {
				t.Errorf("%s: err %v, want ErrInvalidJSAck", c.in, err)
			}
		case c.errCode != 0:
			if !errors.As(err, &apiErr) || apiErr.ErrorCode != c.errCode {
				t.Errorf("%s: err %v, want API error %d", c.in, err, c.errCode)
			}
		default:
			if err != nil || seq != c.seq || dup != c.dup {
				t.Errorf("%s: got %d %v %v, want %d %v", c.in, seq, dup, err, c.seq, c.dup)
			}
		}
	}
}

// The hand reader must agree with encoding/json on every flat
// acknowledgement it accepts.
func FuzzReadFlatPubAck(f *testing.F) {
	for _, s := range []string{`{"stream":"SESSIONS","seq":12}`, `{"stream":"S","seq":1,"duplicate":true}`, `{"stream":"S","seq":1,"duplicate":tru}`, `{"stream":"S","seq":-1}`, `{"stream":"S","seq":1}x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		seq, dup, ok := readFlatPubAck(b)
		if !ok {
			return
		}
		var r struct {
			Stream    string `json:"stream"`
			Seq       uint64 `json:"seq"`
			Duplicate bool   `json:"duplicate"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%q: hand reader accepted what encoding/json refuses: %v", b, err)
		}
		if r.Stream == "" || r.Seq != seq || r.Duplicate != dup {
			t.Fatalf("%q: hand reader %d %v, encoding/json %+v", b, seq, dup, r)
		}
	})
}

// BenchmarkReadPubAck shows what the hand reader of acknowledgements
// buys over the library path: json.Unmarshal into jetstream's own
// answer shape (its apiResponse and *PubAck), as PublishMsg reads it.
// The library rows report their time over the hand reader's (x-scanner).
func BenchmarkReadPubAck(b *testing.B) {
	type apiResponse struct {
		Type  string              `json:"type"`
		Error *jetstream.APIError `json:"error,omitempty"`
	}
	type pubAckResponse struct {
		apiResponse
		*jetstream.PubAck
	}
	for _, doc := range []struct{ name, ack string }{
		{"ack", `{"stream":"SESSIONS","seq":1234567}`},
		{"duplicate", `{"stream":"SESSIONS","domain":"hub","seq":1234567,"duplicate":true}`},
	} {
		ack := []byte(doc.ack)
		var scannerNs float64
		b.Run(doc.name+"/scanner", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := readPubAck(ack); err != nil {
					b.Fatal(err)
				}
			}
			scannerNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
		b.Run(doc.name+"/jsonUnmarshal", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var r pubAckResponse
				if err := json.Unmarshal(ack, &r); err != nil || r.Error != nil || r.PubAck == nil || r.Stream == "" {
					b.Fatal("not read", err)
				}
			}
			if scannerNs > 0 {
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/scannerNs, "x-scanner")
			}
		})
	}
}
