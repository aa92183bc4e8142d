package stripe

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
)

// Minor units convert exactly both ways, by the currency's exponent in
// Stripe's API.
func TestMinorUnits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		minor    int64
		currency string
		major    gateway.Amount
	}{
		{1050, "eur", "10.50"},
		{1, "usd", "0.01"},
		{0, "usd", "0.00"},
		{99, "USD", "0.99"},
		{500, "jpy", "500"},
		{0, "jpy", "0"},
		{1, "krw", "1"},
		{123456, "vnd", "123456"},
		{5120, "kwd", "5.120"},
		{5, "bhd", "0.005"},
		{1000, "tnd", "1.000"},
		{500, "isk", "5.00"},
		{100000, "huf", "1000.00"},
		{999999999999999, "jpy", "999999999999999"},
		{99999999999999999, "usd", "999999999999999.99"},
	} {
		got, err := Major(tc.minor, tc.currency)
		require.NoError(t, err, "%d %s", tc.minor, tc.currency)
		require.Equal(t, tc.major, got, "%d %s", tc.minor, tc.currency)
		back, err := Minor(got, tc.currency)
		require.NoError(t, err)
		require.Equal(t, tc.minor, back, "%s %s", got, tc.currency)
	}

	// Amounts written with fewer or extra zero decimals.
	for _, tc := range []struct {
		major    gateway.Amount
		currency string
		minor    int64
	}{
		{"10.5", "EUR", 1050},
		{"10", "EUR", 1000},
		{"500.00", "JPY", 500},
		{"5.12", "KWD", 5120},
		{"5.1", "KWD", 5100},
		{"0.000", "KWD", 0},
	} {
		got, err := Minor(tc.major, tc.currency)
		require.NoError(t, err, "%s %s", tc.major, tc.currency)
		require.Equal(t, tc.minor, got, "%s %s", tc.major, tc.currency)
	}

	// Nothing is rounded; nothing overflows.
	for _, tc := range []struct {
		major    gateway.Amount
		currency string
	}{
		{"10.505", "EUR"},
		{"500.5", "JPY"},
		{"5.1201", "KWD"},
		{"-1", "EUR"},
		{"1e3", "EUR"},
		{"NaN", "EUR"},
		{"", "EUR"},
		{"999999999999999.999999", "EUR"},
	} {
		_, err := Minor(tc.major, tc.currency)
		require.Error(t, err, "%s %s", tc.major, tc.currency)
	}
	_, err := Major(-1, "eur")
	require.Error(t, err)
	_, err = Major(9223372036854775807, "jpy")
	require.Error(t, err, "more integer digits than the contract allows")
}

func TestExponent(t *testing.T) {
	t.Parallel()
	require.Equal(t, 0, Exponent("jpy"))
	require.Equal(t, 0, Exponent("XOF"))
	require.Equal(t, 3, Exponent("kwd"))
	require.Equal(t, 2, Exponent("eur"))
	require.Equal(t, 2, Exponent("isk"))
}
