// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"go.opentelemetry.io/collector/client"
)

// unknownClient is the one budget of the calls that tell no client.
const unknownClient = "unknown"

// ClientOf names the client of a call for its budget, from what the
// listener put in the request's context (collector client.Info): the
// authenticator's attributes when it set any, else the client's IP
// address (confighttp records no port, so a client that opens new
// connections keeps its bucket), else one bucket for the calls that tell
// neither. The prefixes keep one kind from posing as another, as the
// hedge_advisor's client key does. Attributes are hashed: the name stays
// short whatever the authenticator returns, and no credential an
// authenticator exposes is held.
func ClientOf(ctx context.Context) string {
	info := client.FromContext(ctx)
	if info.Auth != nil {
		if names := info.Auth.GetAttributeNames(); len(names) > 0 {
			names = slices.Clone(names)
			slices.Sort(names)
			h := sha256.New()
			for _, n := range names {
				// Length-prefixed, so that no name and value can pose as
				// another pair.
				v := fmt.Sprint(info.Auth.GetAttribute(n))
				_, _ = fmt.Fprintf(h, "%d:%s%d:%s", len(n), n, len(v), v) // a hash never fails to write
			}
			return "auth:" + hex.EncodeToString(h.Sum(nil)[:16])
		}
	}
	if info.Addr != nil {
		if s := info.Addr.String(); s != "" {
			return "addr:" + s
		}
	}
	return unknownClient
}
