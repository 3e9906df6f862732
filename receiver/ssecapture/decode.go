package ssecapture

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/semconv"
	"github.com/streamstall/streamstall/receiver/ssecapture/internal/metadata"
)

// Field names of an ingest record (docs/ingest.md).
const (
	fieldTraceID      = "trace_id"
	fieldSpanID       = "span_id"
	fieldParentSpanID = "parent_span_id"
	fieldName         = "name"
	fieldStart        = "start_time_unix_nano"
	fieldEnd          = "end_time_unix_nano"
	fieldAttributes   = "attributes"
	fieldChunkTimes   = "chunk_times_unix_nano"
	fieldChunkOffsets = "chunk_offsets_ms"
)

// ingestError is a rejected request: its status, message, and the record
// and field at fault when there is one (Record is -1 otherwise).
type ingestError struct {
	Status  int
	Message string
	Record  int
	Field   string
}

func (e *ingestError) Error() string {
	if e.Record < 0 {
		return e.Message
	}
	if e.Field == "" {
		return fmt.Sprintf("record %d: %s", e.Record, e.Message)
	}
	return fmt.Sprintf("record %d: %s: %s", e.Record, e.Field, e.Message)
}

type ingestLimits struct {
	maxRecords int
	maxChunks  int
}

// recordDecoder turns a request body of JSON records into spans, all or
// nothing.
type recordDecoder struct {
	limits ingestLimits
	// newID returns random bits for the ids a record leaves out.
	newID func() uint64
}

// decode accepts one JSON record, an array of records, or a stream of
// records (NDJSON, or any whitespace between values).
func (d *recordDecoder) decode(body []byte) (ptrace.Traces, int, *ingestError) {
	td := ptrace.NewTraces()
	byService := map[string]ptrace.SpanSlice{}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return td, 0, &ingestError{Status: http.StatusBadRequest, Message: "empty body: expected a JSON record, an array of records or NDJSON", Record: -1}
	}
	var raws []json.RawMessage
	if trimmed[0] == '[' {
		if err := json.Unmarshal(trimmed, &raws); err != nil {
			return td, 0, &ingestError{Status: http.StatusBadRequest, Message: "malformed JSON array: " + err.Error(), Record: -1}
		}
		if len(raws) > d.limits.maxRecords {
			return td, 0, tooManyRecords(d.limits.maxRecords)
		}
	} else {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		for {
			var raw json.RawMessage
			err := dec.Decode(&raw)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return td, 0, &ingestError{Status: http.StatusBadRequest, Message: "malformed JSON: " + err.Error(), Record: len(raws)}
			}
			if len(raws) == d.limits.maxRecords {
				return td, 0, tooManyRecords(d.limits.maxRecords)
			}
			raws = append(raws, raw)
		}
	}
	for i, raw := range raws {
		if err := d.record(i, raw, td, byService); err != nil {
			return ptrace.NewTraces(), 0, err
		}
	}
	return td, len(raws), nil
}

func tooManyRecords(limit int) *ingestError {
	return &ingestError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("more than %d records", limit), Record: limit}
}

