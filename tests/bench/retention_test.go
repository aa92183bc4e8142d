package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// retentionRun makes a run of samples every 5 s for 360 s, and two more
// after the producer stopped, whose database size is size(t) bytes and
// whose windows cancel rate(t) orders a second.
func retentionRun(size, rate func(t float64) float64) retentionResult {
	res := retentionResult{DurationS: 360, WarmupS: 180, RetentionEveryS: 60}
	for t := 0.0; t <= 370; t += 5 {
		s := retentionSample{T: t, DBBytes: int64(size(t))}
		if t > 0 {
			s.WindowS, s.CancelsPerS, s.PerCreated, s.LagP99Ms = 5, rate(t), rate(t)/1000, 20
		}
		res.Samples = append(res.Samples, s)
	}
	return res
}

func TestJudgeRetentionFlat(t *testing.T) {
	t.Parallel()
	// Growing until the warm-up ends, then flat with a small sawtooth.
	res := retentionRun(func(t float64) float64 {
		if t > 360 {
			return 1e9
		}
		if t < 180 {
			return t * 1e6
		}
		return 180e6 + float64(int(t)%60)*0.05e6
	}, func(float64) float64 { return 500 })
	judgeRetention(&res)
	require.True(t, res.SizeMB.Judged)
	require.InDelta(t, 182.75, res.SizeMB.First, 0.01, "largest size of the first third, 180 to 240 s")
	require.InDelta(t, 182.75, res.SizeMB.Last, 0.01)
	require.InDelta(t, 0, res.SizeMB.Change, 1e-9)
	require.InDelta(t, 0, res.SizeSlopeMBMin, 1, "no trend after the warm-up")
	require.True(t, res.CancelsPerS.Judged)
	require.InDelta(t, 0, res.CancelsPerS.Change, 1e-9)
	require.Equal(t, "met", driftVerdict(res.CancelsPerS, 0.1))
	require.InDelta(t, 0.5, res.PerCreated.Last, 1e-9)
}

func TestJudgeRetentionGrowing(t *testing.T) {
	t.Parallel()
	// 1 MB a second throughout: the last third's largest size is 360 MB,
	// the first's 235 MB; the throughput drops by a fifth. The samples after
	// the producer stopped (365 and 370 s) are not judged.
	res := retentionRun(func(t float64) float64 {
		if t > 360 {
			return 1e9
		}
		return t * 1e6
	}, func(t float64) float64 {
		if t >= 300 {
			return 400
		}
		return 500
	})
	judgeRetention(&res)
	require.True(t, res.SizeMB.Judged)
	require.InDelta(t, 235, res.SizeMB.First, 0.01)
	require.InDelta(t, 360, res.SizeMB.Last, 0.01)
	require.InDelta(t, 360.0/235-1, res.SizeMB.Change, 0.001)
	require.InDelta(t, 60, res.SizeSlopeMBMin, 0.01, "1 MB/s is 60 MB/min")
	require.InDelta(t, -0.2, res.CancelsPerS.Change, 1e-9)
	require.Equal(t, "missed", driftVerdict(res.CancelsPerS, 0.1))
	require.InDelta(t, -0.2, res.PerCreated.Change, 1e-9)
}

func TestJudgeRetentionTooShort(t *testing.T) {
	t.Parallel()
	res := retentionRun(func(t float64) float64 { return t * 1e6 }, func(float64) float64 { return 500 })
	res.WarmupS, res.DurationS = 25, 70
	judgeRetention(&res)
	require.False(t, res.SizeMB.Judged, "thirds of 15 s are shorter than the retention cycle")
	require.Contains(t, res.SizeMB.Why, "shorter than one 60 s retention cycle")
	require.True(t, res.CancelsPerS.Judged, "throughput is judged in short runs too")
	require.Contains(t, driftVerdict(thirds{Why: "no sample"}, 0.1), "not judged")
}

func TestGrowingTables(t *testing.T) {
	t.Parallel()
	res := retentionRun(func(t float64) float64 { return 100e6 }, func(float64) float64 { return 500 })
	for i := range res.Samples {
		s := &res.Samples[i]
		s.Tables = map[string]int64{"orders": 50e6, "river_job": int64(s.T * 1e5)}
	}
	judgeRetention(&res)
	list, verdict := growingTables(res, 0.1)
	require.Equal(t, "missed: river_job", verdict, "river_job grows from 23.5 to 36 MB while the total stays flat")
	require.Contains(t, list, "river_job 23.5 → 36.0")
	require.NotContains(t, list, "orders")
	require.True(t, res.SizeMB.Judged)
	require.InDelta(t, 0, res.SizeMB.Change, 1e-9)
}

func TestCompareThirdsEmpty(t *testing.T) {
	t.Parallel()
	got := compareThirds(nil, 0, 90, func(retentionSample) (float64, bool) { return 1, true }, median)
	require.False(t, got.Judged)
	require.NotEmpty(t, got.Why)
}

func TestRetentionFlags(t *testing.T) {
	t.Parallel()
	cfg, err := parseFlags([]string{"--quick"})
	require.NoError(t, err)
	require.Equal(t, 70*time.Second, cfg.retention.duration)
	require.False(t, cfg.retention.compare, "--quick runs the purge-on run only")
	require.Contains(t, cfg.scenarios, "retention")

	cfg, err = parseFlags([]string{"--quick", "--retention-duration", "2m", "--retention-compare"})
	require.NoError(t, err)
	require.Equal(t, 2*time.Minute, cfg.retention.duration, "flags given explicitly win over --quick")
	require.True(t, cfg.retention.compare)

	cfg, err = parseFlags(nil)
	require.NoError(t, err)
	require.Equal(t, 6*time.Minute, cfg.retention.duration)
	require.Equal(t, 3*time.Minute, cfg.retention.warmup)

	_, err = parseFlags([]string{"--retention-duration", "1m", "--retention-warmup", "2m"})
	require.ErrorContains(t, err, "--retention-warmup")
	_, err = parseFlags([]string{"--retention-purge-after", "0s"})
	require.ErrorContains(t, err, "--retention-purge-after")
}
