// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package ingest

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/streamstall/streamstall/internal/figures"
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

// Estimated bytes a decoded record holds as pdata, for the per-request
// memory budget (measured with BenchmarkDecodeShapes; rounded up).
const (
	costSpan      = 320
	costEvent     = 96
	costAttribute = 64
	costElement   = 32
	// budgetFactor times max_request_body bounds the estimated size of
	// the spans of one request.
	budgetFactor = 8
	// checkEvery is how many JSON values are decoded between two looks at
	// the request's context.
	checkEvery = 1024
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

// Limits bound what one request may carry (docs/security.md).
type Limits struct {
	// MaxBody bounds a request body in bytes; it also sets the memory
	// budget of the spans decoded from it.
	MaxBody     int64
	MaxRecords  int
	MaxChunks   int // chunk times of one record
	MaxAttrs    int // attributes of one record
	MaxValueLen int // bytes of a string (and the name), elements of an array
	// MaxStartAge bounds how long before its receipt a record's stream
	// may have started.
	MaxStartAge time.Duration
	// MaxClockSkew bounds how far after its receipt a record's times
	// (start, end, chunks) may lie: the client's clock may run ahead.
	MaxClockSkew time.Duration
	// MaxDuration bounds a stream: its end and every chunk time, from its
	// start.
	MaxDuration time.Duration
	// MaxChunkEvents bounds the chunk events of a span: a record with more
	// chunk times has the chunks the figures do not need elided
	// (figures.Keeper), keeping both chunks of every gap above
	// KeepGapsAbove. Zero is figures.DefaultMaxChunkEvents.
	MaxChunkEvents int
	KeepGapsAbove  time.Duration
}

// recordDecoder turns a request body of JSON records into spans, all or
// nothing, one record at a time as the body is read.
type recordDecoder struct {
	limits Limits
	// newID returns random bits for the ids a record leaves out.
	newID func() uint64
	// now is the receipt time of a request: record times are judged
	// against it.
	now func() time.Time
}

// readTracker remembers the error of the body reader, so that a failed
// read (body too large, client gone) is told apart from malformed JSON.
type readTracker struct {
	r   io.Reader
	err error
}

func (t *readTracker) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		t.err = err
	}
	return n, err
}

// bodyDecoder is the state of one request.
type bodyDecoder struct {
	*recordDecoder
	ctx       context.Context
	src       *readTracker
	sc        *jsonScanner
	td        ptrace.Traces
	byService map[string]ptrace.SpanSlice
	rec       rawRecord
	index     int   // the record being decoded
	received  int64 // unix nanoseconds: when the request arrived
	spent     int64 // estimated bytes of the spans so far
	budget    int64
	keeper    *figures.Keeper // for records past MaxChunkEvents
}

// decode accepts one JSON record, an array of records, or a stream of
// records (NDJSON, or any whitespace between values). It reads the body
// once, front to back, and stops at the first fault, when ctx ends, or
// when a limit is passed, without reading further.
func (d *recordDecoder) decode(ctx context.Context, body io.Reader) (ptrace.Traces, int, *ingestError) {
	src := &readTracker{r: body}
	b := &bodyDecoder{
		recordDecoder: d,
		ctx:           ctx,
		received:      d.now().UnixNano(),
		src:           src,
		sc:            newJSONScanner(src),
		td:            ptrace.NewTraces(),
		byService:     map[string]ptrace.SpanSlice{},
		budget:        budgetFactor * max(d.limits.MaxBody, 1<<20),
	}
	n, err := b.body()
	if err != nil {
		return ptrace.NewTraces(), 0, err
	}
	return b.td, n, nil
}

// startsValue reports whether c begins a JSON value.
func startsValue(c byte) bool {
	return c == '{' || c == '[' || c == '"' || c == '-' || c >= '0' && c <= '9' || c == 't' || c == 'f' || c == 'n'
}

// more reads what follows an element of an array or object: true after a
// comma, false at the closing bracket.
func (b *bodyDecoder) more(closing byte, field string) (bool, *ingestError) {
	c, err := b.sc.peek()
	if err != nil {
		return false, b.fail(b.sc.eofOr(err), field)
	}
	if c != ',' && c != closing {
		return false, b.fail(b.sc.outside(c, "after an element"), field)
	}
	b.sc.pos++
	return c == ',', nil
}

// open consumes the opening bracket that is next, and reports whether the
// array or object is empty (its closing bracket consumed too).
func (b *bodyDecoder) open(closing byte, field string) (bool, *ingestError) {
	b.sc.pos++
	c, err := b.sc.peek()
	if err != nil {
		return false, b.fail(b.sc.eofOr(err), field)
	}
	if c == closing {
		b.sc.pos++
		return true, nil
	}
	return false, nil
}

