// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package advice

import "github.com/DataDog/sketches-go/ddsketch"

// Sketch constants: 1 % relative accuracy, at most 2048 bins. The fleet
// advice and the hedging client's own delay estimator (internal/hedgecore)
// both use NewSketch, so that a local and a fleet quantile have one accuracy.
const (
	sketchAccuracy = 0.01
	sketchMaxBins  = 2048
)

// NewSketch returns an empty DDSketch of streamstall's mapping: the
// logarithmic mapping of sketchAccuracy, collapsing its lowest bins past
// sketchMaxBins.
func NewSketch() *ddsketch.DDSketch {
	// The arguments are constants that LogCollapsingLowestDenseDDSketch accepts.
	s, err := ddsketch.LogCollapsingLowestDenseDDSketch(sketchAccuracy, sketchMaxBins)
	if err != nil {
		panic(err)
	}
	return s
}
