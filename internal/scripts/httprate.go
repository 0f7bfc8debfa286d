package scripts

// The scripts of the go-chi/httprate counter (package httpratecounter).
// They are not algorithms and take no driver: httprate makes the decision
// itself and only keeps its counts in Redis.
var (
	// HTTPRateIncrement adds to one window's counter and renews its
	// expiry in one step.
	HTTPRateIncrement = mustRead("httprate_increment.lua")
	// HTTPRateAdmit adds to one window's counter only if httprate's
	// weighted count, on Redis's clock, leaves room for the amount.
	HTTPRateAdmit = mustRead("httprate_admit.lua")
)
