package props

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// scaleEnv names the knob that multiplies every property's default number of
// rapid checks (nightly runs set it to 10 or more).
const scaleEnv = "SWARMOPS_PROPS_SCALE"

// explicitChecks records whether -rapid.checks was given on the command
// line; an explicit flag wins over the per-property defaults and the knob.
var explicitChecks bool

// explicitSteps records whether -rapid.steps was given.
var explicitSteps bool

func TestMain(m *testing.M) {
	flag.Parse()
	flag.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "rapid.checks":
			explicitChecks = true
		case "rapid.steps":
			explicitSteps = true
		}
	})
	os.Exit(m.Run())
}

// parseScale reads the scale knob. An unset or empty variable is 1; anything
// but a positive integer is an error naming the variable, never a silent
// default, because a nightly run that fell back to 1 would believe it had
// tested ten times more than it did.
func parseScale(lookup func(string) (string, bool)) (int, error) {
	v, ok := lookup(scaleEnv)
	if !ok || v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1_000_000 {
		return 0, fmt.Errorf("%s=%q: want a positive integer (a multiplier of each property's default rapid checks)", scaleEnv, v)
	}
	return n, nil
}

// check runs prop with rapid, using defChecks × the scale knob as the number
// of checks unless -rapid.checks was given. Tests that call it must not run
// in parallel with each other: rapid reads its check count from a global
// flag.
func check(t *testing.T, defChecks int, prop func(*rapid.T)) {
	t.Helper()
	checkSteps(t, defChecks, 0, prop)
}

// checkSteps is check with a different average number of state-machine
// steps per check (0: rapid's default, or -rapid.steps if given), for
// machines whose bugs need long histories.
func checkSteps(t *testing.T, defChecks, steps int, prop func(*rapid.T)) {
	t.Helper()
	scale, err := parseScale(os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	if !explicitChecks {
		if err := flag.Set("rapid.checks", strconv.Itoa(defChecks*scale)); err != nil {
			t.Fatalf("setting -rapid.checks: %v", err)
		}
	}
	if steps > 0 && !explicitSteps {
		old := flag.Lookup("rapid.steps").Value.String()
		if err := flag.Set("rapid.steps", strconv.Itoa(steps)); err != nil {
			t.Fatalf("setting -rapid.steps: %v", err)
		}
		defer flag.Set("rapid.steps", old)
	}
	rapid.Check(t, prop)
}

func TestScaleKnobRejectsMalformedValues(t *testing.T) {
	env := func(v string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			if k != scaleEnv {
				return "", false
			}
			return v, true
		}
	}
	for _, bad := range []string{"0", "-3", "ten", "1.5", " 2", "99999999999"} {
		_, err := parseScale(env(bad))
		if err == nil {
			t.Errorf("%s=%q accepted; want an error", scaleEnv, bad)
			continue
		}
		if want := scaleEnv; !strings.Contains(err.Error(), want) {
			t.Errorf("%s=%q: error %q does not name the variable", scaleEnv, bad, err)
		}
	}
	for v, want := range map[string]int{"": 1, "1": 1, "10": 10} {
		got, err := parseScale(env(v))
		if err != nil || got != want {
			t.Errorf("%s=%q: got %d, %v; want %d, nil", scaleEnv, v, got, err, want)
		}
	}
	if got, err := parseScale(func(string) (string, bool) { return "", false }); err != nil || got != 1 {
		t.Errorf("unset %s: got %d, %v; want 1, nil", scaleEnv, got, err)
	}
}
