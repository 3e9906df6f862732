// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHeldBytesKeepTheirArrival: the committed body replays what it held
// one upstream read at a time, each with the time it arrived, then the
// stream as it comes, with no arrival of its own (the proxy stamps it).
func TestHeldBytesKeepTheirArrival(t *testing.T) {
	rd := &reader{}
	for i, read := range []string{keepaliveFrame, roleFrame, textFrame} {
		assert.True(t, rd.hold([]byte(read), int64(100*(i+1)), nil))
	}
	b := &committedBody{s: &Session{}, rd: rd, held: rd.held, marks: rd.marks, rc: io.NopCloser(strings.NewReader(doneFrame))}
	buf := make([]byte, 1<<10)
	var got []string
	var ats []int64
	for {
		n, err := b.Read(buf)
		if n > 0 {
			got = append(got, string(buf[:n]))
			at, _ := b.ArrivedAt()
			ats = append(ats, at)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
	}
	assert.Equal(t, []string{keepaliveFrame, roleFrame, textFrame, doneFrame}, got)
	assert.Equal(t, []int64{100, 200, 300, 0}, ats)
}

// TestHeldMarksAreBounded: an upstream that trickles its bytes before
// content costs at most maxHeldMarks marks; the last one takes in the reads
// past them, stamped with the latest arrival, and every byte is replayed.
func TestHeldMarksAreBounded(t *testing.T) {
	rd := &reader{}
	const reads = 3 * maxHeldMarks
	for i := range reads {
		rd.hold([]byte(":"), int64(i+1), nil)
	}
	require.Len(t, rd.marks, maxHeldMarks)
	last := rd.marks[maxHeldMarks-1]
	assert.Equal(t, HeldMark{End: reads, At: reads}, last)
	b := &committedBody{s: &Session{}, rd: rd, held: rd.held, marks: rd.marks, rc: io.NopCloser(strings.NewReader(""))}
	all, err := io.ReadAll(b)
	require.NoError(t, err)
	assert.Len(t, all, reads)
}