func (b *bodyDecoder) body() (int, *ingestError) {
	c, err := b.sc.peek()
	if errors.Is(err, io.EOF) {
		return 0, &ingestError{Status: http.StatusBadRequest, Message: "empty body: expected a JSON record, an array of records or NDJSON", Record: -1}
	}
	if err != nil {
		return 0, b.fail(err, "")
	}
	if c != '[' {
		for {
			if err := b.record(); err != nil {
				return 0, err
			}
			_, err := b.sc.peek()
			if errors.Is(err, io.EOF) {
				return b.index, nil
			}
			if err != nil {
				return 0, b.fail(err, "")
			}
		}
	}
	empty, ierr := b.open(']', "")
	if ierr != nil {
		return 0, ierr
	}
	for more := !empty; more; {
		if err := b.record(); err != nil {
			return 0, err
		}
		if more, ierr = b.more(']', ""); ierr != nil {
			return 0, ierr
		}
	}
	if _, err := b.sc.peek(); !errors.Is(err, io.EOF) {
		if err == nil {
			err = &syntaxError{"data after the array"}
		}
		return 0, b.fail(err, "")
	}
	return b.index, nil
}

func tooManyRecords(limit int) *ingestError {
	return &ingestError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("more than %d records", limit), Record: limit}
}

// record decodes the record that comes next, then validates it and
// appends its span.
func (b *bodyDecoder) record() *ingestError {
	if b.index == b.limits.MaxRecords {
		return tooManyRecords(b.limits.MaxRecords)
	}
	if err := b.ctx.Err(); err != nil {
		return b.gone(err)
	}
	c, err := b.sc.peek()
	if err != nil {
		return b.fail(b.sc.eofOr(err), "")
	}
	if c != '{' {
		if startsValue(c) {
			return b.bad("", "a record must be a JSON object")
		}
		return b.fail(b.sc.outside(c, "looking for beginning of value"), "")
	}
	if err := b.parse(); err != nil {
		return err
	}
	v, ierr := b.validate()
	if ierr != nil {
		return ierr
	}
	b.build(v)
	b.index++
	return nil
}

func (b *bodyDecoder) bad(field, format string, args ...any) *ingestError {
	return &ingestError{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...), Record: b.index, Field: field}
}

func (b *bodyDecoder) tooLarge(field, format string, args ...any) *ingestError {
	return &ingestError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf(format, args...), Record: b.index, Field: field}
}

// gone answers a request whose client left or whose receiver is stopping.
func (b *bodyDecoder) gone(err error) *ingestError {
	return &ingestError{Status: http.StatusServiceUnavailable, Message: "decoding stopped: " + err.Error(), Record: -1}
}

// fail turns an error of the JSON scanner into the request's answer: the
// body could not be read, or it is not well-formed JSON (or not UTF-8).
func (b *bodyDecoder) fail(err error, field string) *ingestError {
	if b.src.err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](b.src.err); ok {
			return &ingestError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("request body exceeds %d bytes", b.limits.MaxBody), Record: -1}
		}
		if cerr := b.ctx.Err(); cerr != nil {
			return b.gone(cerr)
		}
		return &ingestError{Status: http.StatusBadRequest, Message: "cannot read the request body: " + b.src.err.Error(), Record: -1}
	}
	if errors.Is(err, errInvalidUTF8) || errors.Is(err, errLoneSurrogate) {
		return b.bad(field, "%v", err)
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return &ingestError{Status: http.StatusBadRequest, Message: "malformed JSON: " + err.Error(), Record: b.index, Field: field}
}

// token reads a scalar value as a json.Token: a string, json.Number, bool
// or nil; an object or array is the json.Delim of its bracket, unread.
func (b *bodyDecoder) token(field string) (json.Token, *ingestError) {
	c, err := b.sc.peek()
	if err != nil {
		return nil, b.fail(b.sc.eofOr(err), field)
	}
	switch {
	case c == '"':
		text, tooLong, err := b.sc.str(b.limits.MaxValueLen)
		if err != nil {
			return nil, b.fail(err, field)
		}
		if tooLong {
			return nil, b.tooLarge(field, "longer than %d bytes", b.limits.MaxValueLen)
		}
		return string(text), nil
	case c == '-' || c >= '0' && c <= '9':
		text, err := b.sc.number()
		if err != nil {
			return nil, b.fail(err, field)
		}
		return json.Number(text), nil
	case c == '{' || c == '[':
		return json.Delim(c), nil
	}
	lit, err := b.sc.literal()
	if err != nil {
		return nil, b.fail(err, field)
	}
	switch lit {
	case 't':
		return true, nil
	case 'f':
		return false, nil
	}
	return nil, nil
}

