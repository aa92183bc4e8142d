package stripe

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/gateway"
)

// Stripe writes amounts in a currency's minor unit, an integer: 1050 is
// EUR 10.50, but 500 is JPY 500 and 5120 is KWD 5.120
// (https://docs.stripe.com/currencies). These are the currencies whose
// minor unit is not a hundredth.
var (
	// zeroDecimal currencies: the amount is in major units.
	zeroDecimal = map[string]bool{
		"BIF": true, "CLP": true, "DJF": true, "GNF": true, "JPY": true,
		"KMF": true, "KRW": true, "MGA": true, "PYG": true, "RWF": true,
		"UGX": true, "VND": true, "VUV": true, "XAF": true, "XOF": true,
		"XPF": true,
	}
	// threeDecimal currencies: the amount is in thousandths.
	threeDecimal = map[string]bool{
		"BHD": true, "JOD": true, "KWD": true, "OMR": true, "TND": true,
	}
)

// Exponent is how many decimal digits the minor unit of currency (ISO 4217,
// any case) has in Stripe's API: 0 for zero-decimal currencies (JPY), 3 for
// three-decimal ones (KWD), else 2. ISK, HUF and TWD are 2: Stripe keeps two
// decimals in amounts of them for backwards compatibility.
func Exponent(currency string) int {
	c := strings.ToUpper(currency)
	switch {
	case zeroDecimal[c]:
		return 0
	case threeDecimal[c]:
		return 3
	default:
		return 2
	}
}

// Major converts an amount in Stripe's minor units of currency to the
// decimal amount of the gateway contract, exactly: Major(1050, "eur") is
// "10.50", Major(500, "jpy") is "500", Major(5120, "kwd") is "5.120".
// A negative amount, or one with more integer digits than
// gateway.ParseAmount accepts, is an error.
func Major(minor int64, currency string) (gateway.Amount, error) {
	if minor < 0 {
		return "", fmt.Errorf("amount %d %s is negative", minor, currency)
	}
	e := Exponent(currency)
	s := strconv.FormatInt(minor, 10)
	if e > 0 {
		if len(s) <= e {
			s = strings.Repeat("0", e-len(s)+1) + s
		}
		s = s[:len(s)-e] + "." + s[len(s)-e:]
	}
	a, err := gateway.ParseAmount(s)
	if err != nil {
		return "", fmt.Errorf("amount %d %s: %w", minor, currency, err)
	}
	return a, nil
}

// Minor converts a decimal amount of currency to Stripe's minor units,
// exactly: Minor("10.5", "EUR") is 1050, Minor("500", "JPY") is 500,
// Minor("5.12", "KWD") is 5120. An amount with more fraction digits than
// the currency's minor unit (other than trailing zeros: "500.00" JPY is
// 500), outside the grammar of gateway.ParseAmount, or too large for an
// int64, is an error: nothing is rounded.
func Minor(a gateway.Amount, currency string) (int64, error) {
	if _, err := gateway.ParseAmount(string(a)); err != nil {
		return 0, err
	}
	e := Exponent(currency)
	intPart, frac, _ := strings.Cut(string(a), ".")
	frac = strings.TrimRight(frac, "0")
	if len(frac) > e {
		return 0, fmt.Errorf("amount %s has more decimals than %s has (%d)", a, strings.ToUpper(currency), e)
	}
	digits := intPart + frac + strings.Repeat("0", e-len(frac))
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("amount %s %s is too large", a, strings.ToUpper(currency))
	}
	return n, nil
}
