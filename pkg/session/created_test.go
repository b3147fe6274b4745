package session

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// createdData are session/created data of every shape decodeCreated tells
// apart: flat ones, ones with the members that are not strings, and ones
// the general decode refuses (unknown, misspelled or mistyped members,
// JSON that is not an object, or not JSON).
var createdData = []string{
	``, `null`, `{}`, ` {}`, `{ }`,
	`{"agent":"loadgen","title":"load bench-454"}`,
	`{"title":"t","agent":"a","workspace":"isolated"}`,
	`{"title":"t","title":"u"}`,
	`{"title":"a \"quoted\" \u00e9 \\ title"}`,
	`{"title":"braces { and [ inside"}`,
	`{ "title" : "spaced" , "agent":"a" }`,
	`{"title":null}`,
	`{"title":"t","parent":null}`,
	`{"title":"t","owner":null,"grants":null,"labels":null}`,
	`{"title":"t","owner":{"tenant":"acme","agent":"alice"}}`,
	`{"labels":{"k":"v"},"grants":["bob"]}`,
	`{"parent":{"sessionId":"p","seedLength":3,"depth":1},"title":"child"}`,
	`{"grants":[]}`,
	`{"Title":"wrong case"}`,
	`{"titel":"misspelled"}`,
	`{"title":5}`,
	`{"title":true}`,
	`{"title":"t"} `,
	`{"title":"t"}x`,
	`{"title":"t"`,
	`{"title":"t",}`,
	`[]`, `"s"`, `5`, `true`, `nul`,
	`{"title":"t","extra":{"nested":[1,2]}}`,
	`{"workspace":"elsewhere"}`,
	`{"title":"\ud800"}`,
	`{"agent":"a","title":"t","workspace":"shared","owner":{"tenant":"t","agent":"a"},"grants":["b","c"],"labels":{"x":"y"}}`,
}

// TestDecodeCreatedIsDecodeData holds decodeCreated to the general
// decode: the same value, or the same refusal, for every shape of data.
func TestDecodeCreatedIsDecodeData(t *testing.T) {
	for _, data := range createdData {
		e := &schema.Envelope{Type: schema.TypeSessionCreated, Data: json.RawMessage(data)}
		want := new(schema.SessionCreated)
		wantErr := e.DecodeData(want)
		got, err := decodeCreated(e)
		switch {
		case (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error():
			t.Errorf("data %s: decodeCreated's error %v, the general decode's %v", data, err, wantErr)
		case err == nil && !reflect.DeepEqual(got, want):
			t.Errorf("data %s: decodeCreated gave %+v, the general decode %+v", data, got, want)
		}
	}
}

// BenchmarkDecodeCreated: a fleet's session/created data (flat) decoded
// by decodeCreated and by the general decode it stands for.
func BenchmarkDecodeCreated(b *testing.B) {
	e := &schema.Envelope{Type: schema.TypeSessionCreated, Data: json.RawMessage(`{"agent":"loadgen","title":"load bench-454"}`)}
	b.Run("decodeCreated", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeCreated(e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DecodeData", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := e.DecodeData(new(schema.SessionCreated)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