// spend charges the memory budget.
func (b *bodyDecoder) spend(field string, n int) *ingestError {
	b.spent += int64(n)
	if b.spent > b.budget {
		return b.tooLarge(field, "the records would take more than %d bytes as spans (%d times max_request_body): send fewer chunk times, attributes or records per request", b.budget, budgetFactor)
	}
	return nil
}

// rawRecord is a record as read, before validation. Its slices are reused
// from one record to the next.
type rawRecord struct {
	seen                    uint16
	traceID, spanID, parent json.Token
	name                    string
	start, end              json.Token
	// times holds chunk_times_unix_nano, or chunk_offsets_ms as float64
	// bits until validate converts them.
	times                    []int64
	offsetsGiven, timesGiven bool
	attrs                    map[string]any
}

// has reports whether the record gave field (null included).
func (r *rawRecord) has(field string) bool {
	return r.seen&(1<<slices.Index(recordFields[:], field)) != 0
}

var recordFields = [...]string{fieldTraceID, fieldSpanID, fieldParentSpanID, fieldName, fieldStart, fieldEnd, fieldAttributes, fieldChunkTimes, fieldChunkOffsets}

// maxFieldName bounds the key of a record field read whole: the longest
// field name is far shorter.
const maxFieldName = 64

// fieldIndex returns the index of key in recordFields, or -1.
func fieldIndex(key []byte) int {
	for i, f := range recordFields {
		if string(key) == f {
			return i
		}
	}
	return -1
}

// parse reads the fields of the record whose brace is next, up to its
// closing brace: types, syntax and the size limits, which stop the
// request as soon as they are passed.
func (b *bodyDecoder) parse() *ingestError {
	r := &b.rec
	*r = rawRecord{times: r.times[:0]}
	empty, ierr := b.open('}', "")
	if ierr != nil || empty {
		return ierr
	}
	for more := true; more; {
		c, err := b.sc.peek()
		if err != nil {
			return b.fail(b.sc.eofOr(err), "")
		}
		if c != '"' {
			return b.fail(b.sc.outside(c, "looking for beginning of object key string"), "")
		}
		text, tooLong, err := b.sc.str(maxFieldName)
		if err != nil {
			return b.fail(err, "")
		}
		bit := fieldIndex(text)
		if tooLong || bit < 0 {
			return b.bad(string(text), "unknown field")
		}
		key := recordFields[bit]
		if r.seen&(1<<bit) != 0 {
			return b.bad(key, "duplicate field")
		}
		r.seen |= 1 << bit
		if err := b.sc.next(':', "after object key"); err != nil {
			return b.fail(err, key)
		}
		if err := b.field(key); err != nil {
			return err
		}
		if more, ierr = b.more('}', ""); ierr != nil {
			return ierr
		}
	}
	return nil
}

// field reads the value of the record field key.
func (b *bodyDecoder) field(key string) *ingestError {
	r := &b.rec
	switch key {
	case fieldChunkTimes, fieldChunkOffsets:
		if r.timesGiven || r.offsetsGiven {
			return b.bad(fieldChunkOffsets, "give chunk_times_unix_nano or chunk_offsets_ms, not both")
		}
		r.timesGiven = key == fieldChunkTimes
		r.offsetsGiven = key == fieldChunkOffsets
		return b.chunks(key)
	case fieldAttributes:
		return b.attributes()
	}
	t, err := b.token(key)
	if err != nil {
		return err
	}
	if _, open := t.(json.Delim); open {
		switch key {
		case fieldTraceID:
			return b.bad(key, "must be a string of 32 hex digits")
		case fieldSpanID, fieldParentSpanID:
			return b.bad(key, "must be a string of 16 hex digits")
		case fieldStart, fieldEnd:
			return b.bad(key, "must be a positive number of unix nanoseconds")
		}
	}
	switch key {
	case fieldTraceID:
		r.traceID = t
	case fieldSpanID:
		r.spanID = t
	case fieldParentSpanID:
		r.parent = t
	case fieldStart:
		r.start = t
	case fieldEnd:
		r.end = t
	case fieldName:
		s, ok := t.(string)
		if !ok || s == "" {
			return b.bad(fieldName, "required: a non-empty string such as \"chat gpt-4o\"")
		}
		r.name = s
	}
	return nil
}

