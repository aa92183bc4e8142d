// Package metricstest reads a sidecar's metrics in tests with
// client_golang's own parser and data model, never by matching text: from
// the sidecar's registry in the same process, or from a running sidecar's
// /metrics page (Scrape).
//
// It is public so that the tests in tests/, which run the sidecar as a
// process, and the sidecar's own tests share it.
package metricstest

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape returns a Gatherer that GETs the metrics page at url (for
// example "http://127.0.0.1:9090/metrics") at each Gather and parses it.
func Scrape(ctx context.Context, url string) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", url, err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", url, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("scrape %s: HTTP %d", url, resp.StatusCode)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		byName, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", url, err)
		}
		fams := make([]*dto.MetricFamily, 0, len(byName))
		for _, f := range byName {
			fams = append(fams, f)
		}
		return fams, nil
	})
}

// Sum adds the values of family name's samples whose labels include every
// pair of labels (name, value, name, value, ...): a counter's or gauge's
// value, a histogram's or summary's count of observations. found is false
// when no sample matches.
func Sum(g prometheus.Gatherer, name string, labels ...string) (sum float64, found bool, err error) {
	if len(labels)%2 != 0 {
		return 0, false, fmt.Errorf("metric %s: labels must come in pairs of name and value, got %q", name, labels)
	}
	fams, err := g.Gather()
	if err != nil {
		return 0, false, fmt.Errorf("gather metrics: %w", err)
	}
	i := slices.IndexFunc(fams, func(f *dto.MetricFamily) bool { return f.GetName() == name })
	if i < 0 {
		return 0, false, nil
	}
	for _, m := range fams[i].GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		case m.Summary != nil:
			sum += float64(m.Summary.GetSampleCount())
		}
	}
	return sum, found, nil
}

func hasLabels(m *dto.Metric, pairs []string) bool {
	for i := 0; i < len(pairs); i += 2 {
		if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
			return l.GetName() == pairs[i] && l.GetValue() == pairs[i+1]
		}) {
			return false
		}
	}
	return true
}
