// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Package dimension is the configured dimensions of the components that
// split their series by span or resource attributes (stall_metrics,
// hedge_advisor): one config type, checked once, so that both accept the
// same keys and refuse the same mistakes with the same words.
package dimension // import "github.com/streamstall/streamstall/internal/dimension"

import "fmt"

// Dimension is an extra span or resource attribute to split series by. When
// a span and its resource both lack it, Default is used if set; what happens
// otherwise is the component's to say.
type Dimension struct {
	Name    string  `mapstructure:"name"`
	Default *string `mapstructure:"default"`
	// prevent unkeyed literal initialization
	_ struct{}
}

// Check returns an error for each configured dimension whose name is empty,
// repeats an earlier one, or is one of reserved (set by the component
// itself).
func Check(dims []Dimension, reserved ...string) []error {
	seen := make(map[string]bool, len(reserved)+len(dims))
	for _, name := range reserved {
		seen[name] = true
	}
	var errs []error
	for i, d := range dims {
		switch {
		case d.Name == "":
			errs = append(errs, fmt.Errorf("dimensions[%d]: name must not be empty", i))
		case seen[d.Name]:
			errs = append(errs, fmt.Errorf("dimensions[%d]: duplicate or reserved dimension %q", i, d.Name))
		}
		seen[d.Name] = true
	}
	return errs
}

// Names returns the names of dims, in order.
func Names(dims []Dimension) []string {
	names := make([]string, len(dims))
	for i, d := range dims {
		names[i] = d.Name
	}
	return names
}
