package invariant

import "strings"

// Result is the outcome of checking one invariant.
type Result struct {
	// Name is one of PaidXorCancelled, ReleasedOnce, Conserved,
	// NoOverduePending, MoneyExact, ResolvedOnce and ClosedSettled.
	Name string
	// OK is true when nothing violates the invariant.
	OK bool
	// Detail describes the first offending rows (orders, SKUs, accounts,
	// coupons), one per entry; empty when OK.
	Detail []string
}

// Report is the outcome of one Check: one Result per invariant checked, in
// the order of docs/design.md.
type Report struct {
	Results []Result
}

// OK reports whether every invariant holds.
func (r Report) OK() bool {
	for _, res := range r.Results {
		if !res.OK {
			return false
		}
	}
	return true
}

// Result returns the result of the invariant called name, and whether the
// report has one.
func (r Report) Result(name string) (Result, bool) {
	for _, res := range r.Results {
		if res.Name == name {
			return res, true
		}
	}
	return Result{}, false
}

// String prints one line per invariant, "ok" or "VIOLATED" then its name,
// each violation followed by its detail lines, indented.
func (r Report) String() string {
	var b strings.Builder
	for _, res := range r.Results {
		if res.OK {
			b.WriteString("ok       ")
		} else {
			b.WriteString("VIOLATED ")
		}
		b.WriteString(res.Name)
		b.WriteByte('\n')
		for _, d := range res.Detail {
			b.WriteString("         ")
			b.WriteString(d)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
