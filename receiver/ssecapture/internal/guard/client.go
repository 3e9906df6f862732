// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"

	"go.opentelemetry.io/collector/client"
)

// unknownClient is the one budget of the calls that tell no client.
const unknownClient = "unknown"

// DefaultIPv6Prefix is how many leading bits of an IPv6 address name its
// client by default: the /64 that one host or one home network is given,
// so that a client cannot take a new bucket for each of its addresses.
const DefaultIPv6Prefix = 64

// ClientOf names the client of a call for its budget, from what the
// listener put in the request's context (collector client.Info): the
// authenticator's attributes when it set any, else the client's IP
// address (confighttp records no port, so a client that opens new
// connections keeps its bucket), an IPv6 address cut to its first
// ipv6Prefix bits (0: DefaultIPv6Prefix), else one bucket for the calls
// that tell neither. The prefixes keep one kind from posing as another,
// as the hedge_advisor's client key does. Attributes are hashed: the name stays
// short whatever the authenticator returns, and no credential an
// authenticator exposes is held.
func ClientOf(ctx context.Context, ipv6Prefix int) string {
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
			return "addr:" + addrKey(s, ipv6Prefix)
		}
	}
	return unknownClient
}

// addrKey is the client of address s: an IPv4 address (an IPv4-mapped IPv6
// one included) as it is, an IPv6 address as its network of prefix bits
// (0: DefaultIPv6Prefix), its zone dropped, a port (a listener other than
// confighttp's may give one) dropped; anything else as it is. An
// IPv6 client is handed at least a /64 and picks any address in it at no
// cost: keyed by the address, it could spend a fresh bucket per call and
// drain the shared one alone.
func addrKey(s string, prefix int) string {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return s
		}
		a = ap.Addr()
	}
	a = a.Unmap()
	if !a.Is6() {
		return a.String()
	}
	if prefix <= 0 || prefix > 128 {
		prefix = DefaultIPv6Prefix
	}
	p, err := a.WithZone("").Prefix(prefix)
	if err != nil {
		return s
	}
	return p.String()
}
