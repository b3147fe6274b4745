package client

import (
	"encoding/json"
	"testing"
)

// An append reply decodes to what json.Unmarshal gives, whether it is in
// the writer's layout (read by hand) or not (decoded by json.Unmarshal),
// and a reply json.Unmarshal refuses is refused.
func TestAppendReplyDecodesAsJSON(t *testing.T) {
	for _, b := range []string{
		`{"sessionId":"s-1","firstSeq":2,"lastSeq":2,"streamSeq":17,"duplicate":false,"hash":"0123456789abcdef0123456789abcdef"}`,
		`{"sessionId":"s-1","firstSeq":1,"lastSeq":500,"streamSeq":18446744073709551615,"duplicate":true}`,
		`{"sessionId":"_Tacme_s-1","firstSeq":0,"lastSeq":0,"streamSeq":0,"duplicate":false}`,
		`{"sessionId":"s\u00e9","firstSeq":1,"lastSeq":1,"streamSeq":1,"duplicate":false}`,
		`{"sessionId":"sé","firstSeq":1,"lastSeq":1,"streamSeq":1,"duplicate":false}`,
		"{\"sessionId\":\"s\xff\",\"firstSeq\":1,\"lastSeq\":1,\"streamSeq\":1,\"duplicate\":false}",
		`{"sessionId":"s-1","firstSeq":1,"lastSeq":1,"streamSeq":1,"duplicate":false,"hash":"a\"b"}`,
		`{"sessionId":"s-1","firstSeq":1,"lastSeq":1,"streamSeq":1,"duplicate":false,"extra":1}`,
		`{"sessionId":"s-1","firstSeq":1,"lastSeq":1,"streamSeq":1,"duplicate":false,"firstSeq":3}`,
		`{"sessionId":"s-1","lastSeq":1,"firstSeq":1,"streamSeq":1,"duplicate":true}`,
		`{ "sessionId":"s-1","firstSeq":1,"lastSeq":1,"streamSeq":1,"duplicate":true}`,
		`{"sessionId":"s-1","firstSeq":1,"lastSeq":1,"streamSeq":1,"duplicate":true} `,
		`{"sessionId":"s-1","firstSeq":1,"lastSeq":1,"streamSeq":1,"duplicate":null}`,
		`{"sessionId":null,"firstSeq":1,"lastSeq":1,"streamSeq":1,"duplicate":false}`,
		`{"sessionId":"s-1","firstSeq":1,"lastSeq":1,"streamSeq":1,"duplicate":false,"hash":""}`,
		`{"sessionId":"s-1","firstSeq":1,"lastSeq":1,"streamSeq":1,"duplicate":false,"Hash":"ab"}`,
	} {
		var want appendReply
		if err := json.Unmarshal([]byte(b), &want.AppendReply); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		got := appendReply{}
		got.Hash = "left from before"
		if err := got.decodeReply([]byte(b)); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if got != want {
			t.Fatalf("%s: got %+v, want %+v", b, got, want)
		}
	}
	for _, b := range []string{
		`{"sessionId":"s-1","firstSeq":01,"lastSeq":1,"streamSeq":1,"duplicate":false}`,
		`{"sessionId":"s-1","firstSeq":1,"lastSeq":1,"streamSeq":18446744073709551616,"duplicate":false}`,
		`{"sessionId":"s-1","firstSeq":-1,"lastSeq":1,"streamSeq":1,"duplicate":false}`,
		`{"sessionId":"s-1","firstSeq":1.5,"lastSeq":1,"streamSeq":1,"duplicate":false}`,
		"{\"sessionId\":\"s\x01\",\"firstSeq\":1,\"lastSeq\":1,\"streamSeq\":1,\"duplicate\":false}",
		`{"sessionId":"s-1","firstSeq":1,"lastSeq":1,"streamSeq":1,"duplicate":false}}`,
		`{"sessionId":"s-1","firstSeq":1,"lastSeq":1,"streamSeq":1,"duplicate":false`,
	} {
		var r appendReply
		if err := r.decodeReply([]byte(b)); err == nil {
			t.Fatalf("%s: decoded as %+v, json.Unmarshal refuses it", b, r)
		}
	}
}

// BenchmarkAppendReplyDecode shows what reading an append reply in the
// writer's layout by hand buys over json.Unmarshal (the reply of every
// append a client sends).
func BenchmarkAppendReplyDecode(b *testing.B) {
	body := []byte(`{"sessionId":"client-1-1765123456789012345-63","firstSeq":1234,"lastSeq":1234,"streamSeq":987654,"duplicate":false,"hash":"0123456789abcdef0123456789abcdef"}`)
	b.Run("cut", func(b *testing.B) {
		for range b.N {
			var r appendReply
			if err := r.decodeReply(body); err != nil || r.StreamSeq != 987654 {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		for range b.N {
			var r appendReply
			if err := json.Unmarshal(body, &r.AppendReply); err != nil || r.StreamSeq != 987654 {
				b.Fatal(err)
			}
		}
	})
}

// FuzzAppendReply holds the hand-read reply to json.Unmarshal: whatever the
// bytes, decodeReply gives what json.Unmarshal gives, or fails where it
// fails.
func FuzzAppendReply(f *testing.F) {
	for _, s := range []string{
		`{"sessionId":"s-1","firstSeq":2,"lastSeq":2,"streamSeq":17,"duplicate":false,"hash":"0123456789abcdef"}`,
		`{"sessionId":"s-1","firstSeq":1,"lastSeq":500,"streamSeq":18446744073709551615,"duplicate":true}`,
		`{"sessionId":"s\u00e9","firstSeq":1,"lastSeq":1,"streamSeq":1,"duplicate":false}`,
		`{"sessionId":"s-1","firstSeq":01,"lastSeq":1,"streamSeq":1,"duplicate":false}`,
		"{\"sessionId\":\"s\xff\",\"firstSeq\":1,\"lastSeq\":1,\"streamSeq\":1,\"duplicate\":false}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want appendReply
		wantErr := json.Unmarshal(b, &want.AppendReply)
		var got appendReply
		gotErr := got.decodeReply(b)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%q: decodeReply err %v, json.Unmarshal err %v", b, gotErr, wantErr)
		}
		if gotErr == nil && got != want {
			t.Fatalf("%q: got %+v, want %+v", b, got, want)
		}
	})
}
