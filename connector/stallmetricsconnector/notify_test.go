// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

package stallmetricsconnector

import (
	"context"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// notifying records into sink and announces each export, so that tests of
// the flush loop wait on a channel instead of sleeping.
type notifying struct {
	sink     *consumertest.MetricsSink
	exported chan<- pmetric.Metrics
}

func (notifying) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (n notifying) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	err := n.sink.ConsumeMetrics(ctx, md)
	n.exported <- md
	return err
}
