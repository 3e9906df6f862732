// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/streamstall/streamstall/internal/sse"
)

// sequenceRef is the sequence_number key and its value, for the reference
// reading of TestSequenceTracker and the fuzz target.
var sequenceRef = regexp.MustCompile(`"sequence_number"[ \t\r\n]*:[ \t\r\n]*([0-9]+)`)

// nextSequence reads b whole: one past the largest sequence_number that a
// byte other than a digit ends, of at most maxSequenceDigits digits.
func nextSequence(b []byte) int64 {
	var next int64
	for pos := 0; ; {
		m := sequenceRef.FindSubmatchIndex(b[pos:])
		if m == nil {
			return next
		}
		end := pos + m[3]
		if digits := b[pos+m[2] : end]; end < len(b) && len(digits) <= maxSequenceDigits {
			v, _ := strconv.ParseInt(string(digits), 10, 64)
			next = max(next, v+1)
		}
		pos = end
	}
}

func TestSequenceTracker(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want int64
	}{
		{"none", `{"type":"response.created"}`, 0},
		{"one", `{"type":"x","sequence_number":7}`, 8},
		{"spaces", `{"sequence_number" :  12 }`, 13},
		{"largest", `{"sequence_number":9}{"sequence_number":3}`, 10},
		{"quoted in a string", `{"delta":"\"sequence_number\":99"}`, 0},
		{"a value, not a key", `{"k":"sequence_number","sequence_number":2}`, 3},
		{"negative", `{"sequence_number":-4}`, 0},
		{"unfinished number", `{"sequence_number":12`, 0},
		{"too long", `{"sequence_number":1234567890123456789}`, 0},
		{"back to back", `"sequence_number":1"sequence_number":2,`, 3},
		{"a key's closing quote opens the next", `"sequence_number"sequence_number":0,`, 1},
		{"a space between", `"sequence_number" sequence_number":0,`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, nextSequence([]byte(tc.in)), "the reference agrees")
			for step := 1; step <= len(tc.in); step++ {
				var s sequenceTracker
				for i := 0; i < len(tc.in); i += step {
					s.track([]byte(tc.in[i:min(i+step, len(tc.in))]))
				}
				assert.Equal(t, tc.want, s.Next(), "read %d bytes at a time", step)
			}
		})
	}
}

// boundaryFor picks a shape and its framing for the fuzz target.
func boundaryFor(pick uint8) (Shape, sse.Framing) {
	switch pick % 7 {
	case 0:
		return ShapeChatCompletions, sse.FramingSSE
	case 1:
		return ShapeResponses, sse.FramingSSE
	case 2:
		return ShapeMessages, sse.FramingSSE
	case 3:
		return ShapeGemini, sse.FramingSSE
	case 4:
		return ShapeGemini, sse.FramingJSONArray
	case 5:
		return ShapeOllamaChat, sse.FramingNDJSON
	}
	return ShapeOllamaGenerate, sse.FramingNDJSON
}

// FuzzBoundary: whatever bytes a client got, and however they were read,
// the error frame after them is the same, and for Server-Sent Events and
// NDJSON it is read as an event of its own, the shape's error, by a parser
// that follows the framing's rules; a Responses frame carries the next
// sequence_number.
func FuzzBoundary(f *testing.F) {
	for _, tc := range errorFrameCases {
		for pick := range uint8(7) {
			if s, fr := boundaryFor(pick); s == tc.shape && fr == tc.framing {
				f.Add([]byte(tc.sent), uint(len(tc.sent)/2), pick)
			}
		}
	}
	f.Add([]byte("data: a\r\r\n\n\rdata: b\r"), uint(3), uint8(0))
	f.Add([]byte(`[{"a":"]\"}",[1,{"b":2}]},3`), uint(9), uint8(4))
	f.Fuzz(func(t *testing.T, sent []byte, cut uint, pick uint8) {
		shape, framing := boundaryFor(pick)
		at := int(cut % uint(len(sent)+1))
		whole, split := NewBoundary(shape, framing), NewBoundary(shape, framing)
		whole.Track(sent)
		split.Track(sent[:at])
		split.Track(sent[at:])
		frame := whole.ErrorFrame(http.StatusGatewayTimeout, "stall_timeout", "m")
		require.Equal(t, string(frame), string(split.ErrorFrame(http.StatusGatewayTimeout, "stall_timeout", "m")))
		if shape == ShapeResponses {
			require.Equal(t, nextSequence(sent), whole.seq.Next())
		}
		if framing == sse.FramingJSONArray {
			return // a cut element takes in what follows it
		}
		var last sse.Event
		var got bool
		sp := sse.NewSplitter(framing, 0, func(ev *sse.Event) {
			last, got = sse.Event{Type: bytes.Clone(ev.Type), Data: bytes.Clone(ev.Data)}, true
		})
		sp.Feed(append(bytes.Clone(sent), frame...))
		require.True(t, got)
		want := errorObject(shape, http.StatusGatewayTimeout, "stall_timeout", "m", whole.seq.Next())
		require.Equal(t, string(want), string(bytes.TrimSpace(last.Data)), "%q", frame)
		if shape == ShapeMessages || shape == ShapeResponses {
			require.Equal(t, "error", string(last.Name()))
		}
	})
}

