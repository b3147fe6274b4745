package forker

import (
	"bytes"
	"encoding/json"

	"github.com/sessionlog/sessionlog/pkg/schema"
)

// decode reads a stored event. Almost every stored body is exactly what
// schema.Encode wrote, and for such a body the strict schema.Decode (which
// checks for duplicate or mis-spelled keys, upcasts older versions and
// costs about nine times as much) can only agree with a plain decode: so
// the body is decoded plainly and re-encoded, and only a body that does
// not come out byte for byte the same takes the strict path. Data is
// copied as stored either way.
func decode(body []byte) (schema.Envelope, error) {
	var e schema.Envelope
	if json.Unmarshal(body, &e) == nil && e.SchemaVersion == schema.Version {
		c := e
		if again, err := schema.Encode(&c); err == nil && bytes.Equal(again, body) {
			return e, nil
		}
	}
	return schema.Decode(body)
}
