// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package aggregate // import "github.com/streamstall/streamstall/connector/stallmetricsconnector/internal/aggregate"

import (
	"encoding/binary"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Attribute is one dimension of a data point; an attribute with Present
// false is left off the point.
type Attribute struct {
	Name    string
	Value   pcommon.Value
	Present bool
}

// AppendKey appends an injective encoding of the attributes' values to dst.
// The names are not encoded: within one metric every key lists the same
// names in the same order. Each value is its type and its length-prefixed
// string form, so that no value can pose as two, and the int 1 differs from
// the string "1".
func AppendKey(dst []byte, attrs []Attribute) []byte {
	for _, a := range attrs {
		if !a.Present {
			dst = append(dst, 0)
			continue
		}
		dst = append(dst, byte(a.Value.Type())+1)
		s := a.Value.AsString()
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	return dst
}

// Fill writes the present attributes into m.
func Fill(m pcommon.Map, attrs []Attribute) {
	m.EnsureCapacity(len(attrs))
	for _, a := range attrs {
		if a.Present {
			a.Value.CopyTo(m.PutEmpty(a.Name))
		}
	}
}
