// Package defaults fills the options a caller left unset with their
// defaults, so that each constructor says only which default an option takes.
// An option whose zero value alone means its default (negative values
// meaning themselves) needs nothing here: cmp.Or(v, def).
package defaults

// Number is the types an option counted or measured in can have:
// sizes, limits, durations (time.Duration is an int64) and rates.
type Number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~float32 | ~float64
}

// Positive sets *v to def unless *v is above zero: for an option whose zero
// (or negative) value means its default.
func Positive[T Number](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
