// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package llmstream

import "encoding/binary"

// messageTracker follows the messages of an AWS event stream by their
// lengths alone: each message starts with its total length (4 bytes, big
// endian), so a message boundary is where the bytes of the last one end.
// It reads no CRC and no header: the decoder does that for the frames; this
// only says whether an exception message may follow.
type messageTracker struct {
	prelude  [4]byte
	have     int   // bytes of prelude read of the message being sent
	left     int64 // bytes still to come of it, once its length is read
	unframed bool  // a length too short for a message: the framing is lost
}

// eventStreamMinMessage is the least a message takes: the 12-byte prelude
// (total length, headers length, prelude CRC) and the 4-byte message CRC.
const eventStreamMinMessage = 16

func (t *messageTracker) track(p []byte) {
	for len(p) > 0 && !t.unframed {
		if t.left > 0 {
			n := min(int64(len(p)), t.left)
			t.left -= n
			p = p[n:]
			continue
		}
		n := copy(t.prelude[t.have:], p)
		t.have += n
		p = p[n:]
		if t.have < len(t.prelude) {
			return
		}
		total := int64(binary.BigEndian.Uint32(t.prelude[:]))
		if total < eventStreamMinMessage {
			t.unframed = true
			return
		}
		t.have, t.left = 0, total-int64(len(t.prelude))
	}
}

// atBoundary reports whether the bytes so far end with a whole message.
func (t *messageTracker) atBoundary() bool {
	return !t.unframed && t.have == 0 && t.left == 0
}
