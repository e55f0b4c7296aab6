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
	ints := []struct {
		name string
		dst  *int
		min  int
	}{
		{EnvWriters, &k.Writers, 1},
		{EnvPerWriter, &k.PerWriter, 1},
		{EnvCLIPerWriter, &k.CLIPerWriter, 1},
		{EnvSlowPerWriter, &k.SlowPerWriter, 1},
		{EnvQueueAgents, &k.QueueAgents, 3},
	}
	for _, v := range ints {
		s, ok := lookup(v.name)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return k, fmt.Errorf("%w: %s=%q is not an integer: %w", ErrKnob, v.name, s, err)
		}
		if n < v.min {
			return k, fmt.Errorf("%w: %s=%d, want at least %d", ErrKnob, v.name, n, v.min)
		}
		*v.dst = n
	}
	if s, ok := lookup(EnvPauseUS); ok {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return k, fmt.Errorf("%w: %s=%q is not an integer number of microseconds: %w", ErrKnob, EnvPauseUS, s, err)
		}
		if n < 0 {
			return k, fmt.Errorf("%w: %s=%d is negative", ErrKnob, EnvPauseUS, n)
		}
		k.Pause = time.Duration(n) * time.Microsecond
	}
	durs := []struct {
		name string
		dst  *time.Duration
	}{
		{EnvLockTimeout, &k.LockTimeout},
		{EnvLinTimeout, &k.LinTimeout},
	}
	for _, v := range durs {
		s, ok := lookup(v.name)
		if !ok {
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return k, fmt.Errorf("%w: %s=%q is not a Go duration such as 10s: %w", ErrKnob, v.name, s, err)
		}
		if d <= 0 {
			return k, fmt.Errorf("%w: %s=%s, want a positive duration", ErrKnob, v.name, d)
		}
		*v.dst = d
	}
	return k, nil
}