// maxChunkString bounds a chunk time given as a string: no decimal time
// needs more.
const maxChunkString = 64

// chunks reads a chunk time array as it comes, without building a value
// per element: records may carry a hundred thousand chunk times.
func (b *bodyDecoder) chunks(field string) *ingestError {
	r := &b.rec
	c, err := b.sc.peek()
	if err != nil {
		return b.fail(b.sc.eofOr(err), field)
	}
	if c != '[' {
		if c == 'n' {
			if _, err := b.sc.literal(); err != nil {
				return b.fail(err, field)
			}
			r.times = r.times[:0]
			return nil
		}
		if startsValue(c) {
			return b.bad(field, "must be an array")
		}
		return b.fail(b.sc.outside(c, "looking for beginning of value"), field)
	}
	millis := field == fieldChunkOffsets
	out := r.times[:0]
	empty, ierr := b.open(']', field)
	if ierr != nil {
		return ierr
	}
	for more := !empty; more; {
		if len(out) == b.limits.MaxChunks {
			return b.tooLarge(field, "more than %d chunk times", b.limits.MaxChunks)
		}
		if len(out)%checkEvery == checkEvery-1 {
			if err := b.ctx.Err(); err != nil {
				return b.gone(err)
			}
		}
		v, ierr := b.chunkTime(field, len(out), millis)
		if ierr != nil {
			return ierr
		}
		out = append(out, v)
		if more, ierr = b.more(']', field); ierr != nil {
			return ierr
		}
	}
	r.times = out
	return b.spend(field, costEvent*len(out))
}

// chunkTime reads element n of a chunk time array: unix nanoseconds, or
// with millis a millisecond offset as the bits of a float64 (the offsets
// share the times' buffer until the start time is known).
func (b *bodyDecoder) chunkTime(field string, n int, millis bool) (int64, *ingestError) {
	c, err := b.sc.peek()
	if err != nil {
		return 0, b.fail(b.sc.eofOr(err), field)
	}
	var v int64
	var perr error
	switch {
	case c == '"':
		text, tooLong, serr := b.sc.str(maxChunkString)
		if serr != nil {
			return 0, b.fail(serr, field)
		}
		if tooLong {
			return 0, b.bad(field, "element %d: a string of more than %d bytes is no time", n, maxChunkString)
		}
		if millis {
			if !decimalMillis(text) {
				return 0, b.bad(field, "element %d: %q is not a string of decimal milliseconds such as \"12.5\"", n, text)
			}
			var ms float64
			ms, perr = parseMillis(text)
			v = int64(math.Float64bits(ms))
		} else {
			v, perr = parseNanos(string(text))
		}
	case c == '-' || c >= '0' && c <= '9':
		text, serr := b.sc.number()
		if serr != nil {
			return 0, b.fail(serr, field)
		}
		if millis {
			var ms float64
			ms, perr = parseMillis(text)
			v = int64(math.Float64bits(ms))
		} else {
			v, perr = parseNanosNumber(text)
		}
	case startsValue(c):
		return 0, b.bad(field, "element %d: must be a number or a decimal string", n)
	default:
		return 0, b.fail(b.sc.outside(c, "looking for beginning of value"), field)
	}
	err = perr
	if err != nil {
		return 0, b.bad(field, "element %d: %v", n, err)
	}
	return v, nil
}

// attributes reads the attribute object that comes next into a map:
// duplicate keys are found by the map, in constant time.
func (b *bodyDecoder) attributes() *ingestError {
	c, err := b.sc.peek()
	if err != nil {
		return b.fail(b.sc.eofOr(err), fieldAttributes)
	}
	if c != '{' {
		if startsValue(c) {
			return b.bad(fieldAttributes, "must be an object of attribute values")
		}
		return b.fail(b.sc.outside(c, "looking for beginning of value"), fieldAttributes)
	}
	r := &b.rec
	r.attrs = map[string]any{}
	empty, ierr := b.open('}', fieldAttributes)
	if ierr != nil || empty {
		return ierr
	}
	for more := true; more; {
		c, err := b.sc.peek()
		if err != nil {
			return b.fail(b.sc.eofOr(err), fieldAttributes)
		}
		if c != '"' {
			return b.fail(b.sc.outside(c, "looking for beginning of object key string"), fieldAttributes)
		}
		if len(r.attrs) == b.limits.MaxAttrs {
			return b.tooLarge(fieldAttributes, "more than %d attributes", b.limits.MaxAttrs)
		}
		text, tooLong, err := b.sc.str(b.limits.MaxValueLen)
		if err != nil {
			return b.fail(err, fieldAttributes)
		}
		if tooLong {
			return b.tooLarge(fieldAttributes, "an attribute key longer than %d bytes", b.limits.MaxValueLen)
		}
		key := string(text)
		if err := b.sc.next(':', "after object key"); err != nil {
			return b.fail(err, fieldAttributes+"."+key)
		}
		if err := b.attribute(key); err != nil {
			// The field is named here, not for every attribute read.
			if err.Record >= 0 && err.Field == "" {
				err.Field = fieldAttributes + "." + key
			}
			return err
		}
		if more, ierr = b.more('}', fieldAttributes); ierr != nil {
			return ierr
		}
	}
	return nil
}

