package contention

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// The environment variables that size a run. A malformed value is a hard
// error naming the variable: a typo that silently fell back to the default
// would be a run believed to have tested something it did not.
const (
	EnvWriters     = "SWARMOPS_CONTENTION_WRITERS"
	EnvPerWriter   = "SWARMOPS_CONTENTION_PER_WRITER"
	EnvPauseUS     = "SWARMOPS_CONTENTION_PAUSE_US"
	EnvLockTimeout = "SWARMOPS_CONTENTION_LOCK_TIMEOUT"
	// EnvCLIPerWriter sizes the default CLI-level specs, where every
	// operation is a process and a loser's retry is a new process: under
	// 32-way contention on one ref that costs a process start per lost
	// round, so the default is small.
	EnvCLIPerWriter = "SWARMOPS_CONTENTION_CLI_PER_WRITER"
	// EnvSlowPerWriter sizes the specs labelled "slow" (32 × 1,000 unless set).
	EnvSlowPerWriter = "SWARMOPS_CONTENTION_SLOW_PER_WRITER"
	// EnvQueueAgents sizes the gated-land spec: that many agent
	// processes land with a check, two of them failing it (at least 3).
	EnvQueueAgents = "SWARMOPS_CONTENTION_QUEUE_AGENTS"
	// EnvLinTimeout bounds each porcupine check; running out is a failure.
	EnvLinTimeout = "SWARMOPS_CONTENTION_LIN_TIMEOUT"
)

// ErrKnob is wrapped by every error about a malformed knob.
var ErrKnob = errors.New("contention: malformed knob")

// Knobs size a contention run.
type Knobs struct {
	Writers       int           // concurrent writers (processes or goroutines)
	PerWriter     int           // operations per writer in the default specs
	CLIPerWriter  int           // operations per agent in the default CLI specs
	SlowPerWriter int           // operations per writer in the slow specs
	QueueAgents   int           // agent processes of the gated-land spec
	Pause         time.Duration // pause between one writer's operations
	LockTimeout   time.Duration // Options.LockTimeout of every writer
	LinTimeout    time.Duration // porcupine time budget per ref history
}

// DefaultKnobs are sized for CI on 2 cores: 32 writers (the design point,
// and enough to make a lock that is not first-come, first-served show its
// unfairness), few operations each, so every default spec finishes in well
// under a minute.
func DefaultKnobs() Knobs {
	return Knobs{
		Writers:       32,
		PerWriter:     10,
		CLIPerWriter:  2,
		SlowPerWriter: 1000,
		QueueAgents:   16,
		Pause:         0,
		LockTimeout:   10 * time.Second,
		LinTimeout:    60 * time.Second,
	}
}

// KnobsFromEnv returns DefaultKnobs overridden by the environment.
func KnobsFromEnv() (Knobs, error) {
	return knobsFrom(os.LookupEnv)
}

func knobsFrom(lookup func(string) (string, bool)) (Knobs, error) {
	k := DefaultKnobs()
	atLeast := func(min int) func(int) string {
		return func(n int) string {
			if n < min {
				return fmt.Sprintf(", want at least %d", min)
			}
			return ""
		}
	}
	positive := func(d time.Duration) string {
		if d <= 0 {
			return ", want a positive duration"
		}
		return ""
	}
	pauseUS := int64(k.Pause / time.Microsecond)
	errs := []error{
		readKnob(lookup, EnvWriters, &k.Writers, strconv.Atoi, "an integer", atLeast(1)),
		readKnob(lookup, EnvPerWriter, &k.PerWriter, strconv.Atoi, "an integer", atLeast(1)),
		readKnob(lookup, EnvCLIPerWriter, &k.CLIPerWriter, strconv.Atoi, "an integer", atLeast(1)),
		readKnob(lookup, EnvSlowPerWriter, &k.SlowPerWriter, strconv.Atoi, "an integer", atLeast(1)),
		readKnob(lookup, EnvQueueAgents, &k.QueueAgents, strconv.Atoi, "an integer", atLeast(3)),
		readKnob(lookup, EnvPauseUS, &pauseUS, func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) },
			"an integer number of microseconds", func(n int64) string {
				if n < 0 {
					return " is negative"
				}
				return ""
			}),
		readKnob(lookup, EnvLockTimeout, &k.LockTimeout, time.ParseDuration, "a Go duration such as 10s", positive),
		readKnob(lookup, EnvLinTimeout, &k.LinTimeout, time.ParseDuration, "a Go duration such as 10s", positive),
	}
	k.Pause = time.Duration(pauseUS) * time.Microsecond
	for _, err := range errs {
		if err != nil {
			return k, err
		}
	}
	return k, nil
}

// readKnob stores in dst the value of the variable name, when lookup has
// it: parsed by parse (syntax says what it must look like) and refused
// when bad says what is wrong with it (an empty string: nothing).
func readKnob[T any](lookup func(string) (string, bool), name string, dst *T, parse func(string) (T, error), syntax string, bad func(T) string) error {
	s, ok := lookup(name)
	if !ok {
		return nil
	}
	v, err := parse(s)
	if err != nil {
		return fmt.Errorf("%w: %s=%q is not %s: %w", ErrKnob, name, s, syntax, err)
	}
	if msg := bad(v); msg != "" {
		return fmt.Errorf("%w: %s=%v%s", ErrKnob, name, v, msg)
	}
	*dst = v
	return nil
}