// arrayCutCheck cuts a JSON array after each byte and checks that the
// error element after the bytes makes the whole a valid array ending in
// the error, whatever element the cut was in.
func arrayCutCheck(t *testing.T, array []byte, at int) {
	t.Helper()
	b := NewBoundary(ShapeGemini, sse.FramingJSONArray)
	b.Track(array[:at])
	frame := b.ErrorFrame(http.StatusGatewayTimeout, "stall_timeout", "m")
	whole := append(bytes.Clone(array[:at]), frame...)
	if b.arr.place == arrayClosed {
		require.Empty(t, bytes.TrimSpace(frame))
		return
	}
	var elems []json.RawMessage
	require.NoError(t, json.Unmarshal(whole, &elems), "cut after %d bytes: %s", at, whole)
	require.NotEmpty(t, elems)
	assert.JSONEq(t, `{"error":{"code":504,"message":"m","status":"DEADLINE_EXCEEDED"}}`, string(elems[len(elems)-1]))
}

// TestArrayCutAnywhere: Gemini's array cut after any byte, in a key, a
// string, an escape, a number or a literal, is closed into a valid array
// with the error as its last element.
func TestArrayCutAnywhere(t *testing.T) {
	for _, array := range [][]byte{
		mustRead(t, "testdata/streams/gemini_vertex_text.json"),
		[]byte(`[{"a":"x\"y\\","b\u00e9":"\u00e9\ud83d\ude00","n":[-1.5e+10,0,12],"t":true,"f":false,"z":null,"o":{}, "e":[]},` +
			"\n" + `[[],[{}],"s",3,null] , 7 ]`),
	} {
		for at := range len(array) + 1 {
			arrayCutCheck(t, array, at)
		}
	}
}

// TestNDJSONCutAnywhere: an Ollama stream cut after any byte ends in lines
// that are each valid JSON, the last one Ollama's error: the cut line is
// completed, not left for the client to quote in a decoding error.
func TestNDJSONCutAnywhere(t *testing.T) {
	for _, name := range []string{"ollama_chat_tool.ndjson", "ollama_generate_text.ndjson"} {
		stream := mustRead(t, filepath.Join("testdata", "streams", name))
		for at := range len(stream) + 1 {
			b := NewBoundary(ShapeOllamaChat, sse.FramingNDJSON)
			b.Track(stream[:at])
			whole := append(bytes.Clone(stream[:at]), b.ErrorFrame(http.StatusGatewayTimeout, "stall_timeout", "m")...)
			lines := bytes.Split(bytes.TrimSuffix(whole, []byte("\n")), []byte("\n"))
			for i, line := range lines {
				require.True(t, json.Valid(line), "%s cut after %d bytes: line %d %q", name, at, i, line)
			}
			assert.JSONEq(t, `{"error":"m"}`, string(lines[len(lines)-1]))
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// FuzzArrayCut: any valid JSON array, cut anywhere, is closed into a valid
// array ending with the error.
func FuzzArrayCut(f *testing.F) {
	f.Add([]byte(`[{"candidates":[{"content":{"parts":[{"text":"Hel\nlo"}]}}]}]`), uint(20))
	f.Add([]byte(`[1,"\u00e9\\",[true,{"k":-0.5E-3}]]`), uint(9))
	f.Fuzz(func(t *testing.T, value []byte, cut uint) {
		if !json.Valid(value) {
			return
		}
		array := value
		if t := bytes.TrimLeft(value, " \t\r\n"); t[0] != '[' {
			array = append(append([]byte("["), value...), ']')
		}
		arrayCutCheck(t, array, int(cut%uint(len(array)+1)))
	})
}