func (d *recordDecoder) record(i int, raw json.RawMessage, td ptrace.Traces, byService map[string]ptrace.SpanSlice) *ingestError {
	bad := func(field, format string, args ...any) *ingestError {
		return &ingestError{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...), Record: i, Field: field}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return bad("", "a record must be a JSON object")
	}
	for k := range fields {
		switch k {
		case fieldTraceID, fieldSpanID, fieldParentSpanID, fieldName, fieldStart, fieldEnd, fieldAttributes, fieldChunkTimes, fieldChunkOffsets:
		default:
			return bad(k, "unknown field")
		}
	}

	var traceID pcommon.TraceID
	if ok, err := hexID(fields[fieldTraceID], traceID[:]); err != nil {
		return bad(fieldTraceID, "%v", err)
	} else if !ok {
		for traceID == (pcommon.TraceID{}) {
			putUint64(traceID[:8], d.newID())
			putUint64(traceID[8:], d.newID())
		}
	}
	var spanID pcommon.SpanID
	if ok, err := hexID(fields[fieldSpanID], spanID[:]); err != nil {
		return bad(fieldSpanID, "%v", err)
	} else if !ok {
		for spanID == (pcommon.SpanID{}) {
			putUint64(spanID[:], d.newID())
		}
	}
	var parent pcommon.SpanID
	if _, err := hexID(fields[fieldParentSpanID], parent[:]); err != nil {
		return bad(fieldParentSpanID, "%v", err)
	}

	var name string
	if raw, ok := fields[fieldName]; !ok || json.Unmarshal(raw, &name) != nil || name == "" {
		return bad(fieldName, "required: a non-empty string such as \"chat gpt-4o\"")
	}
	start, err := nanos(fields[fieldStart])
	if err != nil {
		return bad(fieldStart, "required: %v", err)
	}

	var chunks []int64
	rawTimes, hasTimes := fields[fieldChunkTimes]
	rawOffsets, hasOffsets := fields[fieldChunkOffsets]
	switch {
	case hasTimes && hasOffsets:
		return bad(fieldChunkOffsets, "give chunk_times_unix_nano or chunk_offsets_ms, not both")
	case hasTimes:
		chunks, err = numberArray(rawTimes, d.limits.maxChunks, parseNanos)
		if err != nil {
			return chunkError(i, fieldChunkTimes, d.limits.maxChunks, err)
		}
	case hasOffsets:
		chunks, err = numberArray(rawOffsets, d.limits.maxChunks, func(tok []byte) (int64, error) {
			return offsetNanos(start, tok)
		})
		if err != nil {
			return chunkError(i, fieldChunkOffsets, d.limits.maxChunks, err)
		}
	}

	end := start
	if raw, ok := fields[fieldEnd]; ok {
		if end, err = nanos(raw); err != nil {
			return bad(fieldEnd, "%v", err)
		}
		if end < start {
			return bad(fieldEnd, "ends before start_time_unix_nano")
		}
	} else if len(chunks) > 0 {
		end = max(start, slices.Max(chunks))
	}

	attrs := pcommon.NewMap()
	service := ""
	if raw, ok := fields[fieldAttributes]; ok {
		key, err := putAttributes(raw, attrs)
		if err != nil {
			return bad(fieldAttributes+key, "%v", err)
		}
		// service.name is a resource attribute: it names the resource the
		// span belongs to, and the metrics connector groups by it there.
		if v, ok := attrs.Get(semconv.AttrServiceName); ok {
			service = v.AsString()
			attrs.Remove(semconv.AttrServiceName)
		}
	}

	spans, ok := byService[service]
	if !ok {
		rs := td.ResourceSpans().AppendEmpty()
		if service != "" {
			rs.Resource().Attributes().PutStr(semconv.AttrServiceName, service)
		}
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(metadata.ScopeName)
		spans = ss.Spans()
		byService[service] = spans
	}
	span := spans.AppendEmpty()
	span.SetName(name)
	span.SetKind(ptrace.SpanKindClient)
	span.SetTraceID(traceID)
	span.SetSpanID(spanID)
	span.SetParentSpanID(parent)
	span.SetStartTimestamp(pcommon.Timestamp(start))
	span.SetEndTimestamp(pcommon.Timestamp(end))
	attrs.MoveTo(span.Attributes())
	events := span.Events()
	events.EnsureCapacity(len(chunks))
	for _, at := range chunks {
		ev := events.AppendEmpty()
		ev.SetName(semconv.EventChunk)
		ev.SetTimestamp(pcommon.Timestamp(at))
	}
	return nil
}

var errTooManyChunks = errors.New("too many chunk times")

func chunkError(i int, field string, limit int, err error) *ingestError {
	if errors.Is(err, errTooManyChunks) {
		return &ingestError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("more than %d chunk times", limit), Record: i, Field: field}
	}
	return &ingestError{Status: http.StatusBadRequest, Message: err.Error(), Record: i, Field: field}
}

// hexID decodes an optional hex id into dst; absent, null and "" mean none.
func hexID(raw json.RawMessage, dst []byte) (bool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return false, fmt.Errorf("must be a string of %d hex digits", 2*len(dst))
	}
	if s == "" {
		return false, nil
	}
	if len(s) != 2*len(dst) {
		return false, fmt.Errorf("must be %d hex digits, got %d characters", 2*len(dst), len(s))
	}
	if _, err := hex.Decode(dst, []byte(s)); err != nil {
		return false, fmt.Errorf("must be %d hex digits: %w", 2*len(dst), err)
	}
	for _, b := range dst {
		if b != 0 {
			return true, nil
		}
	}
	return false, errors.New("must not be all zeros")
}

// nanos reads a unix-nano time given as a JSON number or a decimal string
// (a JavaScript number cannot hold one exactly; OTLP/JSON uses strings).
func nanos(raw json.RawMessage) (int64, error) {
	if len(raw) == 0 {
		return 0, errors.New("missing")
	}
	return parseNanos(bytes.TrimSpace(raw))
}

func parseNanos(tok []byte) (int64, error) {
	if len(tok) >= 2 && tok[0] == '"' && tok[len(tok)-1] == '"' {
		s := tok[1 : len(tok)-1]
		for _, c := range s {
			if c < '0' || c > '9' {
				return 0, fmt.Errorf("%s is not a decimal string of unix nanoseconds", tok)
			}
		}
		tok = s
	}
	v, err := strconv.ParseInt(string(tok), 10, 64)
	if err != nil {
		// A JSON number written with a fraction or an exponent.
		f, ferr := strconv.ParseFloat(string(tok), 64)
		if ferr != nil || math.IsNaN(f) || f < 1 || f >= math.MaxInt64 {
			return 0, fmt.Errorf("%s is not a positive number of unix nanoseconds", tok)
		}
		v = int64(math.Round(f))
	}
	if v <= 0 {
		return 0, fmt.Errorf("%s is not a positive number of unix nanoseconds", tok)
	}
	return v, nil
}