// attribute reads the value of one attribute; its errors leave the field
// for the caller to name.
func (b *bodyDecoder) attribute(key string) *ingestError {
	r := &b.rec
	if _, dup := r.attrs[key]; dup {
		return b.bad("", "duplicate attribute key")
	}
	if err := b.spend("", costAttribute+len(key)); err != nil {
		return err
	}
	v, err := b.value("")
	if err != nil {
		return err
	}
	r.attrs[key] = v
	return nil
}

// value converts one attribute value: a string, number or boolean, or a
// homogeneous array of them.
func (b *bodyDecoder) value(field string) (any, *ingestError) {
	c, err := b.sc.peek()
	if err != nil {
		return nil, b.fail(b.sc.eofOr(err), field)
	}
	if c != '[' {
		v, err := b.scalar(field, c)
		if err == nil && v == nil {
			err = b.bad(field, "must be a string, number, boolean or an array of them")
		}
		return v, err
	}
	elems := []any{}
	hasDouble := false
	empty, ierr := b.open(']', field)
	if ierr != nil {
		return nil, ierr
	}
	for more := !empty; more; {
		if len(elems) == b.limits.MaxValueLen {
			return nil, b.tooLarge(field, "array of more than %d elements", b.limits.MaxValueLen)
		}
		c, err := b.sc.peek()
		if err != nil {
			return nil, b.fail(b.sc.eofOr(err), field)
		}
		e, ierr := b.scalar(field, c)
		if ierr != nil {
			return nil, ierr
		}
		if e == nil {
			return nil, b.bad(field, "arrays must hold strings, numbers or booleans")
		}
		if err := b.spend(field, costElement); err != nil {
			return nil, err
		}
		if len(elems) > 0 && !sameKind(elems[0], e) {
			return nil, b.bad(field, "array elements must all have one type")
		}
		_, isDouble := e.(float64)
		hasDouble = hasDouble || isDouble
		elems = append(elems, e)
		if more, ierr = b.more(']', field); ierr != nil {
			return nil, ierr
		}
	}
	// OTLP arrays are homogeneous: [1, 2.5] becomes doubles.
	if hasDouble {
		for i, e := range elems {
			if n, ok := e.(int64); ok {
				elems[i] = float64(n)
			}
		}
	}
	return elems, nil
}

// scalar reads a scalar value whose first byte, c, is next; it returns
// nil, nil, reading nothing, for a value that is not one (an object or an
// array), and nil, nil for null.
func (b *bodyDecoder) scalar(field string, c byte) (any, *ingestError) {
	switch {
	case c == '"':
		text, tooLong, err := b.sc.str(b.limits.MaxValueLen)
		if err != nil {
			return nil, b.fail(err, field)
		}
		if tooLong {
			return nil, b.tooLarge(field, "string longer than %d bytes", b.limits.MaxValueLen)
		}
		s := string(text)
		return s, b.spend(field, len(s))
	case c == '-' || c >= '0' && c <= '9':
		text, err := b.sc.number()
		if err != nil {
			return nil, b.fail(err, field)
		}
		if n, err := strconv.ParseInt(string(text), 10, 64); err == nil {
			return n, nil
		}
		f, err := strconv.ParseFloat(string(text), 64)
		if err != nil {
			return nil, b.bad(field, "number %s is out of range", text)
		}
		return f, nil
	case c == '{' || c == '[':
		return nil, nil
	}
	lit, err := b.sc.literal()
	if err != nil {
		return nil, b.fail(err, field)
	}
	switch lit {
	case 't':
		return true, nil
	case 'f':
		return false, nil
	}
	return nil, nil
}

func sameKind(a, b any) bool {
	switch a.(type) {
	case string:
		_, ok := b.(string)
		return ok
	case bool:
		_, ok := b.(bool)
		return ok
	default: // int64 or float64
		switch b.(type) {
		case int64, float64:
			return true
		}
		return false
	}
}

