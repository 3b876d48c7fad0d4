package table

import "time"

// Google enforces a Provisioned Throughput order's quota over a window whose
// length depends on the order's size and the model. Its "Use Provisioned
// Throughput" page says: "Vertex AI applies a dynamic window while enforcing
// Provisioned Throughput quota for Gemini models ... Instead of a fixed
// window, Vertex AI enforces the quota over a flexible window that
// automatically adjusts, depending on the model type and the number of GSUs
// that you've provisioned. As a result, you might temporarily experience
// prioritized traffic that exceeds your quota amount on a per-second basis
// in some cases. However, you must not exceed your quota over the window
// duration." For Gemini it has given the ranges: up to 3 GSUs about 40 to
// 120 s, under 50 GSUs 5 to 30 s, 50 or more 1 to 5 s. Other models document
// longer windows (Gemini image models up to 1,230 s for one GSU; Veo and Omni
// 2,000 s for up to 9 GSUs), and every such page says they may change.
//
// The default window of a size is the lower bound of its range. That is
// right by construction, whichever window in the range Google uses: metering
// capacity x w over any sliding window of w <= Google's W, the most the
// router lets through in a burst onto an idle PT is capacity x w, within the
// capacity x W Google admits, and its long-run rate is the capacity either
// way. A window shorter than Google's never admits a burst Google's would
// refuse; it only absorbs smaller ones than the PT could. A longer window
// would spill less still, and send bursts that Google answers as a full PT.
// What no window can rule out is two full windows of the router's inside
// one of Google's that is not a whole number of them (a burst at the end of
// one, another at the start of the next): Google then answers the second as
// a full PT, and the router spills it (router/policy, lane.go), as it does
// for any PT full.
const (
	// SmallPTWindow is the window of an order of up to SmallPTGSUs GSUs:
	// Google's 40 to 120 s.
	SmallPTWindow = 40 * time.Second
	// MediumPTWindow is the window of an order under LargePTGSUs GSUs:
	// Google's 5 to 30 s.
	MediumPTWindow = 5 * time.Second
	// LargePTWindow is the window of an order of LargePTGSUs GSUs or more,
	// and of one whose size is unknown: Google's 1 to 5 s. One second is
	// also the shortest window Google documents for any size, so an order
	// the table gives no GSUs for is never metered over a longer window
	// than its own.
	LargePTWindow = time.Second
	// SmallPTGSUs is the largest order of the small range.
	SmallPTGSUs = 3
	// LargePTGSUs is the smallest order of the large range.
	LargePTGSUs = 50
	// MaxProvisionedWindow is the longest window a pool may set: the longest
	// Google documents for any model (2,000 s).
	MaxProvisionedWindow = 2000 * time.Second
)

// DefaultProvisionedWindow is the window over which the router meters an
// order of gsus GSUs when the pool sets none: the lower bound of Google's
// range for its size (see above). An unknown size (0) gets the shortest.
func DefaultProvisionedWindow(gsus int64) time.Duration {
	switch {
	case gsus <= 0 || gsus >= LargePTGSUs:
		return LargePTWindow
	case gsus <= SmallPTGSUs:
		return SmallPTWindow
	default:
		return MediumPTWindow
	}
}

// WindowFor is the window over which the router meters the token
// limit of a provisioned region of gsus GSUs: the pool's window when it sets
// one, else DefaultProvisionedWindow(gsus).
//
// A set window is not capped by the size's range: Google documents longer
// windows for other models than Gemini's text models, and may change them,
// so an operator who sets one knows more than the range. A set window longer
// than Google's real one costs little: the burst Google refuses comes back
// as a full PT (a 429 "Exceeded the Provisioned Throughput" when dedicated, an
// answer served on demand when spillover), and the router keeps calls off
// the PT and spills them, where they would have gone anyway.
func (p Provisioned) WindowFor(gsus int64) time.Duration {
	if p.Window.Duration > 0 {
		return p.Window.Duration
	}
	return DefaultProvisionedWindow(gsus)
}
