package main

import (
	"math"
	"slices"
)

// median returns the median of xs (0 for none).
func median(xs []float64) float64 {
	return percentile(xs, 50)
}

// lowerMedian is the median of xs that is one of them: the lower middle
// value of an even count (0 for none).
func lowerMedian(xs []int) int {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// percentile returns the p-th percentile of xs (0 to 100) by linear
// interpolation between the closest ranks; 0 for an empty slice.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return percentileSorted(s, p)
}

// percentileSorted is percentile for an already sorted slice.
func percentileSorted(s []float64, p float64) float64 {
	if len(s) == 0 {
		return 0
	}
	rank := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(rank))
	hi := int(math.Ceil(rank))
	return s[lo] + (s[hi]-s[lo])*(rank-float64(lo))
}
