package main

import (
	"errors"
	"os"
	"time"

	"github.com/swarmops/swarmops/internal/testknobs"
)

// landPauseHook installs the test hook testknobs.LandBeforeCommit when
// SWARMOPS_TEST_LAND_PAUSE=PATH is set: before its first commit attempt,
// land creates PATH.ready and waits (at most a minute) until PATH.go exists.
// A test uses it to move the target in between, so the lost race, and the
// re-merge after it, happen every time rather than by luck. Tests only.
func landPauseHook(getenv func(string) string) error {
	p := getenv("SWARMOPS_TEST_LAND_PAUSE")
	if p == "" {
		return nil
	}
	testknobs.LandBeforeCommit = func(attempt int) {
		if attempt != 1 {
			return
		}
		os.WriteFile(p+".ready", nil, 0o644)
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			if _, err := os.Stat(p + ".go"); !errors.Is(err, os.ErrNotExist) {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}
