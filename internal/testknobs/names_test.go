package testknobs_test

import (
	"testing"

	"github.com/swarmops/swarmops/crashsweep"
	"github.com/swarmops/swarmops/internal/testknobs"
)

// TestParseAgreesWithCrashsim: every canary crashsim names parses to the
// same weakening here (SWARMOPS_TEST_CANARY uses these names), lists
// parse to the union, and an unknown name is an error.
func TestParseAgreesWithCrashsim(t *testing.T) {
	for _, c := range crashsweep.Canaries {
		w, err := testknobs.Parse(c.Name)
		if err != nil || w != c.Weaken {
			t.Errorf("Parse(%q) = %v, %v; crashsim's weakening is %v", c.Name, w, err, c.Weaken)
		}
	}
	w, err := testknobs.Parse("server-early-reply,skip-datasync")
	if err != nil || w != testknobs.ServerEarlyReply|testknobs.SkipDatasync {
		t.Errorf("Parse of a list = %v, %v", w, err)
	}
	for _, bad := range []string{"", "nope", "skip-datasync,"} {
		if _, err := testknobs.Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}
