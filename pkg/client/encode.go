package client

import (
	"encoding/json"
	"strconv"

	"github.com/sessionlog/sessionlog/pkg/api"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// encodeAppend is json.Marshal(r) with each event written by
// schema.Encode (by hand for the events sessionlog's own producers make,
// json.Marshal for any other): the reflection walk over a batch of events
// was most of the client's CPU per appended event
// (BenchmarkEncodeAppend). An event without data is left to json.Marshal,
// which writes it as null where Encode writes {}.
func encodeAppend(r api.AppendRequest) ([]byte, error) {
	size := 128 + len(r.SessionID) + len(r.Holder)
	for i := range r.Events {
		size += 256 + len(r.Events[i].Data)
	}
	b := make([]byte, 0, size)
	b = append(b, `{"sessionId":`...)
	b, err := appendJSON(b, r.SessionID)
	if err != nil {
		return nil, err
	}
	if r.ExpectedSeq != nil {
		b = append(b, `,"expectedSeq":`...)
		b = strconv.AppendUint(b, *r.ExpectedSeq, 10)
	}
	if r.Holder != "" {
		b = append(b, `,"holder":`...)
		if b, err = appendJSON(b, r.Holder); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"events":`...)
	if r.Events == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Events {
			if i > 0 {
				b = append(b, ',')
			}
			e := r.Events[i]
			if len(e.Data) == 0 {
				var enc []byte
				if enc, err = json.Marshal(&e); err != nil {
					return nil, err
				}
				b = append(b, enc...)
			} else if b, err = schema.AppendEncode(b, &e); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	if r.Takeover {
		b = append(b, `,"takeover":true`...)
	}
	return append(b, '}'), nil
}

// appendJSON appends v as json.Marshal writes it.
func appendJSON(b []byte, v string) ([]byte, error) {
	return schema.AppendJSONString(b, v), nil
}