// offsetNanos turns a millisecond offset from start into unix nanoseconds.
func offsetNanos(start int64, tok []byte) (int64, error) {
	if len(tok) >= 2 && tok[0] == '"' {
		tok = tok[1 : len(tok)-1]
	}
	ms, err := strconv.ParseFloat(string(tok), 64)
	if err != nil || math.IsNaN(ms) || math.IsInf(ms, 0) || ms < 0 {
		return 0, fmt.Errorf("%s is not a non-negative number of milliseconds", tok)
	}
	ns := ms * 1e6
	if ns >= float64(math.MaxInt64-start) {
		return 0, fmt.Errorf("%s milliseconds is out of range", tok)
	}
	return start + int64(math.Round(ns)), nil
}

// numberArray reads a JSON array of numbers or strings without building a
// value per element: records may carry a hundred thousand chunk times.
func numberArray(raw []byte, limit int, parse func([]byte) (int64, error)) ([]int64, error) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			return nil, nil
		}
		return nil, errors.New("must be an array")
	}
	var out []int64
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return out, nil
	}
	for {
		i = skipSpace(raw, i)
		if i >= len(raw) {
			return nil, errors.New("unterminated array")
		}
		startTok := i
		if raw[i] == '"' {
			i++
			for i < len(raw) && raw[i] != '"' {
				i++
			}
			i++
		} else {
			for i < len(raw) && !isDelimiter(raw[i]) {
				i++
			}
		}
		if i > len(raw) || startTok == i {
			return nil, fmt.Errorf("element %d: malformed", len(out))
		}
		if len(out) == limit {
			return nil, errTooManyChunks
		}
		v, err := parse(raw[startTok:i])
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", len(out), err)
		}
		out = append(out, v)
		i = skipSpace(raw, i)
		if i >= len(raw) {
			return nil, errors.New("unterminated array")
		}
		switch raw[i] {
		case ',':
			i++
		case ']':
			if skipSpace(raw, i+1) != len(raw) {
				return nil, errors.New("trailing data after the array")
			}
			return out, nil
		default:
			return nil, fmt.Errorf("element %d: expected , or ]", len(out)-1)
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func isDelimiter(c byte) bool {
	return c == ',' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// putAttributes copies a JSON object of primitive values (or homogeneous
// arrays of them) into attrs, keys sorted. On error it returns the path
// suffix of the bad key (".key").
func putAttributes(raw json.RawMessage, attrs pcommon.Map) (string, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return "", errors.New("must be an object of attribute values")
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	attrs.EnsureCapacity(len(keys))
	for _, k := range keys {
		if k == "" {
			return ".", errors.New("attribute keys must not be empty")
		}
		if err := putValue(obj[k], attrs.PutEmpty(k), true); err != nil {
			return "." + k, err
		}
	}
	return "", nil
}

func putValue(raw json.RawMessage, v pcommon.Value, allowArray bool) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return err
	}
	switch t := x.(type) {
	case string:
		v.SetStr(t)
	case bool:
		v.SetBool(t)
	case json.Number:
		if n, err := t.Int64(); err == nil {
			v.SetInt(n)
		} else if f, err := t.Float64(); err == nil {
			v.SetDouble(f)
		} else {
			return fmt.Errorf("number %s is out of range", t)
		}
	case []any:
		if !allowArray {
			return errors.New("arrays must hold strings, numbers or booleans")
		}
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return err
		}
		s := v.SetEmptySlice()
		s.EnsureCapacity(len(elems))
		for _, e := range elems {
			if err := putValue(e, s.AppendEmpty(), false); err != nil {
				return err
			}
		}
		hasDouble := false
		for i := range s.Len() {
			if s.At(i).Type() != s.At(0).Type() && (!isNumeric(s.At(i)) || !isNumeric(s.At(0))) {
				return errors.New("array elements must all have one type")
			}
			hasDouble = hasDouble || s.At(i).Type() == pcommon.ValueTypeDouble
		}
		// OTLP arrays are homogeneous: [1, 2.5] becomes doubles.
		for i := range s.Len() {
			if e := s.At(i); hasDouble && e.Type() == pcommon.ValueTypeInt {
				e.SetDouble(float64(e.Int()))
			}
		}
	default:
		return errors.New("must be a string, number, boolean or an array of them")
	}
	return nil
}

func isNumeric(v pcommon.Value) bool {
	return v.Type() == pcommon.ValueTypeInt || v.Type() == pcommon.ValueTypeDouble
}
