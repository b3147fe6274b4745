package httpapi

import "time"

// SetFleetEvery samples the fleet overview every d in the servers made
// from now on that do not set Config.FleetEvery (the projector's);
// restore puts the default back (cleanup, once they stopped).
func SetFleetEvery(d time.Duration) (restore func()) {
	old := defaultFleetEvery
	defaultFleetEvery = d
	return func() { defaultFleetEvery = old }
}

// SetSearchScanBudget bounds the sessions a search examines to n in the
// servers made from now on that do not set Config.SearchScanBudget (the
// projector's); restore puts the default back (cleanup).
func SetSearchScanBudget(n int) (restore func()) {
	old := defaultSearchScanBudget
	defaultSearchScanBudget = n
	return func() { defaultSearchScanBudget = old }
}
