// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package fakellm

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The Gemini SDK pulls in OpenCensus, whose view worker starts at init and runs for the
	// life of the process: it is not a goroutine any test started.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}