// validRecord is a record that passed validation, ready to become a span.
type validRecord struct {
	traceID    pcommon.TraceID
	spanID     pcommon.SpanID
	parent     pcommon.SpanID
	start, end int64
	service    string
	chunks     []int64
}

// validate checks what parse could not see one token at a time: ids, times
// and their order, and the reserved attribute names.
func (b *bodyDecoder) validate() (validRecord, *ingestError) {
	r := &b.rec
	var v validRecord
	if ok, err := hexID(r.traceID, v.traceID[:]); err != nil {
		return v, b.bad(fieldTraceID, "%v", err)
	} else if !ok {
		for v.traceID == (pcommon.TraceID{}) {
			binary.BigEndian.PutUint64(v.traceID[:8], b.newID())
			binary.BigEndian.PutUint64(v.traceID[8:], b.newID())
		}
	}
	if ok, err := hexID(r.spanID, v.spanID[:]); err != nil {
		return v, b.bad(fieldSpanID, "%v", err)
	} else if !ok {
		for v.spanID == (pcommon.SpanID{}) {
			binary.BigEndian.PutUint64(v.spanID[:], b.newID())
		}
	}
	if _, err := hexID(r.parent, v.parent[:]); err != nil {
		return v, b.bad(fieldParentSpanID, "%v", err)
	}
	if r.name == "" {
		return v, b.bad(fieldName, "required: a non-empty string such as \"chat gpt-4o\"")
	}
	if r.start == nil {
		return v, b.bad(fieldStart, "required: missing, or null")
	}
	var err error
	if v.start, err = parseNanos(r.start); err != nil {
		return v, b.bad(fieldStart, "required: %v", err)
	}
	v.chunks = r.times
	if r.offsetsGiven {
		for n, bits := range v.chunks {
			ms := math.Float64frombits(uint64(bits))
			ns := ms * 1e6
			if ns >= float64(math.MaxInt64-v.start) {
				return v, b.bad(fieldChunkOffsets, "element %d: %v milliseconds is out of range", n, ms)
			}
			v.chunks[n] = v.start + int64(math.Round(ns))
		}
	}
	v.end = v.start
	if r.has(fieldEnd) {
		if r.end == nil {
			return v, b.bad(fieldEnd, "null is not a positive number of unix nanoseconds")
		}
		if v.end, err = parseNanos(r.end); err != nil {
			return v, b.bad(fieldEnd, "%v", err)
		}
		if v.end < v.start {
			return v, b.bad(fieldEnd, "ends before start_time_unix_nano")
		}
	} else if len(v.chunks) > 0 {
		v.end = max(v.start, slices.Max(v.chunks))
	}
	for k := range r.attrs {
		if k == "" {
			return v, b.bad(fieldAttributes+".", "attribute keys must not be empty")
		}
		if strings.HasPrefix(k, semconv.StreamNamespace) {
			return v, b.bad(fieldAttributes+"."+k, "reserved: llm.stream.* figures are derived from the chunk times by the stall processor, never taken from a record")
		}
	}
	if err := b.plausible(&v); err != nil {
		return v, err
	}
	// service.name is a resource attribute: it names the resource the span
	// belongs to, and the metrics connector groups by it there.
	if s, ok := r.attrs[semconv.AttrServiceName]; ok {
		name, isString := s.(string)
		if !isString || name == "" {
			return v, b.bad(fieldAttributes+"."+semconv.AttrServiceName, "must be a non-empty string")
		}
		v.service = name
		delete(r.attrs, semconv.AttrServiceName)
	}
	return v, b.spend("", costSpan+len(r.name))
}

