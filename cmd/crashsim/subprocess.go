package main

import (
	"context"
	"errors"
	"io"

	"github.com/swarmops/swarmops/scenarios"
)

func subprocessSweep(ctx context.Context, scs []*scenarios.Scenario, o *options, stdout, stderr io.Writer) (int, error) {
	return exitViolation, errors.New("--subprocess: not built yet")
}