// plausible checks a record's times against the time its request arrived:
// a stream that started days ago, that lasts for days, or that ends in the
// future is a client's clock or a client's lie, and either would skew every
// figure and histogram it reached.
func (b *bodyDecoder) plausible(v *validRecord) *ingestError {
	l := b.limits
	if age := time.Duration(b.received - v.start); age > l.MaxStartAge {
		return b.bad(fieldStart, "%s is %s before the request arrived; a record may start at most %s before (max_start_age)",
			formatNanos(v.start), age.Round(time.Second), l.MaxStartAge)
	}
	// The latest time of the record, and the field that gave it.
	field, last := fieldEnd, v.end
	if len(v.chunks) > 0 {
		chunkField := fieldChunkTimes
		if b.rec.offsetsGiven {
			chunkField = fieldChunkOffsets
		}
		if c := slices.Max(v.chunks); c > last || !b.rec.has(fieldEnd) {
			field, last = chunkField, max(c, last)
		}
	}
	if v.start > b.received+int64(l.MaxClockSkew) {
		field, last = fieldStart, v.start
	}
	if ahead := time.Duration(last - b.received); ahead > l.MaxClockSkew {
		return b.bad(field, "%s is %s after the request arrived; record times may be at most %s ahead (max_clock_skew)",
			formatNanos(last), ahead.Round(time.Millisecond), l.MaxClockSkew)
	}
	if d := time.Duration(last - v.start); d > l.MaxDuration {
		return b.bad(field, "the stream would last %s; at most %s is taken (max_stream_duration)", d.Round(time.Millisecond), l.MaxDuration)
	}
	// Within the span, as the processor judges a span's chunk times
	// (figures.ChunkReader.Judge): a record whose chunks lie outside it
	// would be accepted here and then measured by nothing.
	if len(v.chunks) > 0 {
		chunkField := fieldChunkTimes
		if b.rec.offsetsGiven {
			chunkField = fieldChunkOffsets
		}
		skew := figures.ClockSkew.Nanoseconds()
		if first := slices.Min(v.chunks); first < v.start-skew {
			return b.bad(chunkField, "%s is %s before start_time_unix_nano; a chunk may be at most %s before the start",
				formatNanos(first), time.Duration(v.start-first).Round(time.Millisecond), figures.ClockSkew)
		}
		if c := slices.Max(v.chunks); b.rec.has(fieldEnd) && c > v.end+skew {
			return b.bad(chunkField, "%s is %s after end_time_unix_nano; a chunk may be at most %s after the end",
				formatNanos(c), time.Duration(c-v.end).Round(time.Millisecond), figures.ClockSkew)
		}
	}
	return nil
}

// formatNanos names a unix-nano time in an error message.
func formatNanos(ns int64) string {
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

// build appends the span of a validated record.
func (b *bodyDecoder) build(v validRecord) {
	spans, ok := b.byService[v.service]
	if !ok {
		rs := b.td.ResourceSpans().AppendEmpty()
		if v.service != "" {
			rs.Resource().Attributes().PutStr(semconv.AttrServiceName, v.service)
		}
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(metadata.ScopeName)
		spans = ss.Spans()
		b.byService[v.service] = spans
	}
	span := spans.AppendEmpty()
	span.SetName(b.rec.name)
	span.SetKind(ptrace.SpanKindClient)
	span.SetTraceID(v.traceID)
	span.SetSpanID(v.spanID)
	span.SetParentSpanID(v.parent)
	span.SetStartTimestamp(pcommon.Timestamp(v.start))
	span.SetEndTimestamp(pcommon.Timestamp(v.end))
	// FromRaw builds the map in one pass (PutEmpty would search the map on
	// every insert); the values are all of the types it takes.
	_ = span.Attributes().FromRaw(b.rec.attrs)
	span.Attributes().PutStr(semconv.AttrCapture, semconv.CaptureIngest) // a record cannot set llm.stream.*
	events := span.Events()
	if maxEvents := b.maxChunkEvents(); len(v.chunks) > maxEvents {
		b.elide(v.chunks, maxEvents, span)
		return
	}
	events.EnsureCapacity(len(v.chunks))
	for _, at := range v.chunks {
		ev := events.AppendEmpty()
		ev.SetName(semconv.EventChunk)
		ev.SetTimestamp(pcommon.Timestamp(at))
	}
}

func (b *bodyDecoder) maxChunkEvents() int {
	if b.limits.MaxChunkEvents > 0 {
		return b.limits.MaxChunkEvents
	}
	return figures.DefaultMaxChunkEvents
}

// elide writes the chunk events a keeper keeps of chunks, in time order
// (a record may list them in any), and refunds the memory budget the
// elided ones were charged.
func (b *bodyDecoder) elide(chunks []int64, maxEvents int, span ptrace.Span) {
	if b.keeper == nil {
		b.keeper = figures.NewKeeper(maxEvents, b.limits.KeepGapsAbove)
	}
	k := b.keeper
	k.Reset()
	slices.Sort(chunks)
	for _, at := range chunks {
		// A record's chunks carry no kind: they are answer chunks.
		k.Add(at, "")
	}
	figures.AppendChunkEvents(k, span.Events())
	figures.PutElision(k, span.Attributes())
	b.spent -= costEvent * k.Elided()
}

// hexID decodes an optional hex id token into dst; absent, null and "" mean
// none.
func hexID(t json.Token, dst []byte) (bool, error) {
	if t == nil {
		return false, nil
	}
	s, ok := t.(string)
	if !ok {
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
	for _, c := range dst {
		if c != 0 {
			return true, nil
		}
	}
	return false, errors.New("must not be all zeros")
}

// parseNanos reads a unix-nano time given as a JSON number or a decimal
// string (a JavaScript number cannot hold one exactly; OTLP/JSON uses
// strings), as a token or a whole raw value.
func parseNanos(t any) (int64, error) {
	var text string
	switch v := t.(type) {
	case string:
		if !digits(v) {
			return 0, fmt.Errorf("%q is not a decimal string of unix nanoseconds", v)
		}
		text = v
	case json.Number:
		text = string(v)
	case []byte:
		if len(v) >= 2 && v[0] == '"' {
			return parseNanos(string(v[1 : len(v)-1]))
		}
		text = string(v)
	default:
		return 0, fmt.Errorf("%v is not a positive number of unix nanoseconds", tokenText(t))
	}
	v, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		// A JSON number written with a fraction or an exponent, rounded
		// to the nanosecond exactly: a float64 holds today's unix nanos
		// only to 256 ns. 128 bits hold the integer part and 64 of the
		// fraction; the text is at most a kilobyte.
		f, _, ferr := big.ParseFloat(text, 10, 128, big.ToNearestEven)
		if ferr != nil || f.Sign() <= 0 || f.IsInf() {
			return 0, fmt.Errorf("%s is not a positive number of unix nanoseconds", text)
		}
		n, _ := f.Add(f, big.NewFloat(0.5)).Int(nil) // half up, then truncated
		if !n.IsInt64() {
			return 0, fmt.Errorf("%s is not a positive number of unix nanoseconds", text)
		}
		v = n.Int64()
	}
	if v <= 0 {
		return 0, fmt.Errorf("%s is not a positive number of unix nanoseconds", text)
	}
	return v, nil
}

func digits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseNanosNumber reads unix nanoseconds given as a JSON number, whose
// grammar the scanner checked: plain digits at once, anything else (a
// fraction, an exponent, a sign) as parseNanos reads it.
func parseNanosNumber(text []byte) (int64, error) {
	if len(text) == 0 || len(text) > 18 {
		return parseNanos(text)
	}
	var v int64
	for _, c := range text {
		if c < '0' || c > '9' {
			return parseNanos(text)
		}
		v = v*10 + int64(c-'0')
	}
	if v <= 0 {
		return parseNanos(text)
	}
	return v, nil
}

// pow10 holds the powers of ten a float64 holds exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// fastMillis reads digits with an optional fraction ("120.5") of at most
// 15 significant digits exactly as strconv.ParseFloat does: the mantissa
// and the power of ten are both exact float64s, so one division rounds
// correctly. ok is false for anything else.
func fastMillis(text []byte) (float64, bool) {
	var mantissa uint64
	digits, frac := 0, -1
	for i, c := range text {
		switch {
		case c >= '0' && c <= '9':
			mantissa = mantissa*10 + uint64(c-'0')
			digits++
		case c == '.' && frac < 0 && i > 0:
			frac = i
		default:
			return 0, false
		}
	}
	if digits == 0 || digits > 15 || frac == len(text)-1 {
		return 0, false
	}
	if frac < 0 {
		return float64(mantissa), true
	}
	return float64(mantissa) / pow10[len(text)-1-frac], true
}

// parseMillis reads a millisecond offset: the text of a JSON number, finite
// and not negative, or of a string that decimalMillis accepted (decimal
// digits with an optional fraction, "12.5"; not "1e3", "+1" or "Infinity",
// as the JSON Schema says).
func parseMillis(raw []byte) (float64, error) {
	if ms, ok := fastMillis(raw); ok {
		return ms, nil
	}
	ms, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsNaN(ms) || math.IsInf(ms, 0) || ms < 0 {
		return 0, fmt.Errorf("%s is not a non-negative number of milliseconds", raw)
	}
	return ms, nil
}

// decimalMillis reports whether s is digits, optionally followed by a dot
// and more digits.
func decimalMillis(s []byte) bool {
	whole, frac, dot := bytes.Cut(s, []byte{'.'})
	return len(whole) > 0 && digits(string(whole)) && (!dot || len(frac) > 0 && digits(string(frac)))
}

// tokenText names a token that is not a number in an error message.
func tokenText(t json.Token) string {
	switch v := t.(type) {
	case nil:
		return "null"
	case json.Delim:
		return "an array or object"
	default:
		return fmt.Sprint(v)
	}
}
